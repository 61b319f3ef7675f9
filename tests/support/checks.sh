# checks.sh: what the test scripts share. Source it after `set -u`:
#   source "$(dirname "$0")/../support/checks.sh"
# tmp        a scratch folder, removed at exit (named after the script)
# fail MSG   reports a failed check and counts it; the script goes on
# finish WHAT  ends the script: "all WHAT checks passed" and status 0, or the
#            number of failures and status 1
tmp=$(mktemp -d "/tmp/quorum_$(basename "$0" .sh)_XXXXXX")
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s)"
    exit 1
  fi
  echo "all $1 checks passed"
  exit 0
}

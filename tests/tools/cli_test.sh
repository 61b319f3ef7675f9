#!/bin/sh
# cli_test.sh VERSION TOOL...: every tool answers --version with
# "NAME (quorum) VERSION" and status 0, --help with status 0, and a usage
# error (an unknown flag; a value out of range) with status 2 and a message
# on stderr.
set -u
version=$1
shift
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
expect_status() {  # expect_status WANT DESCRIPTION COMMAND...
  want=$1 what=$2
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  got=$?
  [ "$got" = "$want" ] || fail "$what: exit status $got, expected $want; stderr: $(cat "$tmp/err")"
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for tool in "$@"; do
  name=$(basename "$tool")
  expect_status 0 "$name --version" "$tool" --version
  first=$(head -n 1 "$tmp/out")
  [ "$first" = "$name (quorum) $version" ] || fail "$name --version printed '$first'"
  expect_status 0 "$name --help" "$tool" --help
  grep -q -- '--version' "$tmp/out" || fail "$name --help does not list --version"
  expect_status 2 "$name --no-such-flag" "$tool" --no-such-flag
  # quorum-run takes what it does not know as the program to start (and then
  # misses -n); the others name the flag.
  if [ "$name" != quorum-run ]; then
    grep -q -- '--no-such-flag' "$tmp/err" || fail "$name --no-such-flag: stderr does not name the flag"
  fi
done
# A value a flag's check refuses is a usage error too.
for tool in "$@"; do
  case $(basename "$tool") in
    quorum-run)
      expect_status 2 "quorum-run -n 0" "$tool" -n 0 -- true
      expect_status 2 "quorum-run -n 2 (no program)" "$tool" -n 2 ;;
    quorum-train) expect_status 2 "quorum-train --epochs 0" "$tool" --epochs 0 ;;
    quorum-bench) expect_status 2 "quorum-bench -d float8" "$tool" -d float8 ;;
  esac
done
[ $failures = 0 ] && echo "$# tools: --version, --help and usage errors as documented"
[ $failures = 0 ]

#!/bin/sh
# symbols_test.sh LIBQUORUM_SO QUORUM_H: libquorum.so exports exactly the
# functions quorum.h declares: every dynamic symbol it defines is a quorum_*
# function of the header (no C++ internals of the layers it bundles), and
# every function of the header is exported.
set -eu
lib=$1
header=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Defined dynamic symbols, without version nodes (nm -D prints "ADDR TYPE NAME").
nm -D --defined-only "$lib" | awk '$2 != "A" { sub(/@.*/, "", $3); print $3 }' | sort -u >"$tmp/exported"
grep -o '\bquorum_[a-z0-9_]*(' "$header" | tr -d '(' | sort -u >"$tmp/declared"
status=0
extra=$(comm -23 "$tmp/exported" "$tmp/declared")
if [ -n "$extra" ]; then
  echo "libquorum.so exports $(echo "$extra" | wc -l) symbols quorum.h does not declare, e.g.:"
  echo "$extra" | head -n 10
  status=1
fi
missing=$(comm -13 "$tmp/exported" "$tmp/declared")
if [ -n "$missing" ]; then
  echo "quorum.h declares functions libquorum.so does not export:"
  echo "$missing"
  status=1
fi
[ $status = 0 ] && echo "libquorum.so exports the $(wc -l <"$tmp/declared") functions of quorum.h and nothing else"
exit $status

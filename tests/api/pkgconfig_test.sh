#!/bin/sh
# pkgconfig_test.sh BUILD_DIR SOURCE: builds and runs the C API test program
# as an outside application would, only with pkg-config's flags: against the
# uninstalled build (quorum-uninstalled.pc), against an install into a
# temporary prefix (libquorum.so), and linked statically from C
# (libquorum.a with `pkg-config --static`: the C++ runtime comes from
# Libs.private). Also checks that the installed .pc names no dependency the
# library does not use.
set -eu
build=$1
source=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "== uninstalled"
flags=$(PKG_CONFIG_PATH="$build/meson-uninstalled" pkg-config --cflags --libs quorum)
echo "pkg-config: $flags"
cc -std=c11 -Wall -Werror "$source" $flags -o "$tmp/app-uninstalled"
LD_LIBRARY_PATH="$build" "$tmp/app-uninstalled"

echo "== installed, shared"
meson install -C "$build" --destdir "$tmp" --quiet >/dev/null
pc=$(find "$tmp" -name quorum.pc | head -n 1)
pcdir=$(dirname "$pc")
prefix=$(pkg-config --variable=prefix "$pc")
export PKG_CONFIG_PATH="$pcdir"
for unused in libibverbs librdmacm; do
  if pkg-config --print-requires-private quorum | grep -q "^$unused"; then
    echo "quorum.pc requires $unused, which libquorum does not use"
    exit 1
  fi
done
flags=$(pkg-config --define-variable=prefix="$tmp$prefix" --cflags --libs quorum)
echo "pkg-config: $flags"
cc -std=c11 -Wall -Werror "$source" $flags -o "$tmp/app"
libdir=$(pkg-config --define-variable=prefix="$tmp$prefix" --variable=libdir quorum)
LD_LIBRARY_PATH="$libdir" "$tmp/app"

echo "== installed, static C link"
rm -f "$libdir"/libquorum.so*
flags=$(pkg-config --define-variable=prefix="$tmp$prefix" --static --cflags --libs quorum)
echo "pkg-config --static: $flags"
cc -std=c11 -Wall -Werror "$source" $flags -o "$tmp/app-static"
if ldd "$tmp/app-static" | grep -q libquorum; then
  echo "app-static is linked against a shared libquorum"
  exit 1
fi
"$tmp/app-static"

#!/bin/sh
# pkgconfig_test.sh BUILD_DIR SOURCE: installs quorum into a temporary prefix,
# then builds and runs the C API test program as an outside application would:
# only with `pkg-config --cflags --libs quorum`.
set -eu
build=$1
source=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
meson install -C "$build" --destdir "$tmp" --quiet >/dev/null
pcdir=$(dirname "$(find "$tmp" -name quorum.pc | head -n 1)")
prefix=$(pkg-config --variable=prefix "$pcdir/quorum.pc")
export PKG_CONFIG_PATH="$pcdir"
flags=$(pkg-config --define-variable=prefix="$tmp$prefix" --cflags --libs quorum)
echo "pkg-config: $flags"
cc -std=c11 -Wall -Werror "$source" $flags -o "$tmp/app"
LD_LIBRARY_PATH=$(pkg-config --define-variable=prefix="$tmp$prefix" --variable=libdir quorum) "$tmp/app"

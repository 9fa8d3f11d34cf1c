#!/usr/bin/env bash
# Builds the out-of-tree consumer against the build tree, without installing:
# with PKG_CONFIG_PATH naming the build directory, pkg-config picks
# paddlec-uninstalled.pc (headers from the sources, the library from the
# build directory, an rpath to it), and the program runs as it is.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset PKG_CONFIG_DISABLE_UNINSTALLED LD_LIBRARY_PATH
export PKG_CONFIG_PATH="$build"
includedir=$(pkg-config --variable=includedir paddlec)
if [ "$includedir" != "$src/include" ]; then
  echo "uninstalled_consumer: FAIL: pkg-config found includedir=$includedir, not $src/include"
  exit 1
fi
cc -std=c11 "$src/tests/consumer/main.c" -o "$tmp/consumer" $(pkg-config --cflags --libs paddlec)
"$tmp/consumer"
echo "uninstalled_consumer: built and ran against $build"

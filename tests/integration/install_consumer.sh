#!/usr/bin/env bash
# Installs the built tree into a temporary prefix and builds an out-of-tree
# consumer twice: with find_package(paddlec) and with pkg-config.
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
libdir=$(ls -d "$tmp"/prefix/lib*/ | head -n1)
cmake -S "$src/tests/consumer" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/cm" >/dev/null
LD_LIBRARY_PATH="$libdir" "$tmp/cm/consumer"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc -std=c11 "$src/tests/consumer/main.c" -o "$tmp/pc_consumer" $(pkg-config --cflags --libs paddlec)
LD_LIBRARY_PATH="$libdir" "$tmp/pc_consumer"
echo "install_consumer: find_package and pkg-config consumers both ran"

#!/usr/bin/env bash
# Installs the built tree into a temporary prefix and builds an out-of-tree
# consumer three times: with find_package(paddlec), with pkg-config, and with
# pkg-config --static against libpaddlec.a (which needs Libs.private and
# Requires.private complete). The installed paddlec.pc must name no absolute
# path: every path in it is relative to ${pcfiledir}, so the prefix can move
# and nothing of the build machine leaks into it.
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

# the installed CMake package names its libraries by target or by name, never
# by this machine's absolute path (another machine keeps them elsewhere)
if grep -n 'INTERFACE_LINK_LIBRARIES.*"[^"]*/usr/' "$libdir"/cmake/paddlec/paddlecTargets*.cmake; then
  echo "FAIL: the installed CMake package links by absolute path" >&2
  exit 1
fi

pc="$libdir/pkgconfig/paddlec.pc"
# an absolute path starts a value or follows a space, '=', ':' or -I/-L
if grep -nE '(^|[[:space:]=:]|-[IL])/' "$pc"; then
  echo "install_consumer: FAIL: $pc names absolute paths (above)"
  exit 1
fi
export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc -std=c11 "$src/tests/consumer/main.c" -o "$tmp/pc_consumer" $(pkg-config --cflags --libs paddlec)
LD_LIBRARY_PATH="$libdir" "$tmp/pc_consumer"
# static: the archive itself, then everything pkg-config --static lists but -lpaddlec
static_libs=$(pkg-config --static --libs paddlec | sed -E 's/(^| )-lpaddlec( |$)/ /')
cc -std=c11 "$src/tests/consumer/main.c" -o "$tmp/pc_static_consumer" $(pkg-config --cflags paddlec) \
  "$libdir/libpaddlec.a" $static_libs
if ldd "$tmp/pc_static_consumer" | grep -q libpaddlec; then
  echo "install_consumer: FAIL: the static consumer loads libpaddlec.so"
  exit 1
fi
"$tmp/pc_static_consumer"
echo "install_consumer: find_package, pkg-config and pkg-config --static consumers all ran"

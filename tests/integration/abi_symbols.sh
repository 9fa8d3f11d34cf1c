#!/usr/bin/env bash
# The shared library exports exactly the functions declared in include/:
# fails, listing them, on an exported symbol that no public header declares
# (an internal that lost its hidden visibility) and on a declared function
# that the library does not export (a declaration without PD_API, or one
# never defined).
#
# The declared names come from the compiler, not from parsing C text: one
# file including every public header is compiled with GCC's -aux-info, which
# writes one line per function prototype seen, with the file and line that
# declared it, e.g.
#   /* /src/include/paddlec/core.h:42:NC */ extern const char *pd_dtype_name (pd_dtype);
# Prototypes of system headers and static inline functions of ours (not
# "extern") are dropped. The public headers declare no variables; an
# exported variable would show up as an extra symbol.
# Usage: abi_symbols.sh <libpaddlec.so> <include-dir> [gcc] [nm]
# Exit 77 (skipped) when the compiler has no -aux-info.
set -euo pipefail
export LC_ALL=C # one sort order for comm
lib=$1
inc=$(cd "$2" && pwd)
cc=${3:-gcc}
nm=${4:-nm}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for h in "$inc"/paddlec.h "$inc"/paddlec/*.h; do
  echo "#include \"${h#"$inc"/}\""
done >"$tmp/all_headers.c"
if ! "$cc" -std=gnu11 -fsyntax-only -I"$inc" -aux-info "$tmp/aux.txt" "$tmp/all_headers.c" 2>"$tmp/cc.err"; then
  if grep -q "aux-info" "$tmp/cc.err"; then
    echo "SKIP: $cc has no -aux-info"
    exit 77
  fi
  cat "$tmp/cc.err"
  exit 1
fi

# The name is the leftmost identifier followed by " (" that does not open a
# pointer declarator: "void (*pd_f (int)) (void)" names pd_f, not void.
grep -F "/* $inc/" "$tmp/aux.txt" | grep -E '^/\* [^ ]+:[0-9]+:[A-Z]+ \*/ extern ' |
  sed -E 's|^/\* .* \*/ extern ||' |
  awk 'match($0, /[A-Za-z_][A-Za-z0-9_]* \([^*]/) { print substr($0, RSTART, RLENGTH - 3) }' |
  sort -u >"$tmp/declared"

# Every defined dynamic symbol, of any type (T text, D/B data, R read-only,
# W/V weak, i indirect).
"$nm" -D --defined-only "$lib" | awk 'NF == 3 {print $3}' | sed 's/@.*//' | sort -u >"$tmp/exported"

n_decl=$(wc -l <"$tmp/declared")
n_exp=$(wc -l <"$tmp/exported")
if [ "$n_decl" -lt 100 ]; then
  echo "FAIL: only $n_decl functions found in $inc (did the -aux-info parsing break?)"
  exit 1
fi
extra=$(comm -13 "$tmp/declared" "$tmp/exported")
missing=$(comm -23 "$tmp/declared" "$tmp/exported")
status=0
if [ -n "$extra" ]; then
  echo "FAIL: exported by $lib but declared in no public header (make it static, or declare it with PD_API):"
  echo "$extra" | sed 's/^/  /'
  status=1
fi
if [ -n "$missing" ]; then
  echo "FAIL: declared in $inc but not exported by $lib (PD_API missing, or never defined):"
  echo "$missing" | sed 's/^/  /'
  status=1
fi
[ $status -eq 0 ] && echo "PASS: $n_exp exported symbols = $n_decl declared functions"
exit $status

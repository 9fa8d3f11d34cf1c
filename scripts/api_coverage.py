#!/usr/bin/env python3
"""API coverage table: every Paddle name of docs/paddle-api.tsv, its C symbol,
whether paddle.c has it, and the test that covers it.

    python3 scripts/api_coverage.py             regenerate docs/api-coverage.tsv
    python3 scripts/api_coverage.py --check     exit 1 when the committed table is stale
    python3 scripts/api_coverage.py --summary   print counts per namespace and status
                                                (with --check: check, then print)

Inputs (all in the repository, so the table can be rebuilt anywhere):
  docs/paddle-api.tsv              namespace<TAB>name, one row per Paddle API
  docs/api-coverage-overrides.tsv  the decisions the naming rule cannot make
                                   (1.x -> 2.x mappings, retired APIs, notes)
  include/**/*.h                   what is declared
  tests/**                         what is tested

Output columns: namespace, name, c_symbol, status, test, note.
  status  done     the symbol is declared in a public header: a function or
                   macro `symbol(`, or, for a class, a typedef named `symbol`
          planned  not declared yet
          retired  from the overrides: Paddle itself dropped the API
  test    the first file under tests/ that mentions the symbol: test programs
          (test_*) first, then other files, tests/support/ last, each group in
          path order; empty when none does

The naming rule:
  - paddle.<ns>.<Name> (a class) -> pd_<ns>_<snake_name>, its constructor;
    paddle.<ns>.<name> (a function) -> pd_<ns>_<name>.
  - Tensor functions share one flat namespace: paddle.*, paddle.tensor.* and
    paddle.nn.functional.* drop the namespace (paddle.matmul -> pd_matmul,
    paddle.nn.functional.softmax -> pd_softmax); so do the 1.x tensor
    functions of paddle.fluid.layers, whose default is the same-named 2.x op.
  - distributed. -> dist_, distributed.fleet. -> fleet_.
  - The functions of paddle.vision.transforms live in
    paddle.vision.transforms.functional and keep that namespace, so that
    Resize (pd_vision_transforms_resize, a transform object) and resize
    (pd_vision_transforms_functional_resize, applied to an image) differ.
  - CamelCase -> snake_case keeps acronyms whole and glues dimensions to the
    word before them: BatchNorm2D -> batch_norm2d, BCEWithLogitsLoss ->
    bce_with_logits_loss, LSTMCell -> lstm_cell; ReLU, PReLU, LoD and
    HSigmoid are single words (leaky_relu, prelu, lod_tensor, hsigmoid_loss).

Two rows outside paddle.fluid may not share a C symbol; the script fails if
they do. Only python3's standard library is used.
"""

import argparse
import difflib
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
API_PATH = "docs/paddle-api.tsv"
OVERRIDES_PATH = "docs/api-coverage-overrides.tsv"
OUT_PATH = "docs/api-coverage.tsv"
HEADER = ["namespace", "name", "c_symbol", "status", "test", "note"]
OVERRIDE_HEADER = ["namespace", "name", "c_symbol", "status_override", "reason"]
STATUSES = ["done", "planned", "retired"]

# Namespaces whose tensor functions drop the namespace.
FLAT_NAMESPACES = {"paddle", "paddle.tensor", "paddle.nn.functional", "paddle.fluid.layers"}
# Namespaces whose functions are re-exports from a submodule of their own.
FUNCTION_HOME = {"paddle.vision.transforms": "paddle.vision.transforms.functional"}
# Rows in these namespaces are 1.x aliases: they may share a 2.x symbol.
LEGACY_NAMESPACES = ("paddle.fluid",)
# Mixed-case words that stay one word in snake_case.
WORDS = [("PReLU", "Prelu"), ("ReLU", "Relu"), ("LoD", "Lod"), ("HSigmoid", "Hsigmoid")]


class Error(Exception):
    pass


def snake(name):
    s = name
    for word, repl in WORDS:
        s = s.replace(word, repl)
    s = re.sub(r"(\d)D(?![a-z])", r"\1d", s)  # Conv2D -> Conv2d: glue the dimension
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s)  # BCEWith -> BCE_With
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)  # LogSoftmax -> Log_Softmax
    return s.lower()


def is_class(name):
    return name[:1].isupper()


def namespace_prefix(namespace):
    parts = namespace.split(".")
    if parts[0] != "paddle":
        raise Error("namespace %r is not under paddle" % namespace)
    rest = parts[1:]
    if rest[:2] == ["distributed", "fleet"]:
        rest = ["fleet"] + rest[2:]
    elif rest[:1] == ["distributed"]:
        rest = ["dist"] + rest[1:]
    return "pd_" + "".join(p + "_" for p in rest)


def mechanical_symbol(namespace, name):
    if is_class(name):
        return namespace_prefix(namespace) + snake(name)
    if namespace in FLAT_NAMESPACES:
        return "pd_" + name
    return namespace_prefix(FUNCTION_HOME.get(namespace, namespace)) + name


def read_tsv(rel, header):
    path = os.path.join(ROOT, rel)
    rows = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    seen_header = False
    for lineno, line in enumerate(lines, 1):
        line = line.rstrip("\r")
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if not seen_header:
            if fields != header:
                raise Error("%s:%d: expected header %s" % (rel, lineno, "<TAB>".join(header)))
            seen_header = True
            continue
        if len(fields) < len(header):
            fields += [""] * (len(header) - len(fields))
        if len(fields) != len(header):
            raise Error("%s:%d: %d columns, expected %d" % (rel, lineno, len(fields), len(header)))
        rows.append((lineno, [x.strip() for x in fields]))
    if not seen_header:
        raise Error("%s: empty" % rel)
    return rows


def read_api():
    api, seen = [], set()
    for lineno, (ns, name) in read_tsv(API_PATH, ["namespace", "name"]):
        if not ns or not name:
            raise Error("%s:%d: empty field" % (API_PATH, lineno))
        if (ns, name) in seen:
            raise Error("%s:%d: %s.%s listed twice" % (API_PATH, lineno, ns, name))
        seen.add((ns, name))
        api.append((ns, name))
    return api


def read_overrides(api):
    known = set(api)
    overrides = {}
    for lineno, (ns, name, symbol, status, reason) in read_tsv(OVERRIDES_PATH, OVERRIDE_HEADER):
        where = "%s:%d" % (OVERRIDES_PATH, lineno)
        if (ns, name) not in known:
            raise Error("%s: %s.%s is not in %s" % (where, ns, name, API_PATH))
        if (ns, name) in overrides:
            raise Error("%s: %s.%s overridden twice" % (where, ns, name))
        if status not in ("", "retired"):
            raise Error("%s: status_override must be empty or 'retired', not %r" % (where, status))
        if status == "retired" and not reason:
            raise Error("%s: a retired API needs a reason" % where)
        if symbol and not re.fullmatch(r"pd_[a-z0-9_]+", symbol):
            raise Error("%s: %r is not a pd_ symbol" % (where, symbol))
        if not (symbol or status or reason):
            raise Error("%s: the row decides nothing" % where)
        overrides[(ns, name)] = (symbol, status, reason)
    return overrides


def strip_c_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def scan_headers():
    """Returns (functions, types) declared under include/."""
    functions, types = set(), set()
    base = os.path.join(ROOT, "include")
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        for fn in sorted(filenames):
            if not fn.endswith(".h"):
                continue
            with open(os.path.join(dirpath, fn), encoding="utf-8", errors="replace") as f:
                text = strip_c_comments(f.read())
            # `symbol(` declares a function or a function-like macro; `type (*fn)(`
            # is a function-pointer type returning `type`, not a declaration.
            functions.update(re.findall(r"\b(pd_\w+)\s*\((?!\s*\*)", text))
            types.update(re.findall(r"\btypedef\b[^;{}]*?\b(pd_\w+)\s*;", text))
            types.update(re.findall(r"}\s*(pd_\w+)\s*;", text))
    return functions, types


def scan_tests():
    """Returns [(path, identifiers)] in lookup order."""
    base = os.path.join(ROOT, "tests")
    files = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        for fn in filenames:
            rel = os.path.relpath(os.path.join(dirpath, fn), ROOT).replace(os.sep, "/")
            if rel.startswith("tests/support/"):
                rank = 2
            elif fn.startswith("test_"):
                rank = 0
            else:
                rank = 1
            files.append((rank, rel))
    out = []
    for _, rel in sorted(files):
        try:
            with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        out.append((rel, set(re.findall(r"\bpd_\w+", text))))
    return out


def generate():
    api = read_api()
    overrides = read_overrides(api)
    functions, types = scan_headers()
    tests = scan_tests()

    rows, owners = [], {}
    for ns, name in api:
        symbol, status, note = mechanical_symbol(ns, name), "", ""
        if (ns, name) in overrides:
            o_symbol, o_status, note = overrides[(ns, name)]
            if o_status == "retired":
                symbol, status = o_symbol, "retired"
            elif o_symbol:
                symbol = o_symbol
        if not status:
            declared = symbol in functions or (is_class(name) and symbol in types)
            status = "done" if declared else "planned"
        test = ""
        if symbol:
            test = next((path for path, ids in tests if symbol in ids), "")
            if not ns.startswith(LEGACY_NAMESPACES):
                owners.setdefault(symbol, []).append("%s.%s" % (ns, name))
        rows.append([ns, name, symbol, status, test, note])

    clashes = {s: o for s, o in owners.items() if len(o) > 1}
    if clashes:
        raise Error(
            "C symbols claimed by more than one API (add an override):\n"
            + "\n".join("  %s: %s" % (s, ", ".join(o)) for s, o in sorted(clashes.items()))
        )
    for row in rows:
        for field in row:
            if "\t" in field or "\n" in field:
                raise Error("field %r holds a tab or newline" % field)
    return rows


def render(rows):
    return "".join("\t".join(r) + "\n" for r in [HEADER] + rows)


def summary(rows):
    namespaces = []
    counts = {}
    for r in rows:
        if r[0] not in counts:
            namespaces.append(r[0])
            counts[r[0]] = dict.fromkeys(STATUSES, 0)
        counts[r[0]][r[3]] += 1
    width = max(len(n) for n in namespaces + ["namespace"])
    lines = ["%-*s %7s %7s %7s %7s" % (width, "namespace", *STATUSES, "total")]
    for ns in namespaces:
        c = counts[ns]
        lines.append("%-*s %7d %7d %7d %7d" % (width, ns, *(c[s] for s in STATUSES), sum(c.values())))
    total = {s: sum(c[s] for c in counts.values()) for s in STATUSES}
    lines.append("%-*s %7d %7d %7d %7d" % (width, "all", *(total[s] for s in STATUSES), len(rows)))
    return "\n".join(lines)


def check(text):
    path = os.path.join(ROOT, OUT_PATH)
    if not os.path.exists(path):
        print("api-coverage: %s is missing; run python3 scripts/api_coverage.py" % OUT_PATH)
        return 1
    with open(path, encoding="utf-8") as f:
        committed = f.read()
    if committed == text:
        print("api-coverage: %s is up to date (%d rows)" % (OUT_PATH, text.count("\n") - 1))
        return 0
    old, new = committed.splitlines(), text.splitlines()
    old_rows = {tuple(l.split("\t")[:2]): l for l in old[1:]}
    new_rows = {tuple(l.split("\t")[:2]): l for l in new[1:]}
    changed = [k for k in new_rows if k in old_rows and old_rows[k] != new_rows[k]]
    added = [k for k in new_rows if k not in old_rows]
    removed = [k for k in old_rows if k not in new_rows]
    print(
        "api-coverage: %s is stale: %d changed, %d missing, %d extra rows"
        % (OUT_PATH, len(changed), len(added), len(removed))
    )
    diff = list(difflib.unified_diff(old, new, "committed", "generated", n=0, lineterm=""))
    limit = 40
    for line in diff[:limit]:
        print("  " + line)
    if len(diff) > limit:
        print("  ... %d more diff lines" % (len(diff) - limit))
    print("api-coverage: run python3 scripts/api_coverage.py and commit %s" % OUT_PATH)
    return 1


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="fail when %s is stale" % OUT_PATH)
    parser.add_argument("--summary", action="store_true", help="print counts per namespace and status")
    args = parser.parse_args(argv)
    try:
        rows = generate()
    except (Error, OSError) as e:
        print("api-coverage: %s" % e, file=sys.stderr)
        return 2
    text = render(rows)
    rc = 0
    if args.check:
        rc = check(text)
    elif not args.summary:
        with open(os.path.join(ROOT, OUT_PATH), "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        n = {s: sum(r[3] == s for r in rows) for s in STATUSES}
        print(
            "api-coverage: wrote %s: %d rows, %d done, %d planned, %d retired"
            % (OUT_PATH, len(rows), n["done"], n["planned"], n["retired"])
        )
    if args.summary:
        print(summary(rows))
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

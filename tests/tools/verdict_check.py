#!/usr/bin/env python3
"""Check stitch verdicts against docs/verdict.schema.json (JSON Schema draft 2020-12), offline.

    verdict_check.py SCHEMA [--quiet] [--list LIST] [VERDICT.json]...

Each VERDICT.json is one verdict (`stitch verify --json`). LIST names more, one a line:
`FILE<TAB>SELECTOR`, where SELECTOR says where the verdicts sit inside FILE (tests/lib.sh's
`verdicts_keep` writes it). A selector is dotted: `verdict` (a key), `*` (every element of an
array), and a segment ending in `?` may be absent or null (it then selects nothing); an empty
selector is the whole document. A FILE ending in `.jsonl` is the array of its lines. Examples:
`verdict` (a `stitch serve` answer, a queue result), `verdicts.*?` (`stitch bench --json`: null
for a missing solution), `*.verdict?` (`stitch redteam --json` rows, a trajectory.jsonl).
A selector without `?` must find at least one verdict.

Prints one line per verdict (with --quiet only the invalid ones) and each violation (its JSON
path and what is wrong) under it, then a count by status; exits 0 when every verdict is valid, 1
when one is not or a selector found none, 2 when a file cannot be read or the schema is not a
valid schema, and 77 (a skip for CTest) when the python `jsonschema` package is missing
(Debian's python3-jsonschema, installed by scripts/bootstrap --tests)."""
import collections
import json
import sys

try:
    import jsonschema
except ImportError:
    print("SKIP: python3 has no jsonschema module (apt-get install python3-jsonschema, or "
          "scripts/bootstrap --tests)")
    sys.exit(77)


class Unreadable(Exception):
    pass


def load(path):
    try:
        with open(path) as f:
            if path.endswith(".jsonl"):
                return [json.loads(line) for line in f if line.strip()]
            return json.load(f)
    except (OSError, ValueError) as e:
        raise Unreadable(f"{path}: cannot read: {e}")


def select(doc, selector):
    """(where, verdict) pairs at SELECTOR in doc; a required step that finds nothing is
    (where, None)."""
    found = [("", doc)]
    for seg in [s for s in selector.split(".") if s]:
        optional = seg.endswith("?")
        key = seg.rstrip("?")
        step = []
        for where, x in found:
            if key == "*":
                items = list(enumerate(x)) if isinstance(x, list) else None
                if items is None:
                    step.append((f"{where}[*]", None))
                    continue
                step += [(f"{where}[{i}]", y) for i, y in items if not (optional and y is None)]
            elif isinstance(x, dict) and x.get(key) is not None:
                step.append((f"{where}.{key}", x[key]))
            elif not optional:
                step.append((f"{where}.{key}", None))
        found = step
    return found


def main(argv):
    args, quiet, lists = [], False, []
    it = iter(argv[1:])
    for a in it:
        if a == "--quiet":
            quiet = True
        elif a == "--list":
            lists.append(next(it, ""))
        else:
            args.append(a)
    if not args or not (lists or len(args) > 1):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        with open(args[0]) as f:
            schema = json.load(f)
        jsonschema.Draft202012Validator.check_schema(schema)
    except (OSError, ValueError, jsonschema.exceptions.SchemaError) as e:
        print(f"{args[0]}: not a usable schema: {e}", file=sys.stderr)
        return 2
    validator = jsonschema.Draft202012Validator(schema)
    todo = [(p, "") for p in args[1:]]
    try:
        for lst in lists:
            with open(lst) as f:
                for line in f:
                    if line.strip():
                        path, _, sel = line.rstrip("\n").partition("\t")
                        todo.append((path, sel))
    except OSError as e:
        print(f"{e}")
        return 2
    rc, files, count = 0, 0, collections.Counter()
    for path, sel in todo:
        try:
            doc = load(path)
        except Unreadable as e:
            print(e)
            return 2
        files += 1
        found = select(doc, sel)
        if not found and "?" not in sel:
            print(f"{path}: no verdict at '{sel}'")
            rc = 1
        for where, verdict in found:
            name = f"{path}{':' + where if sel else ''}"
            if verdict is None:
                print(f"{name}: no verdict there (selector '{sel}')")
                rc = 1
                continue
            errors = sorted(validator.iter_errors(verdict), key=lambda e: list(e.path))
            status = verdict.get("status") if isinstance(verdict, dict) else None
            count[status if isinstance(status, str) else "?"] += 1
            if errors or not quiet:
                print(f"{name}: {'valid' if not errors else f'{len(errors)} violation(s)'}"
                      f" (status {status})")
            for e in errors:
                where = "/".join(str(p) for p in e.absolute_path) or "(top)"
                print(f"  {where}: {e.message[:300]}")
            if errors:
                rc = 1
    n = sum(count.values())
    print(f"verdict_check: {n} verdict(s) from {files} file(s) {'valid' if rc == 0 else 'checked, NOT all valid'}"
          f" ({', '.join(f'{k} {v}' for k, v in sorted(count.items()))})")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""Check stitch verdicts against docs/verdict.schema.json (JSON Schema draft 2020-12), offline.

    verdict_check.py SCHEMA VERDICT.json...

Prints one line per file, and each violation (its JSON path and what is wrong) under it; exits 0
when every verdict is valid, 1 when one is not, 2 when a file cannot be read or the schema is not
a valid schema, and 77 (a skip for CTest) when the python `jsonschema` package is missing
(Debian's python3-jsonschema, installed by scripts/bootstrap --tests)."""
import json
import sys

try:
    import jsonschema
except ImportError:
    print("SKIP: python3 has no jsonschema module (apt-get install python3-jsonschema, or "
          "scripts/bootstrap --tests)")
    sys.exit(77)


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        with open(argv[1]) as f:
            schema = json.load(f)
        jsonschema.Draft202012Validator.check_schema(schema)
    except (OSError, ValueError, jsonschema.exceptions.SchemaError) as e:
        print(f"{argv[1]}: not a usable schema: {e}", file=sys.stderr)
        return 2
    validator = jsonschema.Draft202012Validator(schema)
    rc = 0
    for path in argv[2:]:
        try:
            with open(path) as f:
                verdict = json.load(f)
        except (OSError, ValueError) as e:
            print(f"{path}: cannot read: {e}")
            return 2
        errors = sorted(validator.iter_errors(verdict), key=lambda e: list(e.path))
        print(f"{path}: {'valid' if not errors else f'{len(errors)} violation(s)'}"
              f" (status {verdict.get('status') if isinstance(verdict, dict) else '?'})")
        for e in errors:
            where = "/".join(str(p) for p in e.absolute_path) or "(top)"
            print(f"  {where}: {e.message[:300]}")
        if errors:
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))

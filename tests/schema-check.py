#!/usr/bin/env python3
"""schema-check.py SCHEMA JSON: validate JSON against the JSON Schema
SCHEMA with python3-jsonschema (Debian's), an implementation of JSON
Schema that is not ptd's.  Exit 0: valid; 1: not (the first error, with
its path, on stderr); 77: jsonschema is not installed (a skip)."""
import json
import sys

try:
    import jsonschema
except ImportError:
    print("schema-check: python3-jsonschema is not installed", file=sys.stderr)
    sys.exit(77)

if len(sys.argv) != 3:
    print("usage: schema-check.py SCHEMA JSON", file=sys.stderr)
    sys.exit(2)
with open(sys.argv[1]) as f:
    schema = json.load(f)
with open(sys.argv[2]) as f:
    doc = json.load(f)
jsonschema.Draft7Validator.check_schema(schema)
errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(doc),
                key=lambda e: list(e.absolute_path))
if errors:
    e = errors[0]
    where = "/".join(str(p) for p in e.absolute_path) or "(top)"
    print(f"schema-check: {sys.argv[2]}: {where}: {e.message} "
          f"({len(errors)} errors)", file=sys.stderr)
    sys.exit(1)
sys.exit(0)

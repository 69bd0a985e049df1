#!/usr/bin/env python3
"""Validates a document litectl check wrote against its schema:
`validate.py junit FILE.xml` (JUnit.xsd, with xmlschema) or
`validate.py sarif FILE.sarif` (sarif-schema-2.1.0.json, with jsonschema's
draft-4 validator and its format checks). Prints `valid` and exits 0, or
prints each error and exits 1; exits 3 when the validator module is missing
(.ci/run installs it)."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    kind, path = sys.argv[1], sys.argv[2]
    if kind == "junit":
        try:
            import xmlschema
        except ImportError:
            print("python3 module xmlschema is missing (pip install xmlschema)")
            return 3
        schema = xmlschema.XMLSchema(os.path.join(HERE, "JUnit.xsd"))
        errors = [str(e) for e in schema.iter_errors(path)]
    elif kind == "sarif":
        try:
            import jsonschema
        except ImportError:
            print("python3 module jsonschema is missing (pip install jsonschema)")
            return 3
        with open(os.path.join(HERE, "sarif-schema-2.1.0.json"), encoding="utf-8") as f:
            schema = json.load(f)
        with open(path, encoding="utf-8") as f:
            document = json.load(f)
        validator = jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker())
        errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]
    else:
        print("usage: validate.py junit|sarif FILE")
        return 2
    for error in errors:
        print(error)
    if errors:
        return 1
    print("valid")
    return 0


if __name__ == "__main__":
    sys.exit(main())

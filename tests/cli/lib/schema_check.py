#!/usr/bin/env python3
"""schema_check.py - the independent checker of constrained outputs: each
output must parse as JSON and validate against its schema with
python3-jsonschema (Draft 2020-12, formats asserted).

The formats cmf enforces (date, time, date-time, uuid) are checked by
checkers registered here - a strict RFC 3339 / RFC 4122 regex, then Python's
datetime / uuid - because jsonschema checks date-time and time only when
rfc3339-validator is installed (Debian 12's python3-jsonschema 4.10.3 is
not), and silently passes them otherwise. Before any output, a self-check
makes sure the checker refuses bad samples of each format.

usage: schema_check.py [--jsonl | --seq N] --schema SCHEMA FILE... [--schema SCHEMA FILE...]...
  FILE holds one output; with --jsonl, each line of FILE is a JSON string
  holding one output; with --seq N, FILE holds N outputs one after another
  (cmf chat's replies, whitespace between).
exit: 0 all valid; 1 an output invalid, or the self-check failed;
      77 python3-jsonschema (with Draft 2020-12) absent - the outputs' JSON
      syntax is still checked, and a syntax error is still 1.
"""
import datetime
import json
import re
import sys
import uuid

DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})\Z")
# RFC 3339 partial-time + time-offset; upper-case T and Z, no leap second
# (as rfc3339-validator, which jsonschema uses when it is installed)
TIME = re.compile(r"([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?(Z|[+-]([0-9]{2}):([0-9]{2}))\Z")
UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\Z")


def is_date(s):
    m = DATE.match(s)
    if not m:
        return False
    try:
        datetime.date(*map(int, m.groups()))  # month lengths, leap years; year 0 refused
    except ValueError:
        return False
    return True


def is_time(s):
    m = TIME.match(s)
    if not m:
        return False
    h, mi, sec = int(m.group(1)), int(m.group(2)), int(m.group(3))
    try:
        datetime.time(h, mi, sec)
        if m.group(5) != "Z":
            oh, om = int(m.group(6)), int(m.group(7))
            if oh > 23 or om > 59:
                return False
            datetime.timezone(datetime.timedelta(hours=oh, minutes=om))
    except ValueError:
        return False
    return True


def is_date_time(s):
    return len(s) > 11 and s[10] == "T" and is_date(s[:10]) and is_time(s[11:])


def is_uuid(s):
    if not UUID.match(s):
        return False
    try:
        uuid.UUID(s)
    except ValueError:
        return False
    return True


def strings_only(check):
    return lambda v: check(v) if isinstance(v, str) else True  # formats apply to strings only


FORMATS = {"date": is_date, "time": is_time, "date-time": is_date_time, "uuid": is_uuid}
SAMPLES = {  # (valid, invalid)
    "date": (["2024-02-29", "0001-01-01", "2023-12-31"],
             ["2023-02-29", "2024-13-01", "2024-04-31", "0000-01-01", "2024-1-01", "20240101", "2024-01-01T00:00:00Z"]),
    "time": (["23:59:59Z", "00:00:00.123456+05:30", "12:30:00-23:59"],
             ["24:00:00Z", "12:60:00Z", "12:00:60Z", "12:00:00", "12:00:00+24:00", "12:00:00+05:60", "12:00Z", "12:00:00z"]),
    "date-time": (["2024-02-29T23:59:59Z", "1999-12-31T00:00:00.5+01:00"],
                  ["2023-02-29T10:00:00Z", "2024-01-01 10:00:00Z", "2024-01-01T25:00:00Z", "2024-01-01T10:00:00",
                   "2024-01-01t10:00:00Z"]),
    "uuid": (["123e4567-e89b-12d3-a456-426614174000", "ABCDEF01-2345-6789-abcd-ef0123456789"],
             ["123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400", "{123e4567-e89b-12d3-a456-426614174000}",
              "g23e4567-e89b-12d3-a456-426614174000"]),
}


def read_outputs(path, mode, n):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if mode == "jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    if mode == "seq":
        out, dec, i = [], json.JSONDecoder(), 0
        while True:
            while i < len(text) and text[i] in " \t\r\n":
                i += 1
            if i == len(text):
                break
            _, j = dec.raw_decode(text, i)  # raises on a syntax error: reported by the caller
            out.append(text[i:j])
            i = j
        if len(out) != n:
            raise ValueError(f"{len(out)} JSON texts, {n} expected")
        return out
    return [text]


def parse_args(argv):
    mode, n, groups = "raw", 0, []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--jsonl":
            mode = "jsonl"
        elif a == "--seq":
            mode, n = "seq", int(argv[i + 1])
            i += 1
        elif a == "--schema":
            groups.append((argv[i + 1], []))
            i += 1
        elif groups:
            groups[-1][1].append(a)
        else:
            sys.exit(__doc__)
        i += 1
    if not groups or any(not files for _, files in groups):
        sys.exit(__doc__)
    return mode, n, groups


def make_validator():
    """A Draft 2020-12 validator factory with our format checkers, or None."""
    try:
        import jsonschema
        V = jsonschema.Draft202012Validator
    except (ImportError, AttributeError):
        return None
    fc = jsonschema.FormatChecker()
    for name, fn in FORMATS.items():
        fc.checks(name)(strings_only(fn))
    bad = []
    for name, (good, wrong) in SAMPLES.items():
        v = V({"format": name}, format_checker=fc)
        good = good + [7, None]  # not strings: no format applies
        bad += [f"refuses {s!r} as {name}" for s in good if not v.is_valid(s)]
        bad += [f"accepts {s!r} as {name}" for s in wrong if v.is_valid(s)]
    if bad:
        print("schema_check: self-check failed: the format checker " + "; ".join(bad))
        sys.exit(1)
    return lambda schema: V(schema, format_checker=fc)


def main():
    mode, n, groups = parse_args(sys.argv[1:])
    make = make_validator()
    done = bad = 0
    for schema_path, files in groups:
        with open(schema_path, encoding="utf-8") as f:
            schema = json.load(f)
        v = make(schema) if make else None
        for path in files:
            try:
                outputs = read_outputs(path, mode, n)
            except ValueError as e:
                bad += 1
                print(f"INVALID {path}: not {n if mode == 'seq' else 'a'} JSON text(s): {e}")
                continue
            for k, text in enumerate(outputs):
                try:
                    value = json.loads(text)
                    if v:
                        v.validate(value)
                    done += 1
                except Exception as e:  # a JSON syntax error or a ValidationError
                    bad += 1
                    print(f"INVALID {path} #{k}: {text!r}: {str(e).splitlines()[0]}")
    what = "valid" if make else "parse as JSON (schemas NOT checked)"
    print(f"schema_check: {done} outputs {what}, {bad} invalid")
    if bad or not done:
        return 1
    if not make:
        print("SKIP: python3-jsonschema with Draft 2020-12 is absent (scripts/deps.txt, group ci)")
        return 77
    return 0


if __name__ == "__main__":
    sys.exit(main())

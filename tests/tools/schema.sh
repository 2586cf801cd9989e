#!/usr/bin/env bash
# schemas/graph.schema.json against the loader: every graph in the test
# data and the examples validates; the load-error files that break the
# format's structure are rejected by the schema too (the rest break rules a
# schema cannot state: ids that resolve, cycles, types).
set -euo pipefail
: "${TG_SRC:?}" "${TG_TEST_DATA:?}"
if ! /usr/bin/python3 -c 'import jsonschema' 2>/dev/null; then
  echo "skip: python3-jsonschema is not installed"
  exit 0
fi
/usr/bin/python3 - "$TG_SRC" "$TG_TEST_DATA" <<'PY'
import glob, json, os, sys
import jsonschema
src, data = sys.argv[1], sys.argv[2]
schema = json.load(open(os.path.join(src, "schemas/graph.schema.json")))
jsonschema.Draft202012Validator.check_schema(schema)
v = jsonschema.Draft202012Validator(schema)
good = sorted(glob.glob(os.path.join(data, "ops/*.json"))) + sorted(glob.glob(os.path.join(src, "examples/*.json"))) \
    + sorted(glob.glob(os.path.join(src, "examples/scan/*.json"))) \
    + sorted(glob.glob(os.path.join(data, "tools/*.json")))
fails = 0
for p in good:
    errs = list(v.iter_errors(json.load(open(p))))
    if errs:
        fails += 1
        print("FAIL: %s does not validate: %s" % (p, errs[0].message))
print("ok: %d graphs validate" % len(good))
structural = ["bad_format", "newer_version", "unknown_top_key", "missing_nodes", "unknown_var_key", "bad_id",
              "const_and_shared", "unknown_dtype", "negative_length", "too_many_dims", "two_sources",
              "npy_dotdot", "npy_absolute", "inline_const", "trace_line", "node_not_object", "function_key",
              "root_array", "inline_needs_dtype", "base64_chars", "npy_backslash", "trace_file", "inplace_key"]
for name in structural:
    doc = json.load(open(os.path.join(data, "load_errors", name + ".json")))
    if v.is_valid(doc):
        fails += 1
        print("FAIL: the schema accepts load_errors/%s.json, which the loader rejects" % name)
print("ok: the schema rejects %d structurally broken files" % len(structural))
print("%d failed" % fails)
sys.exit(1 if fails else 0)
PY

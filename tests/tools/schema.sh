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
              "root_array", "inline_needs_dtype", "base64_chars", "npy_backslash", "trace_file", "inplace_key",
              "unknown_op"]
for name in structural:
    doc = json.load(open(os.path.join(data, "load_errors", name + ".json")))
    if v.is_valid(doc):
        fails += 1
        print("FAIL: the schema accepts load_errors/%s.json, which the loader rejects" % name)
print("ok: the schema rejects %d structurally broken files" % len(structural))
# The schema's op names are the library's (FORMAT.md section 7 and tg's
# own forms): the list in table.c that tells a planned op from a misspelt one.
import re
table = open(os.path.join(src, "libcore/src/ops/table.c")).read()
table = table[table.index("format_ops[] = {"):]
lib_ops = re.findall(r'"([a-z0-9_]+)"', table[:table.index("NULL};")])
schema_ops = schema["$defs"]["node"]["properties"]["op"]["enum"]
if sorted(lib_ops) != sorted(schema_ops):
    fails += 1
    print("FAIL: the schema's ops differ from the library's: only in the schema %s, only in the library %s"
          % (sorted(set(schema_ops) - set(lib_ops)), sorted(set(lib_ops) - set(schema_ops))))
else:
    print("ok: the schema names the library's %d ops" % len(lib_ops))
# The loader's choices the schema states too: scan's keep_last (written by
# the optimizer, docs/format-choices.md), base64 with its padding (the
# loader refuses "AAA" for "AAA=").
scans = [p for p in good if '"op":"scan"' in open(p).read().replace(" ", "")]
doc = json.load(open(scans[0]))
node = next(n for n in doc["nodes"] if n["op"] == "scan")
node["attrs"]["keep_last"] = [0] * (node["attrs"]["n_recurrent"] + node["attrs"]["n_nonrecurrent"])
if not v.is_valid(doc):
    fails += 1
    print("FAIL: the schema refuses scan's keep_last in %s" % scans[0])
b64 = {"format": "tg-graph", "version": 1, "nodes": [],
       "variables": [{"id": "c", "type": {"dtype": "float32", "shape": [1]}, "constant": {"base64": "AACAPw=="}}]}
if not v.is_valid(b64):
    fails += 1
    print("FAIL: the schema refuses padded base64")
b64["variables"][0]["constant"]["base64"] = "AACAPw"
if v.is_valid(b64):
    fails += 1
    print("FAIL: the schema accepts base64 without its padding")
print("ok: keep_last, base64 padding")
print("%d failed" % fails)
sys.exit(1 if fails else 0)
PY

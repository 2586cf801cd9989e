"""Writes tests/data/load_errors/: one small file per class of loader error
and EXPECT (file, status, a substring the one-line message must contain).
Run with python3."""
import json
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "load_errors")
os.makedirs(OUT, exist_ok=True)
X = {"id": "x", "type": {"dtype": "float64", "shape": [3]}}


def g(variables=None, nodes=None, **extra):
    d = {"format": "tg-graph", "version": 1, "variables": variables if variables is not None else [X],
         "nodes": nodes if nodes is not None else []}
    d.update(extra)
    return d


NUL = "before\x00after"
BODY = {"variables": [dict(X, id="a")], "inputs": ["a"], "outputs": ["o"],
        "nodes": [{"op": "neg", "inputs": ["a"], "outputs": ["o"]}]}


def add(x="x", y="x", out="y", **k):
    n = {"op": "add", "inputs": [x, y], "outputs": [out]}
    n.update(k)
    return n


CASES = [
    ("syntax", '{"format": "tg-graph",\n "version": 1,\n "variables": [,]}', "TG_EPARSE", "line 3, column"),
    ("trailing", json.dumps(g()) + " {}", "TG_EPARSE", "invalid JSON"),
    ("root_array", "[1, 2]", "TG_ELOAD", "expected a JSON object"),
    # json-c reads strings in single quotes, even in strict mode: not JSON.
    # One holding a double quote and a bracket, before a \u0000, sent the
    # NUL search's stack below its first frame (fuzz_load, 2026-12-07).
    ("single_quotes", '{"format": "tg-graph", "version": 1, \'variables\': [], "nodes": []}', "TG_EPARSE",
     "line 1, column 38: invalid JSON: a string in single quotes"),
    ("single_quote_nul", '{"format": "tg-graph", "version": 1, "variables": [], "nodes": [],\n'
                         ' "meta": {\'a"b\': 1, "c": "]]]]]]", "d": "\\u0000", "e": [1]}}', "TG_EPARSE",
     "line 2, column 11: invalid JSON: a string in single quotes"),
    # json-c gives no value and no error for the text null
    ("root_null", "null\n", "TG_ELOAD", "(root): expected a JSON object"),
    ("bad_format", g(format="onnx"), "TG_ELOAD", "format: expected \"tg-graph\""),
    ("newer_version", g(version=2), "TG_EVERSION", "format version 2 is newer"),
    ("unknown_top_key", g(nodez=[]), "TG_ELOAD", "(root).nodez: unknown key"),
    ("missing_nodes", {"format": "tg-graph", "version": 1, "variables": []}, "TG_ELOAD", "nodes: missing"),
    ("unknown_var_key", g([{"id": "x", "type": {"dtype": "float64", "shape": []}, "shraed": {"data": 1}}]),
     "TG_ELOAD", "variables[0].shraed: unknown key"),
    ("bad_id", g([{"id": "a/b", "type": {"dtype": "float64", "shape": []}}]), "TG_ELOAD",
     "variables[0].id: 'a/b' is not a valid id"),
    ("dup_id", g([X, X]), "TG_ELOAD", "variables[1].id: 'x' is already declared at variables[0]"),
    ("const_and_shared", g([{"id": "c", "type": {"dtype": "float64", "shape": []}, "constant": {"data": 1},
                             "shared": {"data": 1}}]), "TG_ELOAD", "both constant and shared"),
    ("input_without_type", g([{"id": "x"}]), "TG_ELOAD", "variables[0].type: 'x' is an input and needs a type"),
    ("unknown_dtype", g([{"id": "x", "type": {"dtype": "float128", "shape": []}}]), "TG_ELOAD",
     "variables[0].type.dtype: unknown dtype 'float128'"),
    ("negative_length", g([{"id": "x", "type": {"dtype": "float64", "shape": [2, -1]}}]), "TG_ELOAD",
     "variables[0].type.shape[1]: expected a non-negative integer or null"),
    ("length_past_int64", g([{"id": "x", "type": {"dtype": "float64", "shape": [2**64 - 1]}}]), "TG_ELOAD",
     "variables[0].type.shape[0]: the length 18446744073709551615 is too large (at most 2^63 - 1)"),
    ("too_many_dims", g([{"id": "x", "type": {"dtype": "float64", "shape": [1] * 9}}]), "TG_ELOAD",
     "9 dimensions (at most 8)"),
    ("data_shape_mismatch", g([{"id": "c", "type": {"dtype": "float64", "shape": [2, 2]},
                                "constant": {"data": [[1, 2], [3]]}}]), "TG_ELOAD",
     "variables[0].constant.data: does not match the shape"),
    ("data_count", g([{"id": "c", "type": {"dtype": "float64", "shape": [3]}, "constant": {"data": [1, 2]}}]),
     "TG_ELOAD", "variables[0].constant.data"),
    ("int_overflow", g([{"id": "c", "type": {"dtype": "int8", "shape": [2]}, "constant": {"data": [1, 300]}}]),
     "TG_ELOAD", "300 does not fit int8"),
    ("two_sources", g([{"id": "c", "type": {"dtype": "float64", "shape": []},
                        "constant": {"data": 1, "base64": "AAAAAAAA8D8="}}]), "TG_ELOAD",
     "exactly one of data, base64, npy"),
    ("base64_length", g([{"id": "c", "type": {"dtype": "float64", "shape": [2]}, "constant": {"base64": "AAAAAAAA8D8="}}]),
     "TG_ELOAD", "do not encode the 16 bytes"),
    ("npy_dotdot", g([{"id": "c", "type": {"dtype": "float64", "shape": [2]}, "constant": {"npy": "../secret.npy"}}]),
     "TG_ELOAD", "leaves the graph's folder"),
    ("npy_absolute", g([{"id": "c", "type": {"dtype": "float64", "shape": [2]}, "constant": {"npy": "/etc/passwd"}}]),
     "TG_ELOAD", "leaves the graph's folder"),
    ("npy_missing", g([{"id": "c", "type": {"dtype": "float64", "shape": [2]}, "constant": {"npy": "nothere.npy"}}]),
     "TG_EIO", "nothere.npy"),
    ("value_dtype_mismatch", g([{"id": "c", "type": {"dtype": "float64", "shape": []},
                                 "constant": {"dtype": "int32", "data": 1}}]), "TG_ETYPE",
     "variables[0].constant.dtype: int32, but the variable is float64"),
    ("unknown_op", g(nodes=[{"op": "dott", "inputs": ["x", "x"], "outputs": ["y"]}]), "TG_ELOAD",
     "nodes[0].op: unknown op 'dott' (did you mean 'dot'?)"),
    ("conv_channels", g([{"id": "a", "type": {"dtype": "float32", "shape": [2, 3, 8, 8]}},
                         {"id": "b", "type": {"dtype": "float32", "shape": [4, 2, 3, 3]}}],
                        [{"op": "conv2d", "inputs": ["a", "b"], "outputs": ["y"]}]), "TG_ESHAPE",
     "inputs[0] 'a' has 3 channels but inputs[1] 'b' expects 2"),
    ("pool_ws", g([{"id": "a", "type": {"dtype": "float32", "shape": [2, 3, 8, 8]}}],
                  [{"op": "pool2d", "inputs": ["a"], "outputs": ["y"]}]), "TG_ELOAD", "attrs.ws: required by pool2d"),
    # subsample, dilation, padding and pool windows are C ints
    ("conv_subsample_range", g([{"id": "a", "type": {"dtype": "float32", "shape": [2, 3, 8, 8]}},
                                {"id": "b", "type": {"dtype": "float32", "shape": [4, 3, 3, 3]}}],
                               [{"op": "conv2d", "inputs": ["a", "b"], "outputs": ["y"],
                                 "attrs": {"subsample": [1, 2 ** 31]}}]), "TG_ELOAD",
     "attrs.subsample: expected a list of two integers from 1 to 2147483647"),
    ("pool_pad_range", g([{"id": "a", "type": {"dtype": "float32", "shape": [2, 3, 8, 8]}}],
                         [{"op": "pool2d", "inputs": ["a"], "outputs": ["y"],
                           "attrs": {"ws": [2, 2], "pad": [-1, 0]}}]), "TG_ELOAD",
     "attrs.pad: expected a list of two integers from 0 to 2147483647"),
    ("split_n", g([X], [{"op": "split", "inputs": ["x", {"value": {"dtype": "int64", "shape": [2], "data": [1, 2]}}],
                         "outputs": ["y", "z"], "attrs": {"axis": 0, "n": 3}}]), "TG_ELOAD",
     "attrs.n: 3, but the node lists 2 outputs"),
    # constant sizes whose sum passes 2^63 - 1 (it overflowed: UBSan in split_infer)
    ("split_sizes_sum", g([X], [{"op": "split", "inputs": ["x", {"value": {"dtype": "int64", "shape": [2],
                                                                          "data": [2 ** 63 - 1, 2 ** 63 - 1]}}],
                                 "outputs": ["y", "z"], "attrs": {"axis": 0, "n": 2}}]), "TG_ESHAPE",
     "the sizes sum past 2^63 - 1, but axis 0 of inputs[0] 'x' has length 3"),
    # a constant uint64 length past 2^63 - 1 (it counted as 2^63 - 1)
    ("reshape_u64_len", g([X], [{"op": "reshape", "inputs": ["x", {"value": {"dtype": "uint64", "shape": [2],
                                                                            "data": [0, 2 ** 64 - 1]}}],
                                 "outputs": ["y"]}]), "TG_ESHAPE",
     "shape entry 1 is 18446744073709551615: too large (more than 2^63 - 1)"),
    ("softmax_axis", g([X], [{"op": "softmax", "inputs": ["x"], "outputs": ["y"], "attrs": {"axis": 2}}]), "TG_ELOAD",
     "attrs.axis: axis 2 is out of bounds"),
    ("cholesky_square", g([{"id": "a", "type": {"dtype": "float64", "shape": [3, 4]}}],
                          [{"op": "cholesky", "inputs": ["a"], "outputs": ["y"]}]), "TG_ESHAPE",
     "expected square matrices, got float64[3, 4]"),
    ("grad_cost_not_scalar", g(nodes=[{"op": "grad", "inputs": ["x", "x"], "outputs": ["gx"]}]), "TG_ETYPE",
     "the cost 'x' must be a scalar, not 1-dimensional"),
    ("grad_disconnected", g([X, {"id": "z", "type": {"dtype": "float64", "shape": [3]}}],
                            [{"op": "sum", "inputs": ["x"], "outputs": ["c"]},
                             {"op": "grad", "inputs": ["c", "z"], "outputs": ["gz"]}]), "TG_ELOAD",
     "the cost 'c' does not depend on 'z'"),
    ("grad_int_wrt", g([{"id": "i", "type": {"dtype": "int32", "shape": []}}],
                       [{"op": "cast", "inputs": ["i"], "outputs": ["c"], "attrs": {"dtype": "float64"}},
                        {"op": "grad", "inputs": ["c", "i"], "outputs": ["gi"]}]), "TG_ETYPE",
     "cannot differentiate with respect to 'i' of dtype int32"),
    ("lop_u_shape", g([X, {"id": "u", "type": {"dtype": "float64", "shape": [2]}}],
                      [{"op": "exp", "inputs": ["x"], "outputs": ["f"]},
                       {"op": "lop", "inputs": ["f", "x", "u"], "outputs": ["gx"]}]), "TG_ETYPE",
     "inputs[2]: 'u' is float64[2] but must have the shape of f 'f' (float64[3])"),
    ("rop_v_count", g(nodes=[{"op": "exp", "inputs": ["x"], "outputs": ["f"]},
                             {"op": "rop", "inputs": ["f", "x", "x", "x"], "outputs": ["jv"]}]), "TG_ELOAD",
     "rop(f, w1..wn, v1..vn) needs as many v's as w's"),
    ("dangling", g(nodes=[add("x", "z", name="sum")]), "TG_ELOAD",
     "nodes[0] (add 'sum' -> y): inputs[1]: 'z' is not declared and no node produces it"),
    ("two_producers", g(nodes=[add(), add()]), "TG_ELOAD", "'y' is already produced by nodes[0]"),
    ("produces_constant", g([X, {"id": "c", "type": {"dtype": "float64", "shape": [3]}, "constant": {"data": [1, 2, 3]}}],
                            [add(out="c")]), "TG_ELOAD", "'c' is declared constant at variables[1]"),
    ("arity", g(nodes=[{"op": "sub", "inputs": ["x", "x", "x"], "outputs": ["y"]}]), "TG_ELOAD",
     "sub expects 2 inputs, got 3"),
    ("outputs_count", g(nodes=[{"op": "exp", "inputs": ["x"], "outputs": ["y", "z"]}]), "TG_ELOAD",
     "exp has 1 output, got 2"),
    ("unknown_attr", g(nodes=[{"op": "sum", "inputs": ["x"], "outputs": ["y"], "attrs": {"axes": 0}}]), "TG_ELOAD",
     "attrs.axes: sum has no attribute 'axes'"),
    ("bad_attr", g(nodes=[{"op": "sum", "inputs": ["x"], "outputs": ["y"], "attrs": {"axis": "rows"}}]), "TG_ELOAD",
     "attrs.axis: expected null, an integer or a list of integers"),
    ("axis_range", g(nodes=[{"op": "sum", "inputs": ["x"], "outputs": ["y"], "attrs": {"axis": 1}}]), "TG_ELOAD",
     "axis 1 is out of bounds"),
    ("cycle", g(nodes=[add("x", "c", "a"), add("a", "x", "b"), add("b", "x", "c")]), "TG_ELOAD",
     "the graph has a cycle"),
    ("declared_type_mismatch", g([X, {"id": "y", "type": {"dtype": "float32", "shape": [3]}}], [add()]), "TG_ETYPE",
     "'y' is declared float32[3] at variables[1], but the op gives float64[3]"),
    ("broadcast_static", g([X, {"id": "z", "type": {"dtype": "float64", "shape": [4]}}], [add("x", "z")]), "TG_ESHAPE",
     "do not broadcast"),
    ("dot_not_aligned", g([{"id": "a", "type": {"dtype": "float64", "shape": [2, 3]}},
                           {"id": "b", "type": {"dtype": "float64", "shape": [4, 2]}}],
                          [{"op": "dot", "inputs": ["a", "b"], "outputs": ["y"]}]), "TG_ESHAPE",
     "shapes (2, 3) and (4, 2) not aligned: 3 (dim 1) != 4 (dim 0)"),
    ("function_unknown_id", g(nodes=[add()], functions={"f": {"inputs": ["x"], "outputs": ["nope"]}}), "TG_ELOAD",
     "functions.f.outputs[0]: unknown id 'nope'"),
    ("update_not_shared", g(nodes=[add()], functions={"f": {"inputs": ["x"], "outputs": [], "updates": {"x": "y"}}}),
     "TG_ELOAD", "functions.f.updates.x: not a shared variable"),
    ("update_dtype", g([X, {"id": "s", "type": {"dtype": "float32", "shape": [3]}, "shared": {"data": [0, 0, 0]}}],
                       [add()], functions={"f": {"inputs": ["x"], "outputs": [], "updates": {"s": "y"}}}), "TG_ETYPE",
     "the new value 'y' is float64[3], but the shared variable is float32[3]"),
    ("missing_input", g([X, {"id": "w", "type": {"dtype": "float64", "shape": [3]}}], [add("x", "w", name="scale")],
                        functions={"f": {"inputs": ["x"], "outputs": ["y"]}}), "TG_EMISSING",
     "input 'w' is needed by nodes[0] (add 'scale' -> y)"),
    ("function_key", g(nodes=[add()], functions={"f": {"inputs": ["x"], "outputs": ["y"], "update": {}}}), "TG_ELOAD",
     "functions.f.update: unknown key"),
    ("inline_const", g(nodes=[add("x", {"val": 1})]), "TG_ELOAD", "inputs[1]: expected an id or {\"value\": V}"),
    ("weak_overflow", g([{"id": "i", "type": {"dtype": "int8", "shape": [2]}}],
                        [{"op": "add", "inputs": ["i", {"value": 1000}], "outputs": ["y"]}]), "TG_ETYPE",
     "1000 is out of bounds for int8"),
    ("weak_overflow_u64", g([{"id": "i", "type": {"dtype": "int64", "shape": [2]}}],
                            [{"op": "add", "inputs": ["i", {"value": 2**64 - 1}], "outputs": ["y"]}]), "TG_ETYPE",
     "the Python integer 18446744073709551615 is out of bounds for int64"),
    # A weak float never becomes an integer (it was truncated: x[1] += 2.5
    # of an int8 x gave x[1] + 2).
    ("weak_float_to_int", g([{"id": "i", "type": {"dtype": "int8", "shape": [3]}}],
                            [{"op": "inc_subtensor", "inputs": ["i", {"value": 2.5}], "outputs": ["y"],
                              "attrs": {"index": [1]}}]), "TG_ETYPE",
     "inputs[1]: the Python float 2.5 cannot become int8"),
    ("weak_float_ifelse", g([{"id": "i", "type": {"dtype": "int64", "shape": []}},
                             {"id": "c", "type": {"dtype": "bool", "shape": []}}],
                            [{"op": "ifelse", "inputs": ["c", "i", {"value": 0.1}], "outputs": ["y"]}]), "TG_ETYPE",
     "inputs[2]: the Python float 0.1 cannot become int64"),
    # Every error about a node shows where the frontend made it (FORMAT.md
    # s4), a load error as a run-time one: type, attrs, inputs.
    ("trace_type", g([X, {"id": "w", "type": {"dtype": "float64", "shape": [4]}}],
                     [add("x", "w", trace=[{"file": "lib.py", "line": 3},
                                           {"file": "model.py", "line": 12, "function": "build",
                                            "code": "y = x + w"}])]), "TG_ESHAPE",
     "lengths 3 and 4 in dimension 0 [at model.py:12 in build: y = x + w]"),
    ("trace_attrs", g(nodes=[{"op": "sum", "inputs": ["x"], "outputs": ["y"], "attrs": {"axis": "one"},
                              "trace": [{"file": "model.py", "line": 7}]}]), "TG_ELOAD",
     "attrs.axis: expected null, an integer or a list of integers [at model.py:7]"),
    ("trace_input", g(nodes=[add("x", "nothere", trace=[{"file": "model.py", "line": 9}])]), "TG_ELOAD",
     "[at model.py:9]"),
    ("trace_line", g(nodes=[add(trace=[{"file": "m.py", "line": "twelve"}])]), "TG_ELOAD",
     "nodes[0].trace[0].line: expected an integer"),
    ("inplace_index", g(nodes=[add(inplace={"0": 5})]), "TG_ELOAD", "inplace.0: not an input index"),
    ("inplace_read_later", g([X, {"id": "t", "type": {"dtype": "float64", "shape": [3]}}],
                             [add("x", "t", "a"), add("a", "x", "b", inplace={"0": 0}), add("a", "x", "c")],
                             functions={"f": {"inputs": ["x", "t"], "outputs": ["b", "c"]}}), "TG_ELOAD",
     "input 0 'a' is read elsewhere too"),
    ("inplace_shared", g([X, {"id": "s", "type": {"dtype": "float64", "shape": [3]}, "shared": {"data": [1, 2, 3]}}],
                         [add("s", "x", "b", inplace={"0": 0})]), "TG_ELOAD",
     "input 0 's' is shared state and cannot be overwritten"),
    ("node_not_object", g(nodes=[42]), "TG_ELOAD", "nodes[0]: expected an object"),
    ("inline_needs_dtype", g(nodes=[add("x", {"value": {"dtype": "float64", "data": [1, 2, 3]}})]), "TG_ELOAD",
     "nodes[0].inputs[1].value: a value needs dtype and shape unless its data is a scalar"),
    ("huge_shape", g([{"id": "c", "type": {"dtype": "float64", "shape": [1000000000000]}, "constant": {"data": [1]}}]),
     "TG_ELOAD", "variables[0].constant.data: does not match the shape"),
    ("absurd_shape", g(nodes=[add("x", {"value": {"dtype": "float64", "shape": [4294967296, 4294967296], "base64": ""}})]),
     "TG_ELOAD", "value.shape: the value would be larger than memory"),
    # no array of this type can exist: its size in bytes passes 2^63 - 1
    ("type_too_large", g([{"id": "x", "type": {"dtype": "float64", "shape": [4294967296, None, 4294967296]}}]),
     "TG_ELOAD", "variables[0].type.shape: float64[4294967296, ?, 4294967296] holds more than 2^63 - 1 bytes"),
    # a zero does not excuse the other lengths, in either order (NumPy: "array
    # is too big"); [0, 2^63 - 1] passed, [2^63 - 1, 0] did not
    ("type_too_large_empty", g([{"id": "x", "type": {"dtype": "float64", "shape": [0, 2 ** 63 - 1]}}]),
     "TG_ELOAD", "variables[0].type.shape: float64[0, 9223372036854775807] holds more than 2^63 - 1 bytes"),
    # static lengths whose arithmetic passes 2^63 - 1 (arrays of one or
    # two bytes an element can have them)
    ("join_too_long", g([{"id": "a", "type": {"dtype": "bool", "shape": [2 ** 63 - 1]}}],
                        [{"op": "join", "inputs": ["a", "a"], "outputs": ["y"], "attrs": {"axis": 0}}]),
     "TG_ESHAPE", "inputs[1] 'a': the joined length along axis 0 passes 2^63 - 1"),
    ("conv_dilated_too_long", g([{"id": "a", "type": {"dtype": "float16", "shape": [1, 1, 8, 8]}},
                                 {"id": "w", "type": {"dtype": "float16", "shape": [1, 1, 2 ** 61 + 1, 1]}}],
                                [{"op": "conv2d", "inputs": ["a", "w"], "outputs": ["y"],
                                  "attrs": {"filter_dilation": [4, 1]}}]),
     "TG_ESHAPE", "the kernel (2305843009213693953, dilated 4) and the padded input (8) along dimension 2 pass 2^63 - 1"),
    # nor can a result's: float32[2^60, 1] + float32[1, 2^60]
    ("result_too_large", g([{"id": "a", "type": {"dtype": "float32", "shape": [2 ** 60, 1]}},
                            {"id": "b", "type": {"dtype": "float32", "shape": [1, 2 ** 60]}}],
                           [{"op": "add", "inputs": ["a", "b"], "outputs": ["y"]}]),
     "TG_ESHAPE", "outputs[0]: float32[1152921504606846976, 1152921504606846976] holds more than 2^63 - 1 bytes"),
    ("base64_chars", g([{"id": "c", "type": {"dtype": "uint8", "shape": [6]}, "constant": {"base64": "AAAA*AAA"}}]),
     "TG_ELOAD", "variables[0].constant.base64: not valid base64"),
    ("int64_overflow", g([{"id": "c", "type": {"dtype": "int64", "shape": []}, "constant": {"data": 9223372036854775808}}]),
     "TG_ELOAD", "9223372036854775808 does not fit int64"),
    ("value_rank", g([{"id": "c", "type": {"dtype": "float64", "shape": [None]}, "constant": {"data": 5}}]), "TG_ESHAPE",
     "variables[0].constant: the value has shape (), but the variable's type says (?,)"),
    ("npy_rank", g([{"id": "c", "type": {"dtype": "float64", "shape": [None, 3]}, "constant": {"npy": "rank1.npy"}}]),
     "TG_ESHAPE", "variables[0].constant: the value has shape (3,), but the variable's type says (?, 3)"),
    ("npy_backslash", g([{"id": "c", "type": {"dtype": "float64", "shape": [3]}, "constant": {"npy": "a\\rank1.npy"}}]),
     "TG_ELOAD", "leaves the graph's folder"),
    ("test_value_shape", g([{"id": "x", "type": {"dtype": "float64", "shape": [3]}, "test_value": {"data": [1, 2]}}]),
     "TG_ELOAD", "variables[0].test_value.data"),
    ("generated_id", g(nodes=[add("x", {"value": 1}), add("y:in1", "x", "z")]), "TG_ELOAD",
     "nodes[1] (add -> z): inputs[0]: 'y:in1' is not declared"),
    ("function_constant_input", g([X, {"id": "c", "type": {"dtype": "float64", "shape": [3]}, "constant": {"data": [1, 2, 3]}}],
                                  [add("x", "c")], functions={"f": {"inputs": ["c"], "outputs": ["y"]}}), "TG_ELOAD",
     "functions.f.inputs[0]: 'c' is a constant, not an input"),
    ("trace_file", g(nodes=[add(trace=[{"file": 12, "line": 3}])]), "TG_ELOAD", "nodes[0].trace[0].file: expected a string"),
    ("inplace_key", g(nodes=[add(inplace={"+0": 0})]), "TG_ELOAD", "inplace.+0: not an output index"),
    ("inplace_constant", g(nodes=[add("x", {"value": {"dtype": "float64", "shape": [3], "data": [1, 2, 3]}}, inplace={"0": 1})]),
     "TG_ELOAD", "inplace.0: input 1 '(inline)' is a constant and cannot be overwritten"),
    ("inplace_broadcast", g([X, {"id": "s", "type": {"dtype": "float64", "shape": [1]}}], [add("x", "s", inplace={"0": 1})]),
     "TG_ETYPE", "inplace.0: output 0 (float64[3]) cannot be written over input 1 (float64[1])"),
    ("inplace_op", g([{"id": "a", "type": {"dtype": "float64", "shape": [2, 2]}}],
                     [{"op": "dot", "inputs": ["a", "a"], "outputs": ["y"], "inplace": {"0": 0}}]), "TG_ELOAD",
     "inplace.0: dot cannot write output 0 over input 0"),
    ("deep_nesting", None, "TG_EPARSE", "levels deep"),
    ("not_utf8", None, "TG_EPARSE", "line 1, column"),
    ("missing_input_main", g([X, {"id": "w", "type": {"dtype": "float64", "shape": [3]}}], [add("x", "w")],
                             functions={"f": {"inputs": ["x"], "outputs": ["y"]}}), "TG_EMISSING", "functions.f: "),
    ("bool_neg", g([{"id": "b", "type": {"dtype": "bool", "shape": []}}], [{"op": "neg", "inputs": ["b"], "outputs": ["y"]}]),
     "TG_ETYPE", "neg of bool is not supported"),
    # x has 3 elements: 3 * 2^62 and 2^62 + 2^62 + 2^62 both pass 2^63 - 1
    ("repeat_too_many", g(nodes=[{"op": "repeat", "inputs": ["x", {"value": 2 ** 62}], "outputs": ["y"]}]),
     "TG_ESHAPE", "inputs[1] 'y:in1': the repeats make more than 2^63 - 1 elements"),
    ("repeat_sum_too_many", g(nodes=[{"op": "repeat", "inputs": ["x", {"value": {"dtype": "int64", "shape": [3],
                                                                                  "data": [2 ** 62] * 3}}],
                                      "outputs": ["y"], "attrs": {"axis": 0}}]),
     "TG_ESHAPE", "the repeats make more than 2^63 - 1 elements"),
    # a uint64 index past 2^63 - 1 is out of bounds, not -1 (its bits)
    ("subtensor_u64_index", g(nodes=[{"op": "subtensor",
                                      "inputs": ["x", {"value": {"dtype": "uint64", "shape": [], "data": 2 ** 64 - 1}}],
                                      "outputs": ["y"], "attrs": {"index": ["$0"]}}]),
     "TG_ELOAD", "attrs.index[0]: index 18446744073709551615 is out of bounds for axis 0 with size 3"),
    # A NUL (\u0000) anywhere: json-c keeps it in a value, but tg reads
    # strings as C strings, which ended there ("before"); json-c cuts a key
    # at one itself. Refused, with the path (a key as written).
    ("nul_var_name", g([dict(X, name=NUL)]), "TG_ELOAD", "variables[0].name: contains a NUL character (\\u0000)"),
    ("nul_node_name", g(nodes=[add(name=NUL)]), "TG_ELOAD", "nodes[0].name: contains a NUL character"),
    ("nul_output_id", g(nodes=[add(out="y\x00z")]), "TG_ELOAD", "nodes[0].outputs[0]: contains a NUL character"),
    ("nul_function_name", g(nodes=[add()], functions={"ma\x00in": {"inputs": ["x"], "outputs": ["y"]}}),
     "TG_ELOAD", "functions.ma\\u0000in: contains a NUL character"),
    ("nul_trace", g(nodes=[add(trace=[{"file": "model.py", "line": 3, "function": NUL}])]), "TG_ELOAD",
     "nodes[0].trace[0].function: contains a NUL character"),
    ("nul_body_name", g(nodes=[{"op": "op_from_graph", "inputs": ["x"], "outputs": ["y"],
                                "attrs": {"name": NUL, "body": BODY}}]), "TG_ELOAD",
     "nodes[0].attrs.name: contains a NUL character"),
    ("nul_body_var_name", g(nodes=[{"op": "op_from_graph", "inputs": ["x"], "outputs": ["y"],
                                    "attrs": {"name": "f", "body": dict(BODY, variables=[dict(X, id="a", name=NUL)])}}]),
     "TG_ELOAD", "nodes[0].attrs.body.variables[0].name: contains a NUL character"),
    ("nul_meta_key", g(meta={"note": {"k\x00": 1}}), "TG_ELOAD", "meta.note.k\\u0000: contains a NUL character"),
    # x[i] += y writes add(x[i], y) back: int64 + uint64 is a float64 sum,
    # which NumPy's same_kind rule does not cast to int64 (it was taken,
    # and wrapped). Only the sum's dtype refuses it: uint64 alone casts.
    ("inc_sum_dtype", g([{"id": "x", "type": {"dtype": "int64", "shape": [2]}},
                         {"id": "u", "type": {"dtype": "uint64", "shape": [2]}}],
                        [{"op": "inc_subtensor", "inputs": ["x", "u"], "outputs": ["y"], "attrs": {"index": []}}]),
     "TG_ETYPE", "inputs[1] 'u': cannot add uint64 to int64 (the dtype of inputs[0] 'x'): the sum is float64"),
]

RAW = {
    "deep_nesting": '{"format": "tg-graph", "version": 1, "variables": [], "nodes": [], "meta": {"m": '
                    + "[" * 300 + "]" * 300 + "}}",
    "not_utf8": b'{"format": "tg-graph", "version": 1, "name": "\xff\xfe", "variables": [], "nodes": []}',
}


def npy(path, shape, values):
    """A little-endian float64 .npy file (format 1.0), without NumPy."""
    import struct
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (%s), }" % (
        "".join("%d," % d for d in shape) if len(shape) == 1 else ", ".join(str(d) for d in shape))
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%dd" % len(values), *values))


npy(os.path.join(OUT, "rank1.npy"), (3,), [1.0, 2.0, 3.0])

with open(os.path.join(OUT, "EXPECT"), "w") as expect:
    expect.write("# file<TAB>status<TAB>substring of the one-line message (written by tests/data/gen/load_errors.py)\n")
    for name, doc, status, sub in CASES:
        text = RAW.get(name, doc)
        if not isinstance(text, (str, bytes)):
            text = json.dumps(doc, indent=1)
        if isinstance(text, str):
            text = text.encode()
        with open(os.path.join(OUT, name + ".json"), "wb") as f:
            f.write(text + b"\n")
        expect.write(f"{name}.json\t{status}\t{sub}\n")

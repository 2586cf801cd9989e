/* `composite` bodies as CUDA kernels compiled by NVRTC
 * (backend/cuda/nvrtc.c).
 *
 * Without a GPU (this runs in CI, where the toolkit is):
 *   - every body below, covering every op the kernel generator handles in
 *     every dtype family, generates CUDA C++ that NVRTC compiles;
 *   - the disk cache misses, then hits from memory, then from disk; a
 *     damaged entry is compiled again; two processes compiling the same
 *     body at once both succeed and compile it once; `tgc cache` lists
 *     and clears the GPU entries beside the CPU ones;
 *   - the values: the generated kernel, compiled for the host by the
 *     system C++ compiler under a small shim (threadIdx... as globals, the
 *     grid walked by loops), against the CPU composite's interpreter (the
 *     unfused ops' own loops, independent of any code generator) on random
 *     inputs with NaN, infinities, signed zeros and integer overflow,
 *     broadcast, contiguous and transposed.
 * With a GPU (skipped otherwise): each body on the device against the CPU,
 * in place too, and the example MLP trained with fusion on the device.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#ifdef TG_HAVE_CUDA
#include <dirent.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/nvrtc.h"
#include "graph/graph.h"
#include "ops/composite.h"
#include "tensor/tensor.h"

/* ---- the bodies ---- */

enum { R_ANY, R_POS, R_UNIT, R_SMALL, R_BOOL };

typedef struct opd {
    const char *id, *dtype;
    int ndim;
    int64_t shape[3];
    int range;
} opd;

typedef struct bcase {
    const char *name;
    int nin;
    opd in[4];
    const char *nodes; /* the body's nodes (JSON array) */
    const char *outs;  /* the body's outputs (JSON array of ids) */
    bool edges;        /* inputs get NaN, infinities, zeros, extremes */
} bcase;

#define UN(op, x, y) "{\"op\":\"" op "\",\"inputs\":[\"" x "\"],\"outputs\":[\"" y "\"]}"
#define BIN(op, x, z, y) "{\"op\":\"" op "\",\"inputs\":[\"" x "\",\"" z "\"],\"outputs\":[\"" y "\"]}"

/* Real functions defined everywhere. */
#define UNARY_ANY(T)                                                                                  \
    "[" UN("neg", "x", "a") "," UN("abs", "x", "b") "," UN("sign", "x", "c") "," UN("exp", "x", "d") \
    "," UN("exp2", "x", "e") "," UN("expm1", "x", "f") "," UN("sin", "x", "g") "," UN("cos", "x", "h")   \
    "," UN("tan", "x", "i") "," UN("arctan", "x", "j") "," UN("sinh", "x", "k") "," UN("cosh", "x", "l") \
    "," UN("tanh", "x", "m") "," UN("arcsinh", "x", "n") "," UN("erf", "x", "o") "," UN("erfc", "x", "p") \
    "," UN("floor", "x", "q") "," UN("ceil", "x", "r") "," UN("round", "x", "s") "," UN("trunc", "x", "t") \
    "," UN("sigmoid", "x", "u") "," UN("softplus", "x", "v") "," UN("relu", "x", "w") "," UN("sqr", "x", "y") \
    "," UN("reciprocal", "x", "z") "," UN("identity", "x", "aa") "," UN("isnan", "x", "ab")               \
    "," UN("isinf", "x", "ac") "," UN("logical_not", "x", "ad") "]"
#define UNARY_ANY_OUTS                                                                                \
    "[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\",\"j\",\"k\",\"l\",\"m\",\"n\",\"o\",\"p\",\"q\"," \
    "\"r\",\"s\",\"t\",\"u\",\"v\",\"w\",\"y\",\"z\",\"aa\",\"ab\",\"ac\",\"ad\"]"
/* Functions with a restricted domain, on (0.05, 0.95) (and outside it at
 * the edges). */
#define UNARY_DOMAIN                                                                                  \
    "[" UN("log", "x", "a") "," UN("log2", "x", "b") "," UN("log10", "x", "c") "," UN("log1p", "x", "d") \
    "," UN("sqrt", "x", "e") "," UN("arcsin", "x", "f") "," UN("arccos", "x", "g") ","                   \
    UN("arctanh", "x", "h") ",{\"op\":\"add\",\"inputs\":[\"x\",{\"value\":1}],\"outputs\":[\"x1\"]}," \
    UN("arccosh", "x1", "i") "]"
#define UNARY_DOMAIN_OUTS "[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\"]"
#define BINARY                                                                                        \
    "[" BIN("add", "x", "w", "a") "," BIN("sub", "x", "w", "b") "," BIN("mul", "x", "w", "c") ","       \
    BIN("true_div", "x", "w", "d") "," BIN("pow", "x", "w", "e") "," BIN("maximum", "x", "w", "f") ","  \
    BIN("minimum", "x", "w", "g") "," BIN("arctan2", "x", "w", "h") "," BIN("eq", "x", "w", "i") ","    \
    BIN("neq", "x", "w", "j") "," BIN("lt", "x", "w", "k") "," BIN("le", "x", "w", "l") ","             \
    BIN("gt", "x", "w", "m") "," BIN("ge", "x", "w", "n") "," BIN("logical_and", "x", "w", "o") ","     \
    BIN("logical_or", "x", "w", "p") "," BIN("logical_xor", "x", "w", "q") ","                          \
    "{\"op\":\"add\",\"inputs\":[\"x\",\"w\",\"z\"],\"outputs\":[\"r\"]},"                               \
    "{\"op\":\"mul\",\"inputs\":[\"x\",\"w\",\"z\",\"x\"],\"outputs\":[\"s\"]}]"
#define BINARY_OUTS                                                                                   \
    "[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\",\"j\",\"k\",\"l\",\"m\",\"n\",\"o\",\"p\",\"q\"," \
    "\"r\",\"s\"]"
/* Integer arithmetic (wrapping as the CPU does), comparisons, clip. */
#define INTEGER                                                                                       \
    "[" UN("neg", "x", "a") "," UN("abs", "x", "b") "," UN("sign", "x", "c") "," UN("sqr", "x", "d")   \
    "," UN("relu", "x", "e") "," BIN("add", "x", "w", "f") "," BIN("sub", "x", "w", "g") ","           \
    BIN("mul", "x", "w", "h") "," BIN("maximum", "x", "w", "i") "," BIN("minimum", "x", "w", "j") ","   \
    BIN("eq", "x", "w", "k") "," BIN("lt", "x", "w", "l") "," UN("logical_not", "x", "m") ","           \
    "{\"op\":\"clip\",\"inputs\":[\"x\",{\"value\":2},{\"value\":7}],\"outputs\":[\"n\"]},"           \
    UN("floor", "x", "o") "," UN("isnan", "x", "p") "," UN("identity", "x", "q") "]"
#define INTEGER_OUTS                                                                                  \
    "[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\",\"j\",\"k\",\"l\",\"m\",\"n\",\"o\",\"p\",\"q\"]"

static const bcase CASES[] = {
    {"unary float32", 1, {{"x", "float32", 2, {6, 37}, R_ANY}}, UNARY_ANY("float32"), UNARY_ANY_OUTS, true},
    {"unary float64", 1, {{"x", "float64", 2, {6, 37}, R_ANY}}, UNARY_ANY("float64"), UNARY_ANY_OUTS, true},
    {"domain float32", 1, {{"x", "float32", 2, {5, 41}, R_UNIT}}, UNARY_DOMAIN, UNARY_DOMAIN_OUTS, true},
    {"domain float64", 1, {{"x", "float64", 2, {5, 41}, R_UNIT}}, UNARY_DOMAIN, UNARY_DOMAIN_OUTS, true},
    {"binary float32",
     3,
     {{"x", "float32", 3, {4, 1, 3}, R_ANY}, {"w", "float32", 2, {5, 1}, R_ANY}, {"z", "float32", 1, {3}, R_ANY}},
     BINARY,
     BINARY_OUTS,
     true},
    {"binary float64",
     3,
     {{"x", "float64", 3, {4, 1, 3}, R_SMALL}, {"w", "float64", 2, {5, 1}, R_SMALL}, {"z", "float64", 1, {3}, R_ANY}},
     BINARY,
     BINARY_OUTS,
     true},
    /* A 0-d input (a learning rate), read once per thread. */
    {"scalar input float32",
     2,
     {{"x", "float32", 2, {7, 9}, R_ANY}, {"w", "float32", 0, {0}, R_POS}},
     "[" BIN("mul", "x", "w", "a") "," BIN("sub", "x", "a", "b") "," UN("tanh", "b", "c") "]",
     "[\"b\",\"c\"]",
     false},
    {"switch clip float32",
     3,
     {{"x", "float32", 2, {6, 11}, R_ANY}, {"c", "bool", 1, {11}, R_BOOL}, {"w", "float32", 2, {6, 1}, R_ANY}},
     "[{\"op\":\"switch\",\"inputs\":[\"c\",\"x\",\"w\"],\"outputs\":[\"a\"]},"
     "{\"op\":\"clip\",\"inputs\":[\"x\",{\"value\":-0.5},{\"value\":0.5}],\"outputs\":[\"b\"]},"
     "{\"op\":\"clip\",\"inputs\":[\"x\",\"w\",{\"value\":1.5}],\"outputs\":[\"d\"]},"
     "{\"op\":\"switch\",\"inputs\":[\"x\",\"w\",\"x\"],\"outputs\":[\"e\"]}]",
     "[\"a\",\"b\",\"d\",\"e\"]",
     true},
    {"cast",
     3,
     {{"x", "float32", 2, {4, 9}, R_SMALL}, {"k", "int32", 1, {9}, R_SMALL}, {"c", "bool", 2, {4, 1}, R_BOOL}},
     "[{\"op\":\"cast\",\"inputs\":[\"x\"],\"outputs\":[\"a\"],\"attrs\":{\"dtype\":\"int32\"}},"
     "{\"op\":\"cast\",\"inputs\":[\"k\"],\"outputs\":[\"b\"],\"attrs\":{\"dtype\":\"float64\"}},"
     "{\"op\":\"cast\",\"inputs\":[\"x\"],\"outputs\":[\"d\"],\"attrs\":{\"dtype\":\"bool\"}},"
     "{\"op\":\"cast\",\"inputs\":[\"c\"],\"outputs\":[\"e\"],\"attrs\":{\"dtype\":\"float32\"}},"
     "{\"op\":\"cast\",\"inputs\":[\"k\"],\"outputs\":[\"f\"],\"attrs\":{\"dtype\":\"int8\"}},"
     "{\"op\":\"cast\",\"inputs\":[\"x\"],\"outputs\":[\"g\"],\"attrs\":{\"dtype\":\"float64\"}},"
     "{\"op\":\"mul\",\"inputs\":[\"x\",\"k\"],\"outputs\":[\"h\"]},"
     "{\"op\":\"add\",\"inputs\":[\"k\",\"c\"],\"outputs\":[\"i\"]}]",
     "[\"a\",\"b\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\"]",
     false},
    {"int32", 2, {{"x", "int32", 2, {3, 13}, R_ANY}, {"w", "int32", 1, {13}, R_ANY}}, INTEGER, INTEGER_OUTS, true},
    {"int64", 2, {{"x", "int64", 2, {3, 13}, R_ANY}, {"w", "int64", 2, {3, 1}, R_ANY}}, INTEGER, INTEGER_OUTS, true},
    {"int8", 2, {{"x", "int8", 2, {3, 13}, R_ANY}, {"w", "int8", 1, {13}, R_ANY}}, INTEGER, INTEGER_OUTS, true},
    {"int16", 2, {{"x", "int16", 1, {29}, R_ANY}, {"w", "int16", 0, {0}, R_ANY}}, INTEGER, INTEGER_OUTS, true},
    {"uint8", 2, {{"x", "uint8", 2, {3, 13}, R_ANY}, {"w", "uint8", 1, {13}, R_ANY}}, INTEGER, INTEGER_OUTS, true},
    {"uint16", 2, {{"x", "uint16", 2, {3, 13}, R_ANY}, {"w", "uint16", 1, {13}, R_ANY}}, INTEGER, INTEGER_OUTS, true},
    {"uint32", 2, {{"x", "uint32", 2, {3, 13}, R_ANY}, {"w", "uint32", 1, {13}, R_ANY}}, INTEGER, INTEGER_OUTS, true},
    {"uint64", 2, {{"x", "uint64", 2, {3, 13}, R_ANY}, {"w", "uint64", 1, {13}, R_ANY}}, INTEGER, INTEGER_OUTS, true},
    /* A signed integer against a uint64 compares exactly, not in their
     * float64 (int64 max < 2^63, which float64 makes equal), as the CPU. */
    {"int64 uint64",
     2,
     {{"x", "int64", 2, {3, 13}, R_ANY}, {"w", "uint64", 1, {13}, R_ANY}},
     "[" BIN("eq", "x", "w", "a") "," BIN("neq", "w", "x", "b") "," BIN("lt", "x", "w", "c") ","
     BIN("le", "w", "x", "d") "," BIN("gt", "x", "w", "e") "," BIN("ge", "w", "x", "f") ","
     "{\"op\":\"lt\",\"inputs\":[\"x\",{\"value\":{\"data\":9223372036854775808,\"dtype\":\"uint64\"}}],"
     "\"outputs\":[\"g\"]},"
     "{\"op\":\"eq\",\"inputs\":[{\"value\":{\"data\":9223372036854775808,\"dtype\":\"uint64\"}},\"x\"],"
     "\"outputs\":[\"h\"]},"
     "{\"op\":\"cast\",\"inputs\":[\"x\"],\"outputs\":[\"x8\"],\"attrs\":{\"dtype\":\"int8\"}},"
     BIN("ge", "x8", "w", "i") "]",
     "[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\"]",
     true},
    {"bool",
     2,
     {{"x", "bool", 2, {5, 8}, R_BOOL}, {"w", "bool", 1, {8}, R_BOOL}},
     "[" BIN("add", "x", "w", "a") "," BIN("mul", "x", "w", "b") "," BIN("maximum", "x", "w", "c") ","
     BIN("minimum", "x", "w", "d") "," UN("logical_not", "x", "e") "," BIN("eq", "x", "w", "f") ","
     BIN("logical_xor", "x", "w", "g") "," UN("abs", "x", "h") "," UN("sqr", "x", "i") "]",
     "[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\"]",
     false},
    /* int_div and mod by constants (the only divisors the generator
     * takes: no zero to report), floor division and the divisor's sign. */
    {"division int64",
     1,
     {{"x", "int64", 2, {3, 13}, R_ANY}},
     "[{\"op\":\"int_div\",\"inputs\":[\"x\",{\"value\":7}],\"outputs\":[\"a\"]},"
     "{\"op\":\"mod\",\"inputs\":[\"x\",{\"value\":7}],\"outputs\":[\"b\"]},"
     "{\"op\":\"int_div\",\"inputs\":[\"x\",{\"value\":-3}],\"outputs\":[\"c\"]},"
     "{\"op\":\"mod\",\"inputs\":[\"x\",{\"value\":-3}],\"outputs\":[\"d\"]},"
     "{\"op\":\"int_div\",\"inputs\":[\"x\",{\"value\":-9223372036854775807}],\"outputs\":[\"e\"]}]",
     "[\"a\",\"b\",\"c\",\"d\",\"e\"]",
     true},
    {"division int8 uint32",
     2,
     {{"x", "int8", 2, {3, 13}, R_ANY}, {"w", "uint32", 1, {13}, R_ANY}},
     "[{\"op\":\"int_div\",\"inputs\":[\"x\",{\"value\":-128}],\"outputs\":[\"a\"]},"
     "{\"op\":\"mod\",\"inputs\":[\"x\",{\"value\":5}],\"outputs\":[\"b\"]},"
     "{\"op\":\"int_div\",\"inputs\":[\"w\",{\"value\":10}],\"outputs\":[\"c\"]},"
     "{\"op\":\"mod\",\"inputs\":[\"w\",{\"value\":4294967295}],\"outputs\":[\"d\"]}]",
     "[\"a\",\"b\",\"c\",\"d\"]",
     true},
    {"division float64",
     1,
     {{"x", "float64", 2, {4, 9}, R_ANY}},
     "[{\"op\":\"int_div\",\"inputs\":[\"x\",{\"value\":0.5}],\"outputs\":[\"a\"]},"
     "{\"op\":\"mod\",\"inputs\":[\"x\",{\"value\":-3}],\"outputs\":[\"b\"]},"
     "{\"op\":\"int_div\",\"inputs\":[\"x\",{\"value\":{\"data\":\"inf\",\"dtype\":\"float64\"}}],"
     "\"outputs\":[\"c\"]},"
     "{\"op\":\"mod\",\"inputs\":[\"x\",{\"value\":{\"data\":\"-inf\",\"dtype\":\"float64\"}}],"
     "\"outputs\":[\"d\"]},"
     "{\"op\":\"mod\",\"inputs\":[\"x\",{\"value\":0.0}],\"outputs\":[\"e\"]}]",
     "[\"a\",\"b\",\"c\",\"d\",\"e\"]",
     true},
    {"division float32",
     1,
     {{"x", "float32", 2, {4, 9}, R_ANY}},
     "[{\"op\":\"int_div\",\"inputs\":[\"x\",{\"value\":0.3}],\"outputs\":[\"a\"]},"
     "{\"op\":\"mod\",\"inputs\":[\"x\",{\"value\":-7}],\"outputs\":[\"b\"]}]",
     "[\"a\",\"b\"]",
     true},
    /* gammaln, digamma, trigamma and polygamma (ops/special.h's text): the
     * poles, the reflection below 0, both sides of 10. */
    {"special float64",
     1,
     {{"x", "float64", 2, {4, 9}, R_ANY}},
     "[" UN("gammaln", "x", "a") "," UN("digamma", "x", "b") "," UN("trigamma", "x", "c") ","
     "{\"op\":\"polygamma\",\"inputs\":[{\"value\":2},\"x\"],\"outputs\":[\"d\"]},"
     "{\"op\":\"polygamma\",\"inputs\":[{\"value\":5},\"x\"],\"outputs\":[\"e\"]}]",
     "[\"a\",\"b\",\"c\",\"d\",\"e\"]",
     true},
    {"special float32 float16",
     2,
     {{"x", "float32", 2, {4, 9}, R_ANY}, {"h", "float16", 1, {9}, R_ANY}},
     "[" UN("gammaln", "x", "a") "," UN("digamma", "x", "b") "," UN("trigamma", "x", "c") ","
     UN("gammaln", "h", "d") "," UN("digamma", "h", "e") "," UN("trigamma", "h", "f") ","
     "{\"op\":\"polygamma\",\"inputs\":[{\"value\":3},\"x\"],\"outputs\":[\"g\"]}]",
     "[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\"]",
     true},
    /* Constants copied into the body: non-finite, hex-exact, extreme. */
    {"constants",
     2,
     {{"x", "float64", 2, {4, 6}, R_ANY}, {"k", "int64", 1, {6}, R_ANY}},
     "[{\"op\":\"maximum\",\"inputs\":[\"x\",{\"value\":{\"data\":\"-inf\",\"dtype\":\"float64\"}}],"
     "\"outputs\":[\"a\"]},"
     "{\"op\":\"add\",\"inputs\":[\"x\",{\"value\":{\"data\":\"nan\",\"dtype\":\"float64\"}}],\"outputs\":[\"b\"]},"
     "{\"op\":\"mul\",\"inputs\":[\"x\",{\"value\":0.1}],\"outputs\":[\"c\"]},"
     "{\"op\":\"minimum\",\"inputs\":[\"x\",{\"value\":{\"data\":\"inf\",\"dtype\":\"float64\"}}],"
     "\"outputs\":[\"d\"]},"
     "{\"op\":\"add\",\"inputs\":[\"k\",{\"value\":{\"data\":-9223372036854775807,\"dtype\":\"int64\"}}],"
     "\"outputs\":[\"e\"]}]",
     "[\"a\",\"b\",\"c\",\"d\",\"e\"]",
     true},
    /* A deeper chain, as fusion makes them (the MLP's gradient). */
    {"chain float32",
     3,
     {{"x", "float32", 2, {16, 33}, R_ANY}, {"b", "float32", 1, {33}, R_ANY}, {"g", "float32", 2, {16, 33}, R_ANY}},
     "[" BIN("add", "x", "b", "t0") "," UN("tanh", "t0", "h") "," UN("sqr", "h", "t1") ","
     "{\"op\":\"sub\",\"inputs\":[{\"value\":1},\"t1\"],\"outputs\":[\"t2\"]}," BIN("mul", "g", "t2", "dg") ","
     UN("sigmoid", "t0", "s") "," UN("softplus", "x", "sp") "," UN("relu", "t0", "r") "]",
     "[\"h\",\"dg\",\"s\",\"sp\",\"r\"]",
     true},
    /* float16: __half loads and stores, float32 math, each float16 result
     * rounded as the CPU interpreter's elemwise kernels round it. */
    {"unary float16", 1, {{"x", "float16", 2, {6, 37}, R_ANY}}, UNARY_ANY("float16"), UNARY_ANY_OUTS, true},
    {"binary float16",
     3,
     {{"x", "float16", 3, {4, 1, 3}, R_ANY}, {"w", "float16", 2, {5, 1}, R_ANY}, {"z", "float16", 1, {3}, R_ANY}},
     BINARY,
     BINARY_OUTS,
     true},
    /* Rounding after each op (h is rounded before sqr), a 0-d float16,
     * mixed dtypes, casts to and from float16, switch of float16. */
    {"chain float16",
     4,
     {{"x", "float16", 2, {16, 33}, R_ANY}, {"b", "float16", 1, {33}, R_ANY}, {"lr", "float16", 0, {0}, R_POS},
      {"k", "int32", 1, {33}, R_SMALL}},
     "[" BIN("add", "x", "b", "t0") "," UN("tanh", "t0", "h") "," UN("sqr", "h", "t1") ","
     "{\"op\":\"sub\",\"inputs\":[{\"value\":1},\"t1\"],\"outputs\":[\"t2\"]}," BIN("mul", "lr", "t2", "dg") ","
     BIN("mul", "x", "k", "xk") ","
     "{\"op\":\"cast\",\"inputs\":[\"h\"],\"outputs\":[\"h64\"],\"attrs\":{\"dtype\":\"float64\"}},"
     "{\"op\":\"mul\",\"inputs\":[\"h64\",{\"value\":0.1}],\"outputs\":[\"h64s\"]},"
     "{\"op\":\"cast\",\"inputs\":[\"h64s\"],\"outputs\":[\"hb\"],\"attrs\":{\"dtype\":\"float16\"}},"
     "{\"op\":\"cast\",\"inputs\":[\"x\"],\"outputs\":[\"xi\"],\"attrs\":{\"dtype\":\"int32\"}},"
     BIN("gt", "x", "b", "c") ","
     "{\"op\":\"switch\",\"inputs\":[\"c\",\"x\",{\"value\":0.1}],\"outputs\":[\"sw\"]}]",
     "[\"h\",\"dg\",\"xk\",\"hb\",\"xi\",\"c\",\"sw\"]",
     true},
};
enum { NCASES = sizeof CASES / sizeof CASES[0] };

/* Every op the kernel generator handles (ops/composite.c node_expr): the
 * cases above must use each. */
static const char *const GEN_OPS[] = {
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "sin", "cos", "tan", "arcsin",
    "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "erf", "erfc",
    "floor", "ceil", "round", "trunc", "sigmoid", "softplus", "reciprocal", "identity", "cast", "neg",
    "abs", "sign", "sqr", "relu", "isnan", "isinf", "logical_not", "add", "mul", "sub", "true_div",
    "pow", "arctan2", "maximum", "minimum", "eq", "neq", "lt", "le", "gt", "ge", "logical_and",
    "logical_or", "logical_xor", "switch", "clip", "int_div", "mod", "gammaln", "digamma", "trigamma",
    "polygamma", NULL};

/* How a case's inputs are laid out. */
enum { V_BCAST, V_FLAT, V_TRANSPOSE, NVARIANTS };
static const char *const VNAME[] = {"broadcast", "contiguous", "transposed"};

/* The broadcast shape of a case. */
static int case_shape(const bcase *c, int64_t *shape) {
    int nd = 0;
    for (int i = 0; i < c->nin; i++)
        if (c->in[i].ndim > nd) nd = c->in[i].ndim;
    for (int d = 0; d < nd; d++) shape[d] = 1;
    for (int i = 0; i < c->nin; i++) {
        int off = nd - c->in[i].ndim;
        for (int d = 0; d < c->in[i].ndim; d++)
            if (c->in[i].shape[d] != 1) shape[off + d] = c->in[i].shape[d];
    }
    return nd;
}

/* Input i's shape in variant v (0-d inputs stay 0-d). */
static int var_shape(const bcase *c, int v, int i, int64_t *shape) {
    if (v == V_BCAST || c->in[i].ndim == 0) {
        for (int d = 0; d < c->in[i].ndim; d++) shape[d] = c->in[i].shape[d];
        return c->in[i].ndim;
    }
    return case_shape(c, shape);
}

static bool variant_applies(const bcase *c, int v) {
    int64_t sh[8];
    if (v == V_TRANSPOSE) return case_shape(c, sh) == 2 && c->in[0].ndim > 0;
    return true;
}

static void shape_json(tg_str *s, int nd, const int64_t *sh) {
    tg_str_addf(s, "[");
    for (int d = 0; d < nd; d++) tg_str_addf(s, "%s%lld", d ? "," : "", (long long)sh[d]);
    tg_str_addf(s, "]");
}

/* The case as a graph: one composite node (with `inplace` {"0": 0} when
 * asked) whose inputs are the function's; in V_TRANSPOSE input 0 is the
 * transpose of an input of the reversed shape (a strided view). */
static char *case_json(const bcase *c, int v, bool inplace) {
    tg_str s = {0};
    int64_t sh[8];
    tg_str_addf(&s, "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[");
    for (int i = 0; i < c->nin; i++) {
        int nd = var_shape(c, v, i, sh);
        if (v == V_TRANSPOSE && i == 0) {
            int64_t t = sh[0];
            sh[0] = sh[1];
            sh[1] = t;
        }
        tg_str_addf(&s, "%s{\"id\":\"%s%s\",\"type\":{\"dtype\":\"%s\",\"shape\":", i ? "," : "", c->in[i].id,
                    v == V_TRANSPOSE && i == 0 ? "_t" : "", c->in[i].dtype);
        shape_json(&s, nd, sh);
        tg_str_addf(&s, "}}");
    }
    tg_str_addf(&s, "],\"nodes\":[");
    if (v == V_TRANSPOSE)
        tg_str_addf(&s, "{\"op\":\"transpose\",\"inputs\":[\"%s_t\"],\"outputs\":[\"%s\"]},", c->in[0].id,
                    c->in[0].id);
    tg_str_addf(&s, "{\"op\":\"composite\",\"inputs\":[");
    for (int i = 0; i < c->nin; i++) tg_str_addf(&s, "%s\"%s\"", i ? "," : "", c->in[i].id);
    tg_str_addf(&s, "],\"outputs\":%s,%s\"attrs\":{\"body\":{\"variables\":[", c->outs,
                inplace ? "\"inplace\":{\"0\":0}," : "");
    for (int i = 0; i < c->nin; i++)
        tg_str_addf(&s, "%s{\"id\":\"%s\",\"type\":{\"dtype\":\"%s\",\"shape\":[]}}", i ? "," : "", c->in[i].id,
                    c->in[i].dtype);
    tg_str_addf(&s, "],\"nodes\":%s,\"inputs\":[", c->nodes);
    for (int i = 0; i < c->nin; i++) tg_str_addf(&s, "%s\"%s\"", i ? "," : "", c->in[i].id);
    tg_str_addf(&s, "],\"outputs\":%s}}}],\"functions\":{\"f\":{\"inputs\":[", c->outs);
    for (int i = 0; i < c->nin; i++)
        tg_str_addf(&s, "%s\"%s%s\"", i ? "," : "", c->in[i].id, v == V_TRANSPOSE && i == 0 ? "_t" : "");
    tg_str_addf(&s, "],\"outputs\":%s}}}", c->outs);
    assert_false(s.oom);
    return s.s;
}

/* The composite node of a graph built by case_json. */
static tg_node *comp_node(tg_graph *g) {
    for (int i = 0; i < g->nnodes; i++)
        if (!strcmp(g->nodes[i]->op->name, "composite")) return g->nodes[i];
    fail_msg("no composite node");
    return NULL;
}

/* ---- random inputs ---- */

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double urand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) * (1.0 / 9007199254740992.0);
}

static const double FEDGE[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 100.0, -100.0, 1e-30, -1000.0, 0.5, -0.5, 2.5};

static tg_array *rand_input(const opd *o, int nd, const int64_t *sh, bool edges) {
    tg_dtype dt = tg_dtype_from_name(o->dtype);
    tg_array *a = tg_array_new(dt, nd, sh);
    assert_non_null(a);
    int64_t n = tg_array_size(a);
    const bool fl = dt == TG_FLOAT32 || dt == TG_FLOAT64 || dt == TG_FLOAT16;
    const bool sg = dt == TG_INT8 || dt == TG_INT16 || dt == TG_INT32 || dt == TG_INT64;
    const int bits = (int)tg_dtype_size(dt) * 8;
    for (int64_t i = 0; i < n; i++) {
        char *p = (char *)tg_array_data(a) + i * (int64_t)tg_dtype_size(dt);
        if (fl) {
            double v = o->range == R_POS    ? 0.1 + 1.9 * urand()
                     : o->range == R_UNIT   ? 0.05 + 0.9 * urand()
                     : o->range == R_SMALL  ? floor(urand() * 7) - 3
                                            : 6 * urand() - 3;
            if (edges && i % 5 == 1) v = FEDGE[(i / 5) % (sizeof FEDGE / sizeof FEDGE[0])];
            if (dt == TG_FLOAT16)
                *(uint16_t *)p = tg_float_to_half((float)v);
            else if (dt == TG_FLOAT32)
                *(float *)p = (float)v;
            else
                *(double *)p = v;
            continue;
        }
        if (dt == TG_BOOL) {
            *(uint8_t *)p = urand() < 0.5;
            continue;
        }
        /* Integers: small values, and at the edges the type's extremes
         * (so that neg, abs, sqr, add, mul wrap). */
        uint64_t u;
        if (sg) {
            int64_t v = (int64_t)floor(urand() * 41) - 20;
            if (edges && i % 4 == 1) {
                int64_t mx = bits == 64 ? INT64_MAX : ((int64_t)1 << (bits - 1)) - 1;
                v = (i / 4) % 2 ? mx : -mx - 1;
            }
            u = (uint64_t)v;
        } else {
            u = (uint64_t)floor(urand() * 40);
            if (edges && i % 4 == 1) u = bits == 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1;
        }
        memcpy(p, &u, tg_dtype_size(dt)); /* little-endian: the low bytes */
    }
    return a;
}

/* The inputs of case c in variant v: for V_TRANSPOSE input 0 is given as
 * its reversed-shape array (the graph transposes it). */
static void case_inputs(const bcase *c, int v, tg_array **in) {
    int64_t sh[8];
    for (int i = 0; i < c->nin; i++) {
        int nd = var_shape(c, v, i, sh);
        if (v == V_TRANSPOSE && i == 0) {
            int64_t t = sh[0];
            sh[0] = sh[1];
            sh[1] = t;
        }
        in[i] = rand_input(&c->in[i], nd, sh, c->edges);
    }
}

/* The CPU's values: the composite in the interpreter, that is the body's
 * ops run by their own elementwise loops. */
static tg_function *cpu_function(tg_graph *g) {
    tg_ctx *ctx = tg_ctx_new();
    tg_compile_options o = {.preset = "none", .device = "cpu"};
    tg_function *f = tg_function_compile(g, 0, &o, ctx);
    if (!f) fail_msg("%s", tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    return f;
}

static int count_outs(const char *outs) {
    int n = 0;
    for (const char *p = outs; *p; p++) n += *p == ',';
    return n + 1;
}

/* float16: one half ulp (2^-10 relative), where a float32 function's
 * last-place difference moves a rounding. */
static double tol_r(tg_dtype dt) {
    return dt == TG_FLOAT32 ? 2e-5 : dt == TG_FLOAT64 ? 1e-12 : dt == TG_FLOAT16 ? 1e-3 : 0;
}
static double tol_a(tg_dtype dt) {
    return dt == TG_FLOAT32 ? 1e-6 : dt == TG_FLOAT64 ? 1e-13 : dt == TG_FLOAT16 ? 1e-6 : 0;
}

/* ---- a fresh cache folder ---- */

static char cache_dir[256], *saved_cache_dir;
static bool saved;
static void fresh_cache(const char *tag) {
    if (!saved) {
        const char *d = getenv("TG_CACHE_DIR");
        saved_cache_dir = d ? strdup(d) : NULL;
        saved = true;
    }
    snprintf(cache_dir, sizeof cache_dir, "%s/tg-nvrtc-test-%ld-%s", P_tmpdir, (long)getpid(), tag);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
    assert_int_equal(system(cmd), 0);
    setenv("TG_CACHE_DIR", cache_dir, 1);
    tg_nvrtc_forget();
}
/* Remove the folder and go back to the caller's cache folder. */
static void drop_cache(void) {
    if (saved_cache_dir)
        setenv("TG_CACHE_DIR", saved_cache_dir, 1);
    else
        unsetenv("TG_CACHE_DIR");
    tg_nvrtc_forget();
    if (getenv("TG_TEST_KEEP")) return; /* to read what was made */
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
    assert_int_equal(system(cmd), 0);
}

/* Files in the cache folder ending in `suffix`. */
static int count_files(const char *suffix) {
    DIR *d = opendir(cache_dir);
    int n = 0;
    if (!d) return 0;
    for (struct dirent *de; (de = readdir(d));) {
        size_t l = strlen(de->d_name), k = strlen(suffix);
        n += l > k && !strcmp(de->d_name + l - k, suffix);
    }
    closedir(d);
    return n;
}

static bool nvrtc_here(void) {
    const char *why = NULL;
    if (tg_nvrtc_available(&why)) return true;
    print_message("NVRTC not available: %s\n", why ? why : "?");
    return false;
}

/* The source of case c (variant v) and a node to go with it. */
static char *case_source(const bcase *c, int v) {
    char *json = case_json(c, v, false);
    tg_graph *g = tu_load(json);
    const char *why = NULL;
    char *src = tg_nvrtc_source(comp_node(g), &why);
    if (!src) fail_msg("%s: no source: %s", c->name, why ? why : "?");
    tg_graph_free(g);
    free(json);
    return src;
}

/* ---- (a) NVRTC compiles every body ---- */

static void test_cases_cover_the_generator(void **state) {
    (void)state;
    for (int i = 0; GEN_OPS[i]; i++) {
        char pat[64];
        snprintf(pat, sizeof pat, "\"op\":\"%s\"", GEN_OPS[i]);
        bool found = false;
        for (int k = 0; k < NCASES && !found; k++) found = strstr(CASES[k].nodes, pat) != NULL;
        if (!found) fail_msg("no case uses %s", GEN_OPS[i]);
    }
}

static void test_every_body_compiles(void **state) {
    (void)state;
    if (!nvrtc_here()) skip();
    fresh_cache("compile");
    for (int k = 0; k < NCASES; k++)
        for (int v = 0; v < 2; v++) {
            char *src = case_source(&CASES[k], v);
            /* The source's first line says what it is. */
            assert_non_null(strstr(src, "/* tg composite (cuda):"));
            size_t size = 0;
            const char *why = NULL;
            const void *img = tg_nvrtc_image(src, "compute_90", &size, &why);
            if (!img) fail_msg("%s (%s): %s\n%s", CASES[k].name, VNAME[v], why ? why : "?", src);
            /* PTX for a virtual target, with the kernel's entry. */
            assert_true(size > 100 && ((const char *)img)[size - 1] == 0);
            assert_non_null(strstr(img, ".entry tg_composite_kernel"));
            /* The device compiler's size of the by-value argument block is
             * what tg_nvrtc_args_pack writes: cudaLaunchKernel copies that
             * many bytes from it. */
            const char *pd = strstr(img, "tg_composite_kernel_param_0[");
            assert_non_null(pd);
            const int nio = CASES[k].nin + count_outs(CASES[k].outs);
            assert_int_equal(strtol(pd + strlen("tg_composite_kernel_param_0["), NULL, 10),
                             80 + 8 * nio + 64 * CASES[k].nin);
            assert_non_null(strstr(img, ".param .align 8 .b8 tg_composite_kernel_param_0["));
            if (k % 6 == 0 && v == 0) {
                /* A real target gives a cubin (ELF). */
                img = tg_nvrtc_image(src, "sm_90", &size, &why);
                if (!img) fail_msg("%s sm_90: %s", CASES[k].name, why ? why : "?");
                assert_memory_equal(img, "\177ELF", 4);
            }
            tg_free(src);
        }
    drop_cache();
}

/* Bodies the GPU cannot run say why, and give no source. */
static void test_unsupported_bodies(void **state) {
    (void)state;
    static const char *const bodies[][3] = {
        /* (by a divisor that is not a constant: a zero the kernel could not report) */
        {"int64", "[{\"op\":\"int_div\",\"inputs\":[\"x\",\"x\"],\"outputs\":[\"a\"]}]", "op"},
        {"int64", "[{\"op\":\"pow\",\"inputs\":[\"x\",\"x\"],\"outputs\":[\"a\"]}]", "op"},
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        bcase c = {"x", 1, {{"x", bodies[i][0], 1, {5}, R_ANY}}, bodies[i][1], "[\"a\"]", false};
        char *json = case_json(&c, V_BCAST, false);
        tg_graph *g = tu_load(json);
        const char *why = NULL;
        assert_null(tg_nvrtc_source(comp_node(g), &why));
        assert_non_null(why);
        assert_non_null(strstr(why, bodies[i][2]));
        tg_graph_free(g);
        free(json);
    }
    /* More operands than a kernel's arguments hold. */
    tg_str s = {0};
    tg_str_addf(&s, "[");
    for (int k = 0; k < TG_NV_MAXOPS; k++)
        tg_str_addf(&s, "%s{\"op\":\"add\",\"inputs\":[\"x\",{\"value\":%d}],\"outputs\":[\"o%d\"]}", k ? "," : "",
                    k, k);
    tg_str_addf(&s, "]");
    tg_str outs = {0};
    tg_str_addf(&outs, "[");
    for (int k = 0; k < TG_NV_MAXOPS; k++) tg_str_addf(&outs, "%s\"o%d\"", k ? "," : "", k);
    tg_str_addf(&outs, "]");
    bcase c = {"many", 1, {{"x", "float32", 1, {5}, R_ANY}}, s.s, outs.s, false};
    char *json = case_json(&c, V_BCAST, false);
    tg_graph *g = tu_load(json);
    const char *why = NULL;
    assert_null(tg_nvrtc_source(comp_node(g), &why));
    assert_non_null(strstr(why, "arguments"));
    tg_graph_free(g);
    free(json);
    tg_str_free(&s);
    tg_str_free(&outs);
}

/* ---- the disk cache ---- */

static void test_cache_miss_hit_corrupt(void **state) {
    (void)state;
    if (!nvrtc_here()) skip();
    fresh_cache("hits");
    char *src = case_source(&CASES[6], V_BCAST);
    size_t size = 0;
    const char *why = NULL;
    tg_nvrtc_stats s0 = tg_nvrtc_stats_get();
    /* A miss: compiled, written as source and code. */
    assert_non_null(tg_nvrtc_image(src, "compute_90", &size, &why));
    tg_nvrtc_stats s1 = tg_nvrtc_stats_get();
    assert_int_equal(s1.compiles - s0.compiles, 1);
    assert_int_equal(count_files(".ptx"), 1);
    assert_int_equal(count_files(".cu"), 1);
    /* The same body again (a second node): the process's map. */
    assert_non_null(tg_nvrtc_image(src, "compute_90", &size, &why));
    tg_nvrtc_stats s2 = tg_nvrtc_stats_get();
    assert_int_equal(s2.compiles, s1.compiles);
    assert_int_equal(s2.memory_hits - s1.memory_hits, 1);
    /* Another process (the map forgotten): the disk. */
    tg_nvrtc_forget();
    const void *img = tg_nvrtc_image(src, "compute_90", &size, &why);
    assert_non_null(img);
    tg_nvrtc_stats s3 = tg_nvrtc_stats_get();
    assert_int_equal(s3.compiles, s1.compiles);
    assert_int_equal(s3.disk_hits - s2.disk_hits, 1);
    char *good = malloc(size);
    memcpy(good, img, size);
    size_t good_size = size;
    /* Another target is another entry. */
    assert_non_null(tg_nvrtc_image(src, "sm_90", &size, &why));
    assert_int_equal(count_files(".cubin"), 1);
    /* Damage the code file three ways: a flipped byte, a cut, garbage. */
    char path[600];
    DIR *d = opendir(cache_dir);
    for (struct dirent *de; (de = readdir(d));)
        if (strstr(de->d_name, ".ptx")) snprintf(path, sizeof path, "%s/%s", cache_dir, de->d_name);
    closedir(d);
    for (int how = 0; how < 3; how++) {
        FILE *f = fopen(path, "r+b");
        assert_non_null(f);
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        if (how == 0) {
            fseek(f, len / 2, SEEK_SET);
            int ch = fgetc(f);
            fseek(f, len / 2, SEEK_SET);
            fputc(ch ^ 0x20, f);
        } else if (how == 1) {
            assert_int_equal(ftruncate(fileno(f), len - 7), 0);
        } else {
            rewind(f);
            fputs("garbage", f);
        }
        fclose(f);
        tg_nvrtc_forget();
        tg_nvrtc_stats a = tg_nvrtc_stats_get();
        img = tg_nvrtc_image(src, "compute_90", &size, &why);
        assert_non_null(img);
        tg_nvrtc_stats b = tg_nvrtc_stats_get();
        assert_int_equal(b.corrupt - a.corrupt, 1);
        assert_int_equal(b.compiles - a.compiles, 1);
        assert_int_equal(size, good_size);
        assert_memory_equal(img, good, size);
        /* The file was written again: whole, a disk hit next time. */
        tg_nvrtc_forget();
        assert_non_null(tg_nvrtc_image(src, "compute_90", &size, &why));
        tg_nvrtc_stats c = tg_nvrtc_stats_get();
        assert_int_equal(c.disk_hits - b.disk_hits, 1);
        assert_int_equal(c.corrupt, b.corrupt);
    }
    free(good);
    tg_free(src);
    drop_cache();
}

/* Two processes compile the same new body at once: both get it, it is
 * compiled once (the folder's lock), and one whole file is left. */
static void test_cache_two_processes(void **state) {
    (void)state;
    if (!nvrtc_here()) skip();
    fresh_cache("fork");
    char *src = case_source(&CASES[0], V_FLAT);
    int go[2], res[2];
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(res), 0);
    pid_t pid[2];
    for (int k = 0; k < 2; k++) {
        pid[k] = fork();
        assert_true(pid[k] >= 0);
        if (pid[k] == 0) {
            char b;
            close(go[1]);
            if (read(go[0], &b, 1) != 1) _exit(3);
            size_t size = 0;
            const char *why = NULL;
            const void *img = tg_nvrtc_image(src, "compute_90", &size, &why);
            long c = tg_nvrtc_stats_get().compiles;
            if (write(res[1], &c, sizeof c) != sizeof c) _exit(4);
            _exit(img && size > 100 ? 0 : 2);
        }
    }
    close(go[0]);
    /* Both start together. */
    assert_int_equal(write(go[1], "gg", 2), 2);
    close(go[1]);
    long total = 0;
    for (int k = 0; k < 2; k++) {
        int st = 0;
        assert_int_equal(waitpid(pid[k], &st, 0), pid[k]);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
        long c = 0;
        assert_int_equal(read(res[0], &c, sizeof c), sizeof c);
        total += c;
    }
    close(res[0]);
    close(res[1]);
    assert_int_equal(total, 1);
    assert_int_equal(count_files(".ptx"), 1);
    assert_int_equal(count_files(".cu"), 1);
    /* No temporaries left behind. */
    DIR *d = opendir(cache_dir);
    for (struct dirent *de; (de = readdir(d));)
        if (strstr(de->d_name, ".tmp.")) fail_msg("left behind: %s", de->d_name);
    closedir(d);
    tg_free(src);
    drop_cache();
}

/* `tgc cache list|clear` (tg_kcache_list, tg_kcache_clear) see GPU entries
 * beside CPU ones, told apart by their kind. */
static void test_cache_list_clear_both_kinds(void **state) {
    (void)state;
    if (!nvrtc_here()) skip();
    fresh_cache("list");
    char *src = case_source(&CASES[0], V_BCAST);
    size_t size;
    const char *why;
    assert_non_null(tg_nvrtc_image(src, "compute_90", &size, &why));
    assert_non_null(tg_nvrtc_image(src, "sm_90", &size, &why));
    /* A CPU kernel in the same folder (when a C compiler is here). */
    const bcase *c = &CASES[4];
    char *json = case_json(c, V_BCAST, false);
    tg_graph *g = tu_load(json);
    tg_composite_force_interp(false);
    tg_function *f = cpu_function(g);
    tg_array *in[4] = {0}, *out[32] = {0};
    case_inputs(c, V_BCAST, in);
    tg_ctx *ctx = tg_ctx_new();
    assert_int_equal(tg_function_call(f, in, out, ctx), TG_OK);
    tg_kcache_entry *e = NULL;
    int n = 0;
    assert_int_equal(tg_kcache_list(cache_dir, &e, &n, ctx), TG_OK);
    int cpu = 0, ptx = 0, cubin = 0;
    for (int i = 0; i < n; i++) {
        cpu += !strcmp(e[i].kind, "cpu");
        ptx += !strcmp(e[i].kind, "cuda compute_90");
        cubin += !strcmp(e[i].kind, "cuda sm_90");
        if (strncmp(e[i].kind, "cpu", 3)) {
            assert_non_null(strstr(e[i].first_line, "tg composite (cuda): 1 in, 29 out"));
            assert_true(e[i].bytes > (int64_t)strlen(src));
        }
    }
    assert_int_equal(ptx, 1);
    assert_int_equal(cubin, 1);
    assert_true(cpu <= 1);
    tg_free(e);
    int removed = 0;
    assert_int_equal(tg_kcache_clear(cache_dir, &removed, ctx), TG_OK);
    assert_int_equal(removed, 2 + cpu);
    assert_int_equal(count_files(".cu") + count_files(".ptx") + count_files(".cubin"), 0);
    for (int i = 0; i < c->nin; i++) tg_array_free(in[i]);
    for (int i = 0; i < 32; i++) tg_array_free(out[i]);
    tg_ctx_free(ctx);
    tg_function_free(f);
    tg_graph_free(g);
    free(json);
    tg_free(src);
    drop_cache();
}

/* No NVRTC: no image, a reason, and NVRTC comes back when it is found. */
static void test_missing_nvrtc(void **state) {
    (void)state;
    if (!nvrtc_here()) skip();
    fresh_cache("missing");
    char *src = case_source(&CASES[6], V_BCAST);
    setenv("TG_NVRTC", "/nonexistent/libnvrtc.so", 1);
    const char *why = NULL;
    size_t size = 0;
    assert_false(tg_nvrtc_available(&why));
    assert_non_null(strstr(why, "NVRTC not found"));
    assert_null(tg_nvrtc_image(src, "compute_90", &size, &why));
    assert_non_null(strstr(why, "NVRTC not found"));
    int ma = -1, mi = -1;
    tg_nvrtc_version(&ma, &mi);
    assert_int_equal(ma, 0);
    unsetenv("TG_NVRTC");
    assert_true(tg_nvrtc_available(NULL));
    tg_nvrtc_version(&ma, &mi);
    assert_true(ma >= 12);
    assert_non_null(tg_nvrtc_image(src, "compute_90", &size, &why));
    tg_free(src);
    drop_cache();
}

/* ---- (b) the values, on the host ---- */

static const char SHIM_HEAD[] =
    "#define TG_HOST_SHIM 1\n"
    "#include <stdint.h>\n#include <math.h>\n"
    "struct tg_dim3 { unsigned x, y, z; };\n"
    "static tg_dim3 threadIdx, blockIdx, blockDim, gridDim;\n"
    "#define __device__\n#define __global__\n#define __forceinline__ inline\n#define __launch_bounds__(n)\n"
    /* __half on the host: GCC's and Clang's _Float16 converts to nearest
     * even, from float and from double in one rounding, as cast.c. */
    "struct tg_half { _Float16 h; };\n"
    "static inline float tg_h2f(tg_half x) { return (float)x.h; }\n"
    "static inline tg_half tg_f2h(float f) { tg_half r; r.h = (_Float16)f; return r; }\n"
    "static inline tg_half tg_d2h(double d) { tg_half r; r.h = (_Float16)d; return r; }\n";
static const char SHIM_TAIL[] =
    "extern \"C\" void tg_shim_launch(const void *args, unsigned grid, unsigned block) {\n"
    "    gridDim.x = grid;\n    blockDim.x = block;\n"
    "    for (unsigned b = 0; b < grid; b++)\n"
    "        for (unsigned t = 0; t < block; t++) {\n"
    "            blockIdx.x = b;\n            threadIdx.x = t;\n"
    "            tg_composite_kernel(*(const tg_args *)args);\n        }\n}\n";

typedef void (*shim_fn)(const void *args, unsigned grid, unsigned block);

/* The kernel of src built for the host; NULL (and a skip by the caller)
 * when there is no C++ compiler. */
static shim_fn shim_build(const char *src, void **handle, bool *no_cxx) {
    const char *cxx = getenv("TG_CXX");
    if (!cxx || !*cxx) cxx = "c++";
    char dir[300], cpp[400], so[400], cmd[1400];
    snprintf(dir, sizeof dir, "%s/tg-nvrtc-shim-%ld", P_tmpdir, (long)getpid());
    mkdir(dir, 0777);
    snprintf(cpp, sizeof cpp, "%s/k.cpp", dir);
    snprintf(so, sizeof so, "%s/k%u.so", dir, (unsigned)(urand() * 1e9));
    snprintf(cmd, sizeof cmd, "%s --version >/dev/null 2>&1", cxx);
    if (system(cmd) != 0) {
        *no_cxx = true;
        return NULL;
    }
    FILE *f = fopen(cpp, "w");
    assert_non_null(f);
    fputs(SHIM_HEAD, f);
    fputs(src, f);
    fputs(SHIM_TAIL, f);
    fclose(f);
    /* As the CPU kernels are built: no contraction, no errno. */
    snprintf(cmd, sizeof cmd, "%s -std=c++17 -O1 -ffp-contract=off -fno-math-errno -shared -fPIC -o %s %s", cxx,
             so, cpp);
    if (system(cmd) != 0) fail_msg("the shim did not compile: %s", cmd);
    *handle = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!*handle) fail_msg("dlopen: %s", dlerror());
    unlink(so);
    unlink(cpp);
    rmdir(dir);
    shim_fn fn;
    *(void **)&fn = dlsym(*handle, "tg_shim_launch");
    assert_non_null(fn);
    return fn;
}

static void test_values_on_the_host(void **state) {
    (void)state;
    tg_composite_force_interp(true);
    tg_ctx *ctx = tg_ctx_new();
    int checked = 0;
    for (int k = 0; k < NCASES; k++) {
        const bcase *c = &CASES[k];
        for (int v = 0; v < NVARIANTS; v++) {
            if (!variant_applies(c, v)) continue;
            char *json = case_json(c, v, false);
            tg_graph *g = tu_load(json);
            tg_node *node = comp_node(g);
            char *src = tg_nvrtc_source(node, NULL);
            assert_non_null(src);
            void *h = NULL;
            bool no_cxx = false;
            shim_fn run = shim_build(src, &h, &no_cxx);
            if (no_cxx) {
                tg_free(src);
                tg_graph_free(g);
                free(json);
                tg_ctx_free(ctx);
                tg_composite_force_interp(false);
                skip();
            }
            tg_array *in[4] = {0}, *want[32] = {0}, *got[32] = {0}, *kin[4] = {0};
            case_inputs(c, v, in);
            tg_function *f = cpu_function(g);
            if (tg_function_call(f, in, want, ctx)) fail_msg("%s: %s", c->name, tg_ctx_message(ctx));
            /* The kernel's operands: input 0 transposed as the graph does. */
            for (int i = 0; i < c->nin; i++)
                kin[i] = v == V_TRANSPOSE && i == 0 ? tg_array_view_transpose(in[0], NULL, NULL) : tg_array_ref(in[i]);
            assert_non_null(kin[0]);
            int64_t shape[8];
            int nd = case_shape(c, shape);
            const tg_fgraph *body = tg_composite_node_body(node);
            int nout = count_outs(c->outs);
            assert_int_equal(nout, body->nout);
            void *optr[32];
            uint64_t scalars = 0;
            for (int i = 0; i < c->nin; i++)
                if (c->in[i].ndim == 0) scalars |= 1u << i;
            for (int j = 0; j < nout; j++) {
                got[j] = tg_array_new(body->outputs[j]->type.dtype, nd, shape);
                optr[j] = tg_array_data(got[j]);
            }
            unsigned char args[TG_NV_ARGS_MAX] __attribute__((aligned(16)));
            size_t asz = tg_nvrtc_args_pack(nout, c->nin, optr, (const tg_array *const *)kin, scalars, nd, shape, args);
            assert_int_equal(asz, 80 + 8 * (nout + c->nin) + 64 * c->nin);
            /* The flat path exactly when every operand that is not 0-d
             * is contiguous with the broadcast shape: contiguous inputs,
             * never a transposed one, broadcast ones when none is
             * smaller than the result. */
            int32_t flat;
            memcpy(&flat, args + 12, 4);
            bool want_flat = v == V_FLAT;
            if (v == V_BCAST) {
                int64_t sh[8];
                want_flat = true;
                for (int i = 0; i < c->nin; i++)
                    if (c->in[i].ndim)
                        want_flat &= var_shape(c, V_FLAT, i, sh) == c->in[i].ndim &&
                                     !memcmp(sh, c->in[i].shape, 8 * (size_t)c->in[i].ndim);
            }
            assert_int_equal(flat, want_flat);
            /* A grid smaller than the work: the grid-stride loop. */
            run(args, 3, 5);
            for (int j = 0; j < nout; j++) {
                char msg[4096];
                tg_dtype dt = got[j]->dtype;
                if (!tu_arrays_close(got[j], want[j], tol_r(dt), tol_a(dt), msg, sizeof msg))
                    fail_msg("%s (%s), output %d '%s' (%s): generated kernel vs CPU\n%s", c->name, VNAME[v], j,
                             body->outputs[j]->id, tg_dtype_name(dt), msg);
            }
            checked++;
            dlclose(h);
            for (int i = 0; i < c->nin; i++) {
                tg_array_free(in[i]);
                tg_array_free(kin[i]);
            }
            for (int j = 0; j < 32; j++) {
                tg_array_free(want[j]);
                tg_array_free(got[j]);
            }
            tg_function_free(f);
            tg_free(src);
            tg_graph_free(g);
            free(json);
        }
    }
    print_message("%d case layouts checked\n", checked);
    tg_ctx_free(ctx);
    tg_composite_force_interp(false);
}

/* softplus of a NaN in the generated kernel has its sign bit clear, as
 * the CPU's (docs/format-choices.md): the prelude's max(x, 0) +
 * log1p(exp(-|x|)) gave it the sign of -|x|. Six NaNs, quiet and
 * signalling, both signs, with payloads, float64 and float32: on the
 * host shim (glibc's scalar exp and log1p keep the payload) the bits of
 * the CPU's unfused op (the composite's interpreter); the ordinary
 * values beside them within 4 ulp; and NVRTC compiles the source. */
static void test_softplus_nan_on_the_host(void **state) {
    (void)state;
    static const uint64_t nan64[] = {0x7ff8000000000000ull, 0xfff8000000000000ull, 0x7ff8000000000123ull,
                                     0xfff8000000000456ull, 0x7ff0000000000789ull, 0xfff0000000000abcull};
    static const uint32_t nan32[] = {0x7fc00000u, 0xffc00000u, 0x7fc00123u, 0xffc00456u, 0x7f800789u, 0xff800abcu};
    static const double ord[] = {1.5, -2, 0, -INFINITY, INFINITY, 30, -30};
    enum { N = 13 };
    fresh_cache("softplus");
    tg_composite_force_interp(true); /* (the CPU: the unfused ops' loops) */
    tg_ctx *ctx = tg_ctx_new();
    for (int d = 0; d < 2; d++) {
        const char *dt = d ? "float32" : "float64";
        const size_t isz = d ? 4 : 8;
        char *json = NULL;
        assert_true(asprintf(&json,
                             "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                             "{\"id\":\"a\",\"type\":{\"dtype\":\"%s\",\"shape\":[%d]}}],"
                             "\"nodes\":[{\"op\":\"composite\",\"inputs\":[\"a\"],\"outputs\":[\"y\"],"
                             "\"attrs\":{\"body\":{\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"%s\","
                             "\"shape\":[]}}],\"nodes\":[{\"op\":\"softplus\",\"inputs\":[\"x\"],\"outputs\":[\"s\"]}],"
                             "\"inputs\":[\"x\"],\"outputs\":[\"s\"]}}}]}",
                             dt, N, dt) > 0);
        tg_graph *g = tu_load(json);
        char *src = tg_nvrtc_source(comp_node(g), NULL);
        assert_non_null(src);
        if (nvrtc_here()) {
            size_t size = 0;
            const char *why = NULL;
            if (!tg_nvrtc_image(src, "compute_90", &size, &why)) fail_msg("%s: %s", dt, why ? why : "?");
        }
        void *h = NULL;
        bool no_cxx = false;
        shim_fn run = shim_build(src, &h, &no_cxx);
        if (no_cxx) {
            tg_free(src);
            tg_graph_free(g);
            free(json);
            tg_ctx_free(ctx);
            drop_cache();
            tg_composite_force_interp(false);
            skip();
        }
        int64_t n = N;
        tg_array *x = tg_array_new(d ? TG_FLOAT32 : TG_FLOAT64, 1, &n);
        for (int i = 0; i < N; i++) {
            char *e = (char *)tg_array_data(x) + (size_t)i * isz;
            if (i < 6 && d) memcpy(e, &nan32[i], 4);
            else if (i < 6) memcpy(e, &nan64[i], 8);
            else tg_store_f64(tg_array_dtype(x), e, ord[i - 6]);
        }
        tg_array *want[1] = {0};
        /* The CPU's unfused softplus (-O none takes the composite apart). */
        tg_function *f = cpu_function(g);
        if (tg_function_call(f, &x, want, ctx)) fail_msg("%s", tg_ctx_message(ctx));
        tg_array *got = tg_array_new(tg_array_dtype(x), 1, &n);
        void *optr[1] = {tg_array_data(got)};
        const tg_array *kin[1] = {x};
        unsigned char args[TG_NV_ARGS_MAX] __attribute__((aligned(16)));
        tg_nvrtc_args_pack(1, 1, optr, kin, 0, 1, &n, args);
        run(args, 1, 5);
        for (int i = 0; i < N; i++) {
            uint64_t u = 0, k = 0;
            memcpy(&u, (const char *)tg_array_data(want[0]) + (size_t)i * isz, isz);
            memcpy(&k, (const char *)tg_array_data(got) + (size_t)i * isz, isz);
            if (i < 6 ? k != u : !(k == u || fabs(tg_array_get_flat(got, i) - tg_array_get_flat(want[0], i)) <=
                                                     4 * (d ? 0x1p-23 : 0x1p-52) * fabs(tg_array_get_flat(want[0], i))))
                fail_msg("%s softplus at %d: kernel 0x%llx, CPU 0x%llx", dt, i, (unsigned long long)k,
                         (unsigned long long)u);
            if (i < 6 && k >> (isz * 8 - 1)) fail_msg("%s softplus(NaN) at %d: 0x%llx has its sign bit set", dt, i,
                                                      (unsigned long long)k);
        }
        dlclose(h);
        tg_array_free(got);
        tg_array_free(want[0]);
        tg_array_free(x);
        tg_function_free(f);
        tg_free(src);
        tg_graph_free(g);
        free(json);
    }
    tg_ctx_free(ctx);
    tg_composite_force_interp(false);
    drop_cache();
}

/* ---- (c) on the GPU ---- */

static bool have_gpu(void) { return tg_cuda_available(); }

static int count_op(const tg_function *f, const char *op) {
    int c = 0;
    for (int i = 0; i < tg_function_node_count(f); i++) c += strcmp(tg_function_node_op(f, i), op) == 0;
    return c;
}

/* Case c, variant v, on both devices; inplace asks the node to overwrite
 * input 0 (honoured when its dtype and shape are output 0's). */
static void gpu_case(const bcase *c, int v, bool inplace) {
    char *json = case_json(c, v, inplace);
    tg_graph *g = tu_load(json);
    tg_ctx *ctx = tg_ctx_new();
    tg_function *fc = cpu_function(g);
    tg_compile_options o = {.preset = "none", .device = "cuda"};
    tg_function *fg = tg_function_compile(g, 0, &o, ctx);
    if (!fg) fail_msg("%s: %s", c->name, tg_ctx_message(ctx));
    const int nout = count_outs(c->outs);
    /* On the device: an upload per input, a download per output. */
    if (count_op(fg, "transfer") != c->nin + nout)
        fail_msg("%s (%s): %d transfers, expected %d (the composite did not go to the GPU)", c->name, VNAME[v],
                 count_op(fg, "transfer"), c->nin + nout);
    tg_array *in[4] = {0}, *want[32] = {0}, *got[32] = {0}, *again[32] = {0};
    case_inputs(c, v, in);
    long l0 = tg_nvrtc_stats_get().launches;
    if (tg_function_call(fc, in, want, ctx) || tg_function_call(fg, in, got, ctx) ||
        tg_function_call(fg, in, again, ctx))
        fail_msg("%s: %s", c->name, tg_ctx_message(ctx));
    assert_int_equal(tg_nvrtc_stats_get().launches - l0, 2);
    for (int j = 0; j < nout; j++) {
        char msg[4096];
        tg_dtype dt = got[j]->dtype;
        if (!tu_arrays_close(got[j], want[j], tol_r(dt), tol_a(dt), msg, sizeof msg))
            fail_msg("%s (%s%s), output %d (%s): GPU vs CPU\n%s", c->name, VNAME[v], inplace ? ", in place" : "", j,
                     tg_dtype_name(dt), msg);
        /* A second call on pooled buffers: the same bits. */
        if (!tg_array_equal(got[j], again[j])) fail_msg("%s: the second call differs", c->name);
    }
    for (int i = 0; i < c->nin; i++) tg_array_free(in[i]);
    for (int j = 0; j < 32; j++) {
        tg_array_free(want[j]);
        tg_array_free(got[j]);
        tg_array_free(again[j]);
    }
    tg_function_free(fc);
    tg_function_free(fg);
    tg_graph_free(g);
    tg_ctx_free(ctx);
    free(json);
}

static void test_gpu_every_body(void **state) {
    (void)state;
    if (!have_gpu()) skip();
    tg_composite_force_interp(true);
    fresh_cache("gpu");
    for (int k = 0; k < NCASES; k++)
        for (int v = 0; v < NVARIANTS; v++)
            if (variant_applies(&CASES[k], v)) gpu_case(&CASES[k], v, false);
    /* In place: input 0 overwritten by output 0 where they agree. */
    gpu_case(&CASES[6], V_FLAT, true);
    gpu_case(&CASES[19], V_FLAT, true);
    tg_composite_force_interp(false);
    drop_cache();
}

/* Large enough for many blocks and more elements than the grid's
 * threads, broadcast: the strided path's 32-bit indexing. */
static void test_gpu_large(void **state) {
    (void)state;
    if (!have_gpu()) skip();
    bcase c = {"large",
               2,
               {{"x", "float32", 2, {4099, 1031}, R_ANY}, {"b", "float32", 1, {1031}, R_ANY}},
               "[" BIN("add", "x", "b", "t") "," UN("tanh", "t", "y") "," UN("sigmoid", "t", "s") "]",
               "[\"y\",\"s\"]",
               false};
    gpu_case(&c, V_BCAST, false);
    gpu_case(&c, V_FLAT, false);
}

/* With NVRTC missing a composite stays on the CPU, with transfers around
 * it when its neighbours are on the GPU, and gives the same values. */
static void test_gpu_without_nvrtc(void **state) {
    (void)state;
    if (!have_gpu()) skip();
    setenv("TG_NVRTC", "/nonexistent/libnvrtc.so", 1);
    char *json = case_json(&CASES[6], V_FLAT, false);
    tg_graph *g = tu_load(json);
    tg_ctx *ctx = tg_ctx_new();
    tg_compile_options o = {.preset = "none", .device = "cuda"};
    tg_function *f = tg_function_compile(g, 0, &o, ctx);
    assert_non_null(f);
    assert_int_equal(count_op(f, "transfer"), 0); /* all on the CPU */
    tg_function *fc = cpu_function(g);
    tg_array *in[4] = {0}, *want[4] = {0}, *got[4] = {0};
    case_inputs(&CASES[6], V_FLAT, in);
    assert_int_equal(tg_function_call(fc, in, want, ctx), TG_OK);
    assert_int_equal(tg_function_call(f, in, got, ctx), TG_OK);
    for (int j = 0; j < 2; j++) tu_assert_close(got[j], want[j], 0, 0);
    unsetenv("TG_NVRTC");
    for (int i = 0; i < 4; i++) {
        tg_array_free(in[i]);
        tg_array_free(want[i]);
        tg_array_free(got[i]);
    }
    tg_function_free(f);
    tg_function_free(fc);
    tg_graph_free(g);
    tg_ctx_free(ctx);
    free(json);
}

/* The MLP of examples/mlp.json trained three steps on each device with
 * the default optimizer, fusion included: its composites (the hidden
 * layer's bias and tanh, the gradient's chain, the updates) run on the
 * GPU. Costs and weights agree. Without a GPU this still checks that
 * device cuda no longer leaves fusion out. */
static void test_mlp_fused_on_the_device(void **state) {
    (void)state;
    int64_t xs[2] = {60, 784}, ys[2] = {60, 10};
    rng = 42;
    opd xo = {"x", "float32", 2, {60, 784}, R_POS};
    tg_array *x = rand_input(&xo, 2, xs, false), *y = tg_array_new(TG_FLOAT32, 2, ys);
    for (int r = 0; r < 60; r++) ((float *)tg_array_data(y))[r * 10 + r % 10] = 1;
    tg_array *in[2] = {x, y};
    long l0 = tg_nvrtc_stats_get().launches;
    static const char *const w[] = {"W1", "b1", "W2", "b2", NULL};
    tu_pair p;
    tu_train_pair(&p, TG_SOURCE_DIR "/examples/mlp.json", "train", "cuda", in, 3, w, 1e-4, 1e-5);
    assert_true(count_op(p.f[1], "composite") > 0);
    assert_int_equal(count_op(p.f[1], "composite"), count_op(p.f[0], "composite"));
    if (have_gpu()) {
        long launches = tg_nvrtc_stats_get().launches - l0;
        print_message("MLP: %d composites, %ld GPU composite launches in 3 steps\n", count_op(p.f[1], "composite"),
                      launches);
        /* Every composite on the GPU, each call. */
        assert_int_equal(launches, 3 * count_op(p.f[1], "composite"));
    }
    tu_pair_free(&p);
    tg_array_free(x);
    tg_array_free(y);
}

int main(void) {
    /* The concurrent-compile test first: its children open NVRTC
     * themselves, in processes that have not used it. */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_two_processes),
        cmocka_unit_test(test_cases_cover_the_generator),
        cmocka_unit_test(test_unsupported_bodies),
        cmocka_unit_test(test_every_body_compiles),
        cmocka_unit_test(test_cache_miss_hit_corrupt),
        cmocka_unit_test(test_cache_list_clear_both_kinds),
        cmocka_unit_test(test_missing_nvrtc),
        cmocka_unit_test(test_values_on_the_host),
        cmocka_unit_test(test_softplus_nan_on_the_host),
        cmocka_unit_test(test_gpu_every_body),
        cmocka_unit_test(test_gpu_large),
        cmocka_unit_test(test_gpu_without_nvrtc),
        cmocka_unit_test(test_mlp_fused_on_the_device),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    free(saved_cache_dir);
    return rc;
}

#else /* a build without the CUDA backend */

static void test_no_cuda_build(void **state) {
    (void)state;
    skip();
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_no_cuda_build)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif

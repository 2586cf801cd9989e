/* Graph shapes whose optimization must grow linearly with their size:
 * generators of interchange JSON, shared by bench_shapes (the times) and
 * tests/unit/test_scaling.c (the counted work, which does not depend on
 * the machine).
 *
 * Theano's optimizer grew super-linearly on some graphs; tg's did too on
 * shapes its generated benchmark graph (bench_opt) does not have, found
 * one at a time (docs/optimizer.md: a switch moved past every product of
 * a stack, a dimshuffle lifted through every op below it, origins copied
 * at each step of a folded chain, ...). Each generator here makes one
 * such shape, `steps` repetitions of a motif, so that the work of
 * 4 x steps can be held against that of steps. Every graph has one
 * function, "f". */
#ifndef TG_BENCH_SHAPES_H
#define TG_BENCH_SHAPES_H

#include <stdarg.h>
#include <stdio.h>

#include "core/core.h"

typedef void (*shape_gen)(tg_str *s, int steps);

/* The header with `nvars` variables given as (id, shape text) pairs. */
static void shape_begin(tg_str *s, int nvars, const char *const *vars) {
    tg_str_addf(s, "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[");
    for (int i = 0; i < nvars; i++)
        tg_str_addf(s, "%s{\"id\":\"%s\",\"type\":{\"dtype\":\"float64\",\"shape\":%s}}",
                    i ? "," : "", vars[2 * i], vars[2 * i + 1]);
    tg_str_addf(s, "],\"nodes\":[");
}

/* One node: op, inputs as JSON text, one output, attrs as JSON text or
 * NULL; `first` leaves out the comma. */
static void shape_node(tg_str *s, bool first, const char *op, const char *ins, const char *out,
                       const char *attrs) {
    tg_str_addf(s, "%s{\"op\":\"%s\",\"inputs\":[%s],\"outputs\":[\"%s\"]%s%s}", first ? "" : ",",
                op, ins, out, attrs ? ",\"attrs\":" : "", attrs ? attrs : "");
}

static void shape_end(tg_str *s, const char *inputs, const char *outputs) {
    tg_str_addf(s, "],\"functions\":{\"f\":{\"inputs\":[%s],\"outputs\":[%s]}}}", inputs, outputs);
}

/* buf, written with fmt: an id or an input list, in a node's call. */
__attribute__((format(printf, 3, 4))) static const char *shape_fmt(char *buf, size_t size,
                                                                   const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    return buf;
}
#define SHAPE_ID(buf, ...) shape_fmt(buf, sizeof buf, __VA_ARGS__)

/* x_k = x_{k-1} * x_{k-2} (or +, alternating): every value read twice, so
 * a fusion that recomputed cheap producers instead of reading them back
 * could grow without bound. */
static void shape_lattice(tg_str *s, int steps) {
    static const char *const v[] = {"a", "[8]", "b", "[8]"};
    shape_begin(s, 2, v);
    shape_node(s, true, "add", "\"a\",\"b\"", "x0", NULL);
    shape_node(s, false, "mul", "\"a\",\"x0\"", "x1", NULL);
    char in[64], out[32];
    for (int k = 2; k < steps; k++) {
        shape_node(s, false, k % 2 ? "mul" : "add", SHAPE_ID(in, "\"x%d\",\"x%d\"", k - 1, k - 2),
                   SHAPE_ID(out, "x%d", k), NULL);
    }
    SHAPE_ID(out, "\"x%d\"", steps - 1);
    shape_end(s, "\"a\",\"b\"", out);
}

/* One value read by `steps` products, each an output. */
static void shape_fanout(tg_str *s, int steps) {
    static const char *const v[] = {"a", "[8]"};
    shape_begin(s, 1, v);
    shape_node(s, true, "exp", "\"a\"", "e", NULL);
    char in[64], out[32];
    for (int k = 0; k < steps; k++) {
        shape_node(s, false, "mul", SHAPE_ID(in, "\"e\",{\"value\":%d.5}", k + 1),
                   SHAPE_ID(out, "m%d", k), NULL);
    }
    tg_str o = {0};
    for (int k = 0; k < steps; k++) tg_str_addf(&o, "%s\"m%d\"", k ? "," : "", k);
    shape_end(s, "\"a\"", o.s ? o.s : "");
    tg_str_free(&o);
}

/* One add of `steps` inputs, each a tanh of a function input. */
static void shape_fanin(tg_str *s, int steps) {
    tg_str_addf(s, "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[");
    for (int k = 0; k < steps; k++)
        tg_str_addf(s, "%s{\"id\":\"a%d\",\"type\":{\"dtype\":\"float64\",\"shape\":[8]}}",
                    k ? "," : "", k);
    tg_str_addf(s, "],\"nodes\":[");
    for (int k = 0; k < steps; k++)
        tg_str_addf(s, "{\"op\":\"tanh\",\"inputs\":[\"a%d\"],\"outputs\":[\"t%d\"]},", k, k);
    tg_str_addf(s, "{\"op\":\"add\",\"inputs\":[");
    for (int k = 0; k < steps; k++) tg_str_addf(s, "%s\"t%d\"", k ? "," : "", k);
    tg_str_addf(s, "],\"outputs\":[\"s\"]}],\"functions\":{\"f\":{\"inputs\":[");
    for (int k = 0; k < steps; k++) tg_str_addf(s, "%s\"a%d\"", k ? "," : "", k);
    tg_str_addf(s, "],\"outputs\":[\"s\"]}}}");
}

/* ((a * 1 + 2) * 3 + 4) ...: constant collection and folding a step at a
 * time. */
static void shape_const_chain(tg_str *s, int steps) {
    static const char *const v[] = {"a", "[8]"};
    shape_begin(s, 1, v);
    char in[64], out[32], prev[32] = "a";
    for (int k = 0; k < steps; k++) {
        shape_node(s, k == 0, k % 2 ? "add" : "mul",
                   SHAPE_ID(in, "\"%s\",{\"value\":%d}", prev, k % 7 + 1), SHAPE_ID(out, "c%d", k),
                   NULL);
        SHAPE_ID(prev, "%s", out);
    }
    SHAPE_ID(out, "\"%s\"", prev);
    shape_end(s, "\"a\"", out);
}

/* (x * b) / b, again and again: mul_div_cancel. */
static void shape_muldiv(tg_str *s, int steps) {
    static const char *const v[] = {"a", "[8]", "b", "[8]"};
    shape_begin(s, 2, v);
    char in[64], out[32], prev[32] = "a";
    for (int k = 0; k < steps; k++) {
        shape_node(s, k == 0, "mul", SHAPE_ID(in, "\"%s\",\"b\"", prev), SHAPE_ID(out, "m%d", k),
                   NULL);
        shape_node(s, false, "true_div", SHAPE_ID(in, "\"m%d\",\"b\"", k), SHAPE_ID(out, "d%d", k),
                   NULL);
        SHAPE_ID(prev, "%s", out);
    }
    SHAPE_ID(out, "\"%s\"", prev);
    shape_end(s, "\"a\",\"b\"", out);
}

/* A dimshuffle adding an axis, one dropping it, and an add of a vector:
 * dimshuffle_lift and dimshuffle_merge. */
static void shape_dimshuffles(tg_str *s, int steps) {
    static const char *const v[] = {"a", "[4,5]", "b", "[5]"};
    shape_begin(s, 2, v);
    char in[64], out[32], prev[32] = "a";
    for (int k = 0; k < steps; k++) {
        shape_node(s, k == 0, "dimshuffle", SHAPE_ID(in, "\"%s\"", prev), SHAPE_ID(out, "d%d", k),
                   "{\"order\":[\"x\",1,0]}");
        shape_node(s, false, "dimshuffle", SHAPE_ID(in, "\"d%d\"", k), SHAPE_ID(out, "e%d", k),
                   "{\"order\":[2,1]}");
        shape_node(s, false, "add", SHAPE_ID(in, "\"e%d\",\"b\"", k), SHAPE_ID(out, "s%d", k),
                   NULL);
        SHAPE_ID(prev, "%s", out);
    }
    SHAPE_ID(out, "\"%s\"", prev);
    shape_end(s, "\"a\",\"b\"", out);
}

/* exp(log(x)), neg(neg(x)) and x - x + x, chained. */
static void shape_cancel(tg_str *s, int steps) {
    static const char *const v[] = {"a", "[8]"};
    shape_begin(s, 1, v);
    char in[64], out[32], prev[32] = "a";
    for (int k = 0; k < steps; k++) {
        static const char *const ops[] = {"log", "exp", "neg", "neg"};
        for (int j = 0; j < 4; j++) {
            shape_node(s, k == 0 && j == 0, ops[j], SHAPE_ID(in, "\"%s\"", prev),
                       SHAPE_ID(out, "o%d_%d", k, j), NULL);
            SHAPE_ID(prev, "%s", out);
        }
        shape_node(s, false, "sub", SHAPE_ID(in, "\"%s\",\"%s\"", prev, prev),
                   SHAPE_ID(out, "z%d", k), NULL);
        shape_node(s, false, "add", SHAPE_ID(in, "\"z%d\",\"%s\"", k, prev),
                   SHAPE_ID(out, "p%d", k), NULL);
        SHAPE_ID(prev, "%s", out);
    }
    SHAPE_ID(out, "\"%s\"", prev);
    shape_end(s, "\"a\"", out);
}

/* inc_subtensor on one vector, again and again, every step an output: the
 * in-place pass may overwrite none of the values an output needs. */
static void shape_increments(tg_str *s, int steps) {
    static const char *const v[] = {"a", "[8]", "b", "[]"};
    shape_begin(s, 2, v);
    char in[64], out[32], attrs[48], prev[32] = "a";
    for (int k = 0; k < steps; k++) {
        SHAPE_ID(in, "\"%s\",\"b\"", prev);
        SHAPE_ID(out, "s%d", k);
        SHAPE_ID(attrs, "{\"index\":[%d]}", k % 8);
        shape_node(s, k == 0, k % 3 ? "inc_subtensor" : "set_subtensor", in, out, attrs);
        SHAPE_ID(prev, "%s", out);
    }
    tg_str o = {0};
    for (int k = 0; k < steps; k++) tg_str_addf(&o, "%s\"s%d\"", k ? "," : "", k);
    shape_end(s, "\"a\",\"b\"", o.s ? o.s : "");
    tg_str_free(&o);
}

/* Two equal chains of sin and cos from one input, added: merge. */
static void shape_twins(tg_str *s, int steps) {
    static const char *const v[] = {"a", "[8]"};
    shape_begin(s, 1, v);
    char in[64], out[32];
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < steps; k++) {
            if (k)
                SHAPE_ID(in, "\"r%d_%d\"", r, k - 1);
            else
                SHAPE_ID(in, "\"a\"");
            shape_node(s, r == 0 && k == 0, k % 2 ? "sin" : "cos", in,
                       SHAPE_ID(out, "r%d_%d", r, k), NULL);
        }
    SHAPE_ID(in, "\"r0_%d\",\"r1_%d\"", steps - 1, steps - 1);
    shape_node(s, false, "add", in, "s", NULL);
    shape_end(s, "\"a\"", "\"s\"");
}

/* log(softmax(x)), each the next one's input: log_softmax. */
static void shape_log_softmax(tg_str *s, int steps) {
    static const char *const v[] = {"a", "[4,5]"};
    shape_begin(s, 1, v);
    char in[64], out[32], prev[32] = "a";
    for (int k = 0; k < steps; k++) {
        shape_node(s, k == 0, "softmax", SHAPE_ID(in, "\"%s\"", prev), SHAPE_ID(out, "sm%d", k),
                   "{\"axis\":-1}");
        shape_node(s, false, "log", SHAPE_ID(in, "\"sm%d\"", k), SHAPE_ID(out, "l%d", k), NULL);
        SHAPE_ID(prev, "%s", out);
    }
    SHAPE_ID(out, "\"%s\"", prev);
    shape_end(s, "\"a\"", out);
}

/* t = switch(t > 0, t, 0) * b: a stack of switches for switch_sink. */
static void shape_switches(tg_str *s, int steps) {
    static const char *const v[] = {"a", "[8]", "b", "[8]"};
    shape_begin(s, 2, v);
    char in[96], out[32], prev[32] = "a";
    for (int k = 0; k < steps; k++) {
        shape_node(s, k == 0, "gt", SHAPE_ID(in, "\"%s\",{\"value\":0.0}", prev),
                   SHAPE_ID(out, "g%d", k), NULL);
        shape_node(s, false, "switch", SHAPE_ID(in, "\"g%d\",\"%s\",{\"value\":0.0}", k, prev),
                   SHAPE_ID(out, "w%d", k), NULL);
        shape_node(s, false, "mul", SHAPE_ID(in, "\"w%d\",\"b\"", k), SHAPE_ID(out, "m%d", k),
                   NULL);
        SHAPE_ID(prev, "%s", out);
    }
    SHAPE_ID(out, "\"%s\"", prev);
    shape_end(s, "\"a\",\"b\"", out);
}

/* The gradient of sum(x_n) for the lattice x_k = x_{k-1} * x_{k-2},
 * x_0 = tanh w, x_1 = sin w: every value's gradient gathers two. */
static void shape_grad_lattice(tg_str *s, int steps) {
    static const char *const v[] = {"w", "[8]"};
    shape_begin(s, 1, v);
    shape_node(s, true, "tanh", "\"w\"", "x0", NULL);
    shape_node(s, false, "sin", "\"w\"", "x1", NULL);
    char in[64], out[32];
    for (int k = 2; k < steps; k++) {
        shape_node(s, false, "mul", SHAPE_ID(in, "\"x%d\",\"x%d\"", k - 1, k - 2),
                   SHAPE_ID(out, "x%d", k), NULL);
    }
    SHAPE_ID(in, "\"x%d\"", steps - 1);
    shape_node(s, false, "sum", in, "c", NULL);
    shape_node(s, false, "grad", "\"c\",\"w\"", "g", NULL);
    shape_end(s, "\"w\"", "\"g\"");
}

/* r_i = ifelse(k > i, r + u, 2 r): lazy branches, one after another. */
static void shape_ifelse(tg_str *s, int steps) {
    tg_str_addf(s, "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                   "{\"id\":\"k\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],\"nodes\":[");
    shape_node(s, true, "mul", "\"k\",{\"value\":2.0}", "u", NULL);
    char in[96], out[32], prev[32] = "u";
    for (int i = 0; i < steps; i++) {
        shape_node(s, false, "gt", SHAPE_ID(in, "\"k\",{\"value\":%d.0}", i),
                   SHAPE_ID(out, "c%d", i), NULL);
        shape_node(s, false, "add", SHAPE_ID(in, "\"%s\",\"u\"", prev), SHAPE_ID(out, "t%d", i),
                   NULL);
        shape_node(s, false, "mul", SHAPE_ID(in, "\"%s\",{\"value\":2.0}", prev),
                   SHAPE_ID(out, "e%d", i), NULL);
        shape_node(s, false, "ifelse", SHAPE_ID(in, "\"c%d\",\"t%d\",\"e%d\"", i, i, i),
                   SHAPE_ID(out, "r%d", i), NULL);
        SHAPE_ID(prev, "%s", out);
    }
    SHAPE_ID(out, "\"%s\"", prev);
    shape_end(s, "\"k\"", out);
}

/* A scan whose body is a chain of `steps` elementwise nodes from its
 * sequence and its state: what the loop can push out or fuse. */
static void shape_scan_body(tg_str *s, int steps) {
    tg_str_addf(
        s,
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[5,3]}},"
        "{\"id\":\"h0\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}}],\"nodes\":["
        "{\"op\":\"scan\",\"inputs\":[\"x\",\"h0\"],\"outputs\":[\"h\"],\"attrs\":{"
        "\"n_sequences\":1,\"sequence_taps\":[[0]],\"n_recurrent\":1,\"output_taps\":[[-1]],"
        "\"n_nonrecurrent\":0,\"n_non_sequences\":0,\"has_n_steps\":false,\"has_until\":false,"
        "\"body\":{\"variables\":[{\"id\":\"b.x\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}},"
        "{\"id\":\"b.h\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}}],\"nodes\":[");
    char in[64], out[32], prev[32] = "b.x";
    for (int k = 0; k < steps; k++) {
        shape_node(s, k == 0,
                   k % 3 == 2 ? "cos"
                   : k % 3    ? "sin"
                              : "tanh",
                   SHAPE_ID(in, "\"%s\"", prev), SHAPE_ID(out, "q%d", k), NULL);
        SHAPE_ID(prev, "%s", out);
    }
    SHAPE_ID(in, "\"%s\",\"b.h\"", prev);
    shape_node(s, false, "add", in, "b.y", NULL);
    tg_str_addf(s, "],\"inputs\":[\"b.x\",\"b.h\"],\"outputs\":[\"b.y\"]}}},"
                   "{\"op\":\"sum\",\"inputs\":[\"h\"],\"outputs\":[\"c\"]}],"
                   "\"functions\":{\"f\":{\"inputs\":[\"x\",\"h0\"],\"outputs\":[\"c\"]}}}");
}

typedef struct shape_def {
    const char *name;
    shape_gen gen;
} shape_def;

static const shape_def SHAPES[] = {
    {"lattice", shape_lattice},   {"fanout", shape_fanout},
    {"fanin", shape_fanin},       {"const_chain", shape_const_chain},
    {"muldiv", shape_muldiv},     {"dimshuffles", shape_dimshuffles},
    {"cancel", shape_cancel},     {"increments", shape_increments},
    {"twins", shape_twins},       {"log_softmax", shape_log_softmax},
    {"switches", shape_switches}, {"grad_lattice", shape_grad_lattice},
    {"ifelse", shape_ifelse},     {"scan_body", shape_scan_body},
};
enum { NSHAPES = (int)(sizeof SHAPES / sizeof SHAPES[0]) };

#endif

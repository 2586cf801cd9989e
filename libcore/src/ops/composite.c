/* The composite op (FORMAT.md s7): a body of elementwise ops over scalars,
 * run as one loop over the broadcast index space, compiled (kcache.c) or
 * interpreted block by block. See composite.h.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grad/grad.h"
#include "io/io.h"
#include "debug/guard.h"
#include "ops/composite.h"
#include "ops/special.h"

/* A parsed body, shared by every composite node with the same body text
 * (a graph repeats the same fused pattern many times: parsing each copy
 * again was most of the optimizer's time on large graphs). */
enum { KERNS = 4 };

typedef struct comp_parsed {
    long refs;
    uint64_t hash;
    char *key; /* the body's JSON text */
    tg_fgraph *fg;
    /* Every body output is a value its nodes compute (none is an input,
     * nor an identity of one): see tg_composite_places_any_output. */
    bool computed_outputs;
    struct comp_parsed *next;
    /* The kernels decided for this body (comp_decide), one per mask of
     * 0-d inputs: every node with the body and the mask has the same
     * source, so it is written, hashed and looked up once, not once per
     * node (12,500 composites of one body took 0.5 s on their first
     * call). Under decide_lock. */
    struct {
        uint64_t scalars;
        char *src;
        tg_kernel_fn fn;
        bool tried;         /* fn is the kernel cache's answer (NULL: none) */
        unsigned long gen;  /* ... in this tg_kcache_generation */
        unsigned mark;      /* listed by this tg_composite_prefetch call */
    } kern[KERNS];
    int nkern;
} comp_parsed;

static void parsed_free(comp_parsed *p) {
    tg_fgraph_free(p->fg);
    for (int k = 0; k < p->nkern; k++) tg_free(p->kern[k].src);
    tg_free(p->key);
    tg_free(p);
}

enum { PARSED_BUCKETS = 4096 };
static comp_parsed *parsed_table[PARSED_BUCKETS];
static pthread_mutex_t parsed_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* A reference to the parsed body with this text, or NULL. */
static comp_parsed *parsed_get(const char *key, uint64_t h) {
    pthread_mutex_lock(&parsed_lock);
    comp_parsed *p = parsed_table[h % PARSED_BUCKETS];
    while (p && (p->hash != h || strcmp(p->key, key))) p = p->next;
    if (p) p->refs++;
    pthread_mutex_unlock(&parsed_lock);
    return p;
}

static void parsed_release(comp_parsed *p);

/* The bodies parsed last, kept (a reference each) when no node holds
 * them any more: a function restored, freed and restored again (a
 * benchmark's loop, a server that reloads its model) finds its bodies
 * parsed. Under parsed_lock. */
enum { RECENT = 8 };
static comp_parsed *recent[RECENT];
static unsigned recent_next;

/* Publish p (refs 1), or, when another thread published the same text
 * meanwhile, free p and take that one. */
static comp_parsed *parsed_put(comp_parsed *p) {
    pthread_mutex_lock(&parsed_lock);
    comp_parsed **slot = &parsed_table[p->hash % PARSED_BUCKETS];
    for (comp_parsed *q = *slot; q; q = q->next)
        if (q->hash == p->hash && !strcmp(q->key, p->key)) {
            q->refs++;
            pthread_mutex_unlock(&parsed_lock);
            parsed_free(p);
            return q;
        }
    p->refs = 2; /* the caller's and recent's */
    p->next = *slot;
    *slot = p;
    unsigned i = recent_next++ % RECENT;
    comp_parsed *old = recent[i];
    recent[i] = p;
    pthread_mutex_unlock(&parsed_lock);
    parsed_release(old);
    return p;
}

static void parsed_release(comp_parsed *p) {
    if (!p) return;
    pthread_mutex_lock(&parsed_lock);
    bool last = --p->refs == 0;
    if (last && p->key) {
        comp_parsed **slot = &parsed_table[p->hash % PARSED_BUCKETS];
        while (*slot != p) slot = &(*slot)->next;
        *slot = p->next;
    }
    pthread_mutex_unlock(&parsed_lock);
    if (last) parsed_free(p);
}

typedef struct comp_body {
    comp_parsed *parsed;
    tg_fgraph *fg; /* the body (parsed->fg): 0-d variables, elementwise nodes */
    char *src;     /* the kernel's C source for this node, made when it
                      first runs (NULL: not yet, or interpreter only) */
    bool src_shared; /* src is parsed->kern's, not this node's */
    bool src_ready;  /* src decided (decide_src) */
    /* -1 undecided, 0 interpreter, 1 compiled (fn) */
    int mode;
    tg_kernel_fn fn;
    /* The kernel that reads the inputs of row_mask once per row (row
     * constants and 0-d inputs; row_kernel), when row_ready, as the
     * kernel cache was in generation row_gen. Under decide_lock. */
    tg_kernel_fn row_fn;
    uint64_t row_mask;
    unsigned long row_gen;
    bool row_ready;
    void *dev; /* a device backend's kernel (tg_composite_node_dev_set) */
    /* Which original nodes each fused node stood for: body node t<j>
     * (nodes[j] when the node was built) for keys[ostart[j] ..
     * ostart[j+1]), keys being gkeys, or the node's origins when gkeys
     * is NULL. gkeys (packed, owned) exists when two fused nodes stood
     * for one original node (a rewrite's two nodes: exp(log a) made
     * switch(ge(a, 0), a, nan)): the node's origins name each once, so
     * that the groups, which repeat it, cannot index them. ostart NULL:
     * unknown (a composite of a graph file, or of a .tgf of version 2). */
    int *ostart;
    int nfused;
    char **gkeys;
    int ngkeys;
    /* How a run-time error names fused node j, as it would name nodes[j]
     * unfused: its description, a NUL, and the trace text that follows
     * the message (tg_node_error_parts), at who + who_at[j], j < nwho.
     * NULL: unknown (a composite of a graph file or of a .tgf before
     * format version 4). */
    char *who;
    int *who_at;
    int nwho;
    /* The fused node (t<j>) whose op failed in the node's last run, or -1
     * when the run did not fail there (tg_composite_failed_node). */
    int failed;
} comp_body;

static bool force_interp = false;
static int force_env = -1;

void tg_composite_force_interp(bool on) {
    force_env = 0;
    __atomic_store_n(&force_interp, on, __ATOMIC_RELAXED);
}

static bool interp_forced(void) {
    if (__atomic_load_n(&force_env, __ATOMIC_RELAXED) < 0) {
        const char *e = getenv("TG_COMPOSITE");
        if (e && !strcmp(e, "interp")) __atomic_store_n(&force_interp, true, __ATOMIC_RELAXED);
        __atomic_store_n(&force_env, 0, __ATOMIC_RELAXED);
    }
    return __atomic_load_n(&force_interp, __ATOMIC_RELAXED);
}

static void comp_free_extra(tg_attrs *a) {
    comp_body *b = a->extra;
    if (!b) return;
    if (!b->src_shared) tg_free(b->src);
    parsed_release(b->parsed);
    tg_free(b->ostart);
    tg_free(b->gkeys);
    tg_free(b->who);
    tg_free(b->who_at);
    tg_free(b);
    a->extra = NULL;
}

/* ---- code generation ---- */

static const char *ctype_of(tg_dtype dt) {
    switch (dt) {
    case TG_BOOL: return "uint8_t";
    case TG_INT8: return "int8_t";
    case TG_INT16: return "int16_t";
    case TG_INT32: return "int32_t";
    case TG_INT64: return "int64_t";
    case TG_UINT8: return "uint8_t";
    case TG_UINT16: return "uint16_t";
    case TG_UINT32: return "uint32_t";
    case TG_UINT64: return "uint64_t";
    case TG_FLOAT32: return "float";
    case TG_FLOAT64: return "double";
    default: return NULL;
    }
}

static bool is_signed_int(tg_dtype dt) {
    return dt == TG_INT8 || dt == TG_INT16 || dt == TG_INT32 || dt == TG_INT64;
}

/* A 0-d constant as a C expression of its own type. */
static void emit_const(tg_str *s, const tg_array *v) {
    tg_dtype dt = v->dtype;
    const char *ct = ctype_of(dt);
    if (dt == TG_FLOAT32 || dt == TG_FLOAT64) {
        double x = tg_load_f64(dt, v->data);
        if (isnan(x))
            tg_str_addf(s, "((%s)__builtin_nan(\"\"))", ct);
        else if (isinf(x))
            tg_str_addf(s, "((%s)(%s__builtin_inf()))", ct, x < 0 ? "-" : "");
        else
            tg_str_addf(s, "((%s)%a)", ct, x);
    } else if (dt == TG_UINT64) {
        tg_str_addf(s, "((uint64_t)%" PRIu64 "ull)", *(const uint64_t *)v->data);
    } else {
        int64_t x = tg_load_i64(dt, v->data);
        if (x == INT64_MIN)
            tg_str_addf(s, "((%s)(-9223372036854775807ll - 1))", ct);
        else
            tg_str_addf(s, "((%s)%" PRId64 "ll)", ct, x);
    }
}

/* Whether nd is eq..ge of a signed integer and a uint64, whose dtype is
 * float64: its operands are then cast to int64 and uint64 and compared
 * exactly, as the unfused op's mixed loops do (elemwise.c). */
static bool mixed_compare(const tg_node *nd) {
    static const char *const ops[] = {"eq", "neq", "lt", "le", "gt", "ge"};
    if (nd->nin != 2 || (tg_dtype)nd->a.mode != TG_FLOAT64) return false;
    tg_dtype x = nd->inputs[0]->type.dtype, y = nd->inputs[1]->type.dtype;
    if (!tg_dtype_is_int(x) || !tg_dtype_is_int(y) || tg_dtype_kind(x) == tg_dtype_kind(y)) return false;
    for (size_t i = 0; i < TG_ARRAY_LEN(ops); i++)
        if (!strcmp(nd->op->name, ops[i])) return true;
    return false;
}

/* The expression of node nd over its (already cast) operands a[]; false
 * when the generator does not handle it. Every formula is the one of the
 * elementwise loops (elemwise.c), so that values agree. */
static bool node_expr(tg_str *s, const tg_node *nd, char a[][48], bool half) {
    const char *op = nd->op->name;
    tg_dtype cd = (tg_dtype)nd->a.mode;
    if (half && cd == TG_FLOAT16) cd = TG_FLOAT32; /* float16 computes in float32 */
    bool fl = cd == TG_FLOAT32 || cd == TG_FLOAT64, f32 = cd == TG_FLOAT32;
    bool bl = cd == TG_BOOL, si = is_signed_int(cd);
    const char *ct = ctype_of(cd), *sf = f32 ? "f" : "";
    if (!ct) return false;
    static const char *const libm[][2] = {
        {"exp", "exp"}, {"exp2", "exp2"}, {"expm1", "expm1"}, {"log", "log"}, {"log2", "log2"},
        {"log10", "log10"}, {"log1p", "log1p"}, {"sqrt", "sqrt"}, {"sin", "sin"}, {"cos", "cos"},
        {"tan", "tan"}, {"arcsin", "asin"}, {"arccos", "acos"}, {"arctan", "atan"},
        {"sinh", "sinh"}, {"cosh", "cosh"}, {"tanh", "tanh"}, {"arcsinh", "asinh"},
        {"arccosh", "acosh"}, {"arctanh", "atanh"}, {"erf", "erf"}, {"erfc", "erfc"},
        {"floor", "floor"}, {"ceil", "ceil"}, {"round", "rint"}, {"trunc", "trunc"}};
    for (size_t i = 0; i < TG_ARRAY_LEN(libm); i++)
        if (!strcmp(op, libm[i][0])) {
            if (!fl) {
                /* floor..trunc of integers are the integers themselves;
                 * the float-only functions never compute in integers. */
                if (i < 22) return false;
                tg_str_addf(s, "%s", a[0]);
                return true;
            }
            tg_str_addf(s, "%s%s(%s)", libm[i][1], sf, a[0]);
            return true;
        }
    if (!strcmp(op, "sigmoid") || !strcmp(op, "softplus")) {
        if (!fl) return false;
        tg_str_addf(s, "tg_%s_%s(%s)", op, f32 ? "f" : "d", a[0]);
        return true;
    }
    if (!strcmp(op, "gammaln")) {
        if (!fl) return false;
        tg_str_addf(s, "tg_gammaln_%s(%s)", f32 ? "f" : "d", a[0]);
        return true;
    }
    if (!strcmp(op, "digamma") || !strcmp(op, "trigamma")) { /* in double, as elemwise.c */
        if (!fl) return false;
        tg_str_addf(s, "((%s)tg_%s((double)%s))", ct, op, a[0]);
        return true;
    }
    if (!strcmp(op, "polygamma")) { /* in double, as elemwise.c */
        if (!fl) return false;
        tg_str_addf(s, "((%s)tg_polygamma((double)%s, (double)%s))", ct, a[0], a[1]);
        return true;
    }
    if (!strcmp(op, "reciprocal")) {
        if (!fl) return false;
        tg_str_addf(s, "(1 / %s)", a[0]);
        return true;
    }
    if (!strcmp(op, "identity")) {
        tg_str_addf(s, "%s", a[0]);
        return true;
    }
    if (!strcmp(op, "cast")) {
        if (nd->a.dtype == TG_BOOL)
            tg_str_addf(s, "(%s != 0)", a[0]);
        else
            tg_str_addf(s, "%s", a[0]);
        return true;
    }
    if (!strcmp(op, "neg")) {
        if (fl) tg_str_addf(s, "(-%s)", a[0]);
        else tg_str_addf(s, "((%s)(0 - (uint64_t)%s))", ct, a[0]);
        return true;
    }
    if (!strcmp(op, "abs")) {
        if (fl) tg_str_addf(s, "fabs%s(%s)", sf, a[0]);
        else if (si) tg_str_addf(s, "(%s < 0 ? (%s)(0 - (uint64_t)%s) : %s)", a[0], ct, a[0], a[0]);
        else tg_str_addf(s, "%s", a[0]);
        return true;
    }
    if (!strcmp(op, "sign")) {
        if (fl) tg_str_addf(s, "(%s > 0 ? 1 : %s < 0 ? -1 : %s == 0 ? 0 : %s)", a[0], a[0], a[0], a[0]);
        else if (si) tg_str_addf(s, "((%s > 0) - (%s < 0))", a[0], a[0]);
        else tg_str_addf(s, "(%s > 0)", a[0]);
        return true;
    }
    if (!strcmp(op, "sqr")) {
        if (fl) tg_str_addf(s, "(%s * %s)", a[0], a[0]);
        else if (bl) tg_str_addf(s, "%s", a[0]);
        else tg_str_addf(s, "((%s)((uint64_t)%s * (uint64_t)%s))", ct, a[0], a[0]);
        return true;
    }
    if (!strcmp(op, "relu")) {
        if (fl) tg_str_addf(s, "(%s > 0 ? %s : (%s != %s ? %s : 0))", a[0], a[0], a[0], a[0], a[0]);
        else if (si) tg_str_addf(s, "(%s > 0 ? %s : 0)", a[0], a[0]);
        else tg_str_addf(s, "%s", a[0]);
        return true;
    }
    if (!strcmp(op, "isnan") || !strcmp(op, "isinf")) {
        if (!fl) tg_str_addf(s, "0");
        else if (op[2] == 'n') tg_str_addf(s, "(%s != %s)", a[0], a[0]);
        else tg_str_addf(s, "(isinf(%s) != 0)", a[0]);
        return true;
    }
    if (!strcmp(op, "logical_not")) {
        tg_str_addf(s, "(%s == 0)", a[0]);
        return true;
    }
    if (!strcmp(op, "add") || !strcmp(op, "mul") || !strcmp(op, "sub")) {
        char c = op[0] == 'a' ? '+' : op[0] == 'm' ? '*' : '-';
        /* A left fold, each step rounded to the compute dtype as the
         * unfused n-ary loop does. */
        tg_str acc = {0};
        tg_str_addf(&acc, "%s", a[0]);
        for (int k = 1; k < nd->nin; k++) {
            tg_str t = {0};
            if (fl)
                tg_str_addf(&t, "((%s)(%s %c %s))", ct, acc.s, c, a[k]);
            else if (bl)
                tg_str_addf(&t, "((uint8_t)(%s %c %s))", acc.s, c == '+' ? '|' : '&', a[k]);
            else
                tg_str_addf(&t, "((%s)((uint64_t)%s %c (uint64_t)%s))", ct, acc.s, c, a[k]);
            tg_str_free(&acc);
            acc = t;
        }
        if (acc.s) tg_str_addf(s, "%s", acc.s);
        tg_str_free(&acc);
        return true;
    }
    if (!strcmp(op, "true_div")) {
        if (!fl) return false;
        tg_str_addf(s, "(%s / %s)", a[0], a[1]);
        return true;
    }
    if (!strcmp(op, "pow")) {
        if (!fl) return false;
        tg_str_addf(s, "pow%s(%s, %s)", sf, a[0], a[1]);
        return true;
    }
    if (!strcmp(op, "arctan2")) {
        if (!fl) return false;
        tg_str_addf(s, "atan2%s(%s, %s)", sf, a[0], a[1]);
        return true;
    }
    if (!strcmp(op, "maximum") || !strcmp(op, "minimum")) {
        const char *cmp = op[1] == 'a' ? ">=" : "<=";
        if (bl) tg_str_addf(s, "(%s %c %s)", a[0], op[1] == 'a' ? '|' : '&', a[1]);
        else if (fl) tg_str_addf(s, "((%s %s %s || %s != %s) ? %s : %s)", a[0], cmp, a[1], a[0], a[0], a[0], a[1]);
        else tg_str_addf(s, "(%s %s %s ? %s : %s)", a[0], cmp, a[1], a[0], a[1]);
        return true;
    }
    static const char *const cmps[][2] = {{"eq", "=="}, {"neq", "!="}, {"lt", "<"},
                                          {"le", "<="}, {"gt", ">"},   {"ge", ">="}};
    for (size_t i = 0; i < TG_ARRAY_LEN(cmps); i++)
        if (!strcmp(op, cmps[i][0])) {
            if (mixed_compare(nd)) {
                /* the signed operand negative: eq false, neq true, and
                 * it is the smaller; else both compare as uint64 */
                int sg = is_signed_int(nd->inputs[0]->type.dtype) ? 0 : 1;
                bool neg = i == 1 || (sg == 0 ? i == 2 || i == 3 : i == 4 || i == 5);
                tg_str_addf(s, neg ? "((%s < 0) | ((uint64_t)%s %s (uint64_t)%s))"
                                   : "((%s >= 0) & ((uint64_t)%s %s (uint64_t)%s))",
                            a[sg], a[0], cmps[i][1], a[1]);
                return true;
            }
            tg_str_addf(s, "(%s %s %s)", a[0], cmps[i][1], a[1]);
            return true;
        }
    if (!strncmp(op, "logical_", 8)) {
        char c = op[8] == 'a' ? '&' : op[8] == 'o' ? '|' : '^';
        tg_str_addf(s, "((%s != 0) %c (%s != 0))", a[0], c, a[1]);
        return true;
    }
    if (!strcmp(op, "switch")) {
        tg_str_addf(s, "(%s ? %s : %s)", a[0], a[1], a[2]);
        return true;
    }
    if (!strcmp(op, "clip")) {
        tg_str_addf(s, "tg_clip_%s(%s, %s, %s)", ct, a[0], a[1], a[2]);
        return true;
    }
    if (!strcmp(op, "int_div") || !strcmp(op, "mod")) {
        const bool div = op[0] == 'i';
        if (fl) { /* NumPy's floor_divide and remainder of floats, in double (elemwise.c) */
            tg_str_addf(s, "((%s)tg_fdivmod((double)%s, (double)%s, %d))", ct, a[0], a[1], div);
            return true;
        }
        /* Integers only by a divisor that is a constant of the body, and
         * neither 0 (a run-time error the kernel has no way to report)
         * nor, signed, -1 (NumPy's wrap of the most negative value, which
         * C's division leaves undefined): the compiler then divides by
         * multiplying, as the unfused loop does (elemwise.c, divinv). */
        const tg_var *dv = nd->inputs[1];
        if (bl || dv->kind != TG_VAR_CONSTANT || !dv->value || dv->type.ndim != 0 ||
            !tg_dtype_is_int(dv->value->dtype))
            return false;
        /* (the compute dtype, promoted from the divisor's, holds its value;
         * a uint64 past 2^63 reads negative here, and is not -1 unsigned) */
        int64_t d = tg_load_i64(dv->value->dtype, dv->value->data);
        if (d == 0 || (si && d == -1)) return false;
        if (!si)
            tg_str_addf(s, "((%s)(%s %c %s))", ct, a[0], div ? '/' : '%', a[1]);
        else if (div) /* the truncated quotient, less one where the remainder is against the divisor's sign */
            tg_str_addf(s, "((%s)(%s / %s - ((%s %% %s != 0) & ((%s < 0) != (%s < 0)))))", ct, a[0], a[1], a[0],
                        a[1], a[0], a[1]);
        else
            tg_str_addf(s, "((%s)(%s %% %s + ((%s %% %s != 0) & ((%s %% %s < 0) != (%s < 0)) ? %s : 0)))", ct, a[0],
                        a[1], a[0], a[1], a[0], a[1], a[1], a[1]);
        return true;
    }
    return false; /* integer int_div and mod by a divisor that is not a constant, integer pow */
}

static const char *ctype_h(tg_dtype dt, bool half) { return half && dt == TG_FLOAT16 ? "float" : ctype_of(dt); }

/* The kernel's prelude. As in vmath.c, the libm functions are declared
 * `omp declare simd` (GCC), so that the vectorised loop calls the same
 * libmvec variant as the unfused ops' loops on this CPU, and sigmoid
 * uses vmath.c's branch-free form. sin and cos are also declared const:
 * compiled with -fno-builtin-sin/cos (kcache.c), they are not GCC's
 * builtins, which -fno-math-errno makes const, so GCC took them for
 * functions that may write memory and would not if-convert sigmoid's or
 * softplus's branches beside them into vector selects: the whole loop
 * ran scalar libm (a body of exp, sigmoid and sin: exp 97 of 265 values
 * an ulp off the unfused op's). */
static const char PRELUDE[] =
    "#include <stdint.h>\n"
    "#include <math.h>\n" /* one simd declaration a line: see vmath.c */
    "#if defined(__GNUC__) && !defined(__clang__)\n"
    "#pragma omp declare simd notinbranch\ndouble exp(double);\n#pragma omp declare simd notinbranch\nfloat expf(float);\n"
    "#pragma omp declare simd notinbranch\ndouble exp2(double);\n#pragma omp declare simd notinbranch\nfloat exp2f(float);\n"
    "#pragma omp declare simd notinbranch\ndouble expm1(double);\n#pragma omp declare simd notinbranch\nfloat expm1f(float);\n"
    "#pragma omp declare simd notinbranch\ndouble log(double);\n#pragma omp declare simd notinbranch\nfloat logf(float);\n"
    "#pragma omp declare simd notinbranch\ndouble log2(double);\n#pragma omp declare simd notinbranch\nfloat log2f(float);\n"
    "#pragma omp declare simd notinbranch\ndouble log10(double);\n#pragma omp declare simd notinbranch\nfloat log10f(float);\n"
    "#pragma omp declare simd notinbranch\ndouble log1p(double);\n#pragma omp declare simd notinbranch\nfloat log1pf(float);\n"
    "#pragma omp declare simd notinbranch\n__attribute__((const)) double sin(double);\n"
    "#pragma omp declare simd notinbranch\n__attribute__((const)) float sinf(float);\n"
    "#pragma omp declare simd notinbranch\n__attribute__((const)) double cos(double);\n"
    "#pragma omp declare simd notinbranch\n__attribute__((const)) float cosf(float);\n"
    "#pragma omp declare simd notinbranch\ndouble tan(double);\n#pragma omp declare simd notinbranch\nfloat tanf(float);\n"
    "#pragma omp declare simd notinbranch\ndouble asin(double);\n#pragma omp declare simd notinbranch\nfloat asinf(float);\n"
    "#pragma omp declare simd notinbranch\ndouble acos(double);\n#pragma omp declare simd notinbranch\nfloat acosf(float);\n"
    "#pragma omp declare simd notinbranch\ndouble atan(double);\n#pragma omp declare simd notinbranch\nfloat atanf(float);\n"
    "#pragma omp declare simd notinbranch\ndouble sinh(double);\n#pragma omp declare simd notinbranch\nfloat sinhf(float);\n"
    "#pragma omp declare simd notinbranch\ndouble cosh(double);\n#pragma omp declare simd notinbranch\nfloat coshf(float);\n"
    "#pragma omp declare simd notinbranch\ndouble tanh(double);\n#pragma omp declare simd notinbranch\nfloat tanhf(float);\n"
    "#pragma omp declare simd notinbranch\ndouble asinh(double);\n#pragma omp declare simd notinbranch\nfloat asinhf(float);\n"
    "#pragma omp declare simd notinbranch\ndouble acosh(double);\n#pragma omp declare simd notinbranch\nfloat acoshf(float);\n"
    "#pragma omp declare simd notinbranch\ndouble atanh(double);\n#pragma omp declare simd notinbranch\nfloat atanhf(float);\n"
    "#pragma omp declare simd notinbranch\ndouble erf(double);\n#pragma omp declare simd notinbranch\nfloat erff(float);\n"
    "#pragma omp declare simd notinbranch\ndouble erfc(double);\n#pragma omp declare simd notinbranch\nfloat erfcf(float);\n"
    "#endif\n"
    "static inline double tg_sigmoid_d(double x) {\n"
    "    double e = exp(-fabs(x)), r = 1.0 / (1.0 + e);\n"
    "    return x >= 0 ? r : (x < 0 ? e * r : x);\n}\n"
    "static inline float tg_sigmoid_f(float x) {\n"
    "    float e = expf(-fabsf(x)), r = 1.0f / (1.0f + e);\n"
    "    return x >= 0 ? r : (x < 0 ? e * r : x);\n}\n"
    /* (fabs: the sum is never negative, but a NaN's sign, which
     * -fabs(x) sets and exp and log1p keep: vmath.c's unfused softplus
     * gives a NaN's sign bit clear) */
    "static inline double tg_softplus_d(double x) { return fabs((x > 0 ? x : 0) + log1p(exp(-fabs(x)))); }\n"
    "static inline float tg_softplus_f(float x) { return fabsf((x > 0 ? x : 0) + log1pf(expf(-fabsf(x)))); }\n"
    "#define TG_CLIP(T) static inline T tg_clip_##T(T x, T lo, T hi) { \\\n"
    "    T m = (x > lo || x != x) ? x : lo; return (m < hi || m != m) ? m : hi; }\n"
    "TG_CLIP(int8_t) TG_CLIP(int16_t) TG_CLIP(int32_t) TG_CLIP(int64_t) TG_CLIP(uint8_t)\n"
    "TG_CLIP(uint16_t) TG_CLIP(uint32_t) TG_CLIP(uint64_t) TG_CLIP(float) TG_CLIP(double)\n"
    TG_SPECIAL_FDIVMOD_TEXT(static inline, __asm__("" : "+m"(z));)
    TG_COMPOSITE_F2I("static inline")
    /* elemwise.c's gammaln, digamma, trigamma and polygamma: calls the
     * loop cannot vectorise (noinline: not even by cloning the loop
     * around their own loops and libm calls, which would then take
     * libmvec's variants) */
    "static __attribute__((noinline)) double tg_gammaln_d(double x) { int s; return lgamma_r(x, &s); }\n"
    "static __attribute__((noinline)) float tg_gammaln_f(float x) { int s; return lgammaf_r(x, &s); }\n"
    TG_SPECIAL_TEXT(static __attribute__((noinline)));

/* The prelude's conversion from float dtype `from` to integer dtype `to`
 * (tg_f2i32, tg_f2i64, tg_f2u64: NaN and out-of-range values as
 * tensor/cast.c defines them, x86's scalar conversions), or NULL where
 * C's own cast is right. */
static const char *f2i_fn(tg_dtype to, tg_dtype from) {
    if (!tg_dtype_is_float(from) || tg_dtype_is_float(to) || to == TG_BOOL) return NULL;
    return to == TG_INT64 || to == TG_UINT32 ? "tg_f2i64" : to == TG_UINT64 ? "tg_f2u64" : "tg_f2i32";
}

/* An input of a dtype narrower than float32 (int8, uint8, int16,
 * uint16, bool): every value is exact in float32. */
static bool narrow_input(const tg_fgraph *fg, const tg_var *v) {
    tg_dtype dt = v->type.dtype;
    if (tg_dtype_is_float(dt) || tg_dtype_size(dt) >= 4) return false;
    for (int i = 0; i < fg->nin; i++)
        if (fg->inputs[i] == v) return true;
    return false;
}

/* The statements computing every body variable from the inputs loaded as
 * v<index>: one typed local per node output. */
/* With half, float16 variables are float locals holding float16 values:
 * each node computes as elemwise.c does (float16 in float32, an input of
 * another dtype converted straight to float32) and rounds its float16
 * result once with tg_h (from float) or tg_hd (from double: one
 * rounding, as tensor/cast.c), which the including prelude defines.
 * With wide, a narrow input v<index> also has its value as a float32
 * local x<index> (block_text), which the body's conversions to float or
 * double read instead. */
static bool emit_body(tg_str *s, const tg_fgraph *fg, bool half, bool wide) {
    for (int i = 0; i < fg->nvars; i++) {
        tg_var *v = fg->vars[i];
        if (v->kind == TG_VAR_CONSTANT) {
            const char *ct = ctype_h(v->type.dtype, half);
            if (!ct) return false;
            tg_str_addf(s, "        const %s v%d = ", ct, v->index);
            if (v->type.dtype == TG_FLOAT16) { /* exact in float */
                double x = tg_load_f64(TG_FLOAT16, v->value->data);
                if (isnan(x)) tg_str_addf(s, "((float)__builtin_nan(\"\"))");
                else if (isinf(x)) tg_str_addf(s, "((float)(%s__builtin_inf()))", x < 0 ? "-" : "");
                else tg_str_addf(s, "((float)%a)", x);
            } else {
                emit_const(s, v->value);
            }
            tg_str_addf(s, ";\n");
        }
    }
    for (int j = 0; j < fg->nnodes; j++) {
        tg_node *nd = fg->nodes[j];
        tg_dtype cd = (tg_dtype)nd->a.mode, od = nd->outputs[0]->type.dtype;
        if (!ctype_h(cd, half) || !ctype_h(od, half) || nd->nin > 16) return false;
        const bool sw = !strcmp(nd->op->name, "switch"), cast = !strcmp(nd->op->name, "cast");
        const bool mixed = mixed_compare(nd);
        char a[16][48];
        for (int k = 0; k < nd->nin; k++) {
            tg_dtype want = sw && k == 0 ? TG_BOOL : cd;
            if (cast) want = nd->inputs[k]->type.dtype;
            tg_var *in = nd->inputs[k];
            tg_dtype idt = in->type.dtype;
            if (mixed) want = is_signed_int(idt) ? TG_INT64 : TG_UINT64;
            const bool wf = wide && narrow_input(fg, in);
            if (wf && cast && (od == TG_FLOAT32 || od == TG_FLOAT64))
                snprintf(a[k], sizeof a[k], "x%d", in->index);
            else if (idt == want)
                snprintf(a[k], sizeof a[k], "v%d", in->index);
            else if (want == TG_BOOL)
                snprintf(a[k], sizeof a[k], "((uint8_t)(v%d != 0))", in->index);
            else if (want == TG_FLOAT16 && sw) /* switch moves float16 values */
                snprintf(a[k], sizeof a[k], idt == TG_FLOAT64 ? "tg_hd(v%d)" : "tg_h((float)v%d)", in->index);
            else if (f2i_fn(want, idt))
                snprintf(a[k], sizeof a[k], "((%s)%s((double)v%d))", ctype_h(want, half), f2i_fn(want, idt),
                         in->index);
            else if (wf && (want == TG_FLOAT32 || want == TG_FLOAT64))
                snprintf(a[k], sizeof a[k], want == TG_FLOAT32 ? "x%d" : "((double)x%d)", in->index);
            else
                snprintf(a[k], sizeof a[k], "((%s)v%d)", ctype_h(want, half), in->index);
        }
        tg_str e = {0};
        if (!node_expr(&e, nd, a, half)) {
            tg_str_free(&e);
            return false;
        }
        if (od == TG_FLOAT16) {
            bool dbl = cd == TG_FLOAT64 || (cast && nd->inputs[0]->type.dtype == TG_FLOAT64);
            tg_str_addf(s, "        const float v%d = %s)(%s));\n", nd->outputs[0]->index,
                        dbl ? "tg_hd((double" : "tg_h((float", e.s ? e.s : "0");
        } else {
            /* The expression's dtype: the compute dtype, a cast's input's. */
            const char *fn = f2i_fn(od, cast ? nd->inputs[0]->type.dtype : cd);
            tg_str_addf(s, "        const %s v%d = (%s)%s%s(%s)%s;\n", ctype_of(od), nd->outputs[0]->index,
                        ctype_of(od), fn ? fn : "", fn ? "((double)" : "", e.s ? e.s : "0", fn ? ")" : "");
        }
        tg_str_free(&e);
    }
    return true;
}

/* The libm functions the prelude declares `omp declare simd` (and the
 * helpers that call them). */
static const char *const SIMD_FNS[] = {"exp",  "exp2",  "expm1", "log",   "log2",  "log10", "log1p", "sin",
                                       "cos",  "tan",   "asin",  "acos",  "atan",  "sinh",  "cosh",  "tanh",
                                       "asinh", "acosh", "atanh", "erf",  "erfc",  "tg_sigmoid_d", "tg_sigmoid_f",
                                       "tg_softplus_d", "tg_softplus_f", NULL};

/* The prelude's functions that have no vector variant (fmod, lgamma,
 * digamma's and polygamma's loops): the loop around a call of one runs
 * scalar. */
static const char *const SCALAR_FNS[] = {"tg_fdivmod(", "tg_gammaln_", "tg_digamma(", "tg_trigamma(",
                                         "tg_polygamma(", NULL};

static bool calls_scalar_fn(const char *body) {
    for (int k = 0; SCALAR_FNS[k]; k++)
        if (strstr(body, SCALAR_FNS[k])) return true;
    return false;
}

/* The body calls a function whose vector variant (libmvec) rounds
 * differently from its scalar one (within a few ulp): a loop that the
 * compiler vectorises with a scalar remainder, or splits among threads,
 * would give an element bits that depend on where it falls. */
static bool calls_simd_fn(const char *body) {
    for (const char *q = body; (q = strchr(q, '(')) != NULL; q++) {
        const char *e = q, *b = q;
        while (b > body && (b[-1] == '_' || (b[-1] >= 'a' && b[-1] <= 'z') || (b[-1] >= '0' && b[-1] <= '9'))) b--;
        for (int k = 0; SIMD_FNS[k]; k++) {
            size_t len = strlen(SIMD_FNS[k]);
            if ((size_t)(e - b) == len + 1 && !strncmp(b, SIMD_FNS[k], len) && b[len] == 'f') return true;
            if ((size_t)(e - b) == len && !strncmp(b, SIMD_FNS[k], len)) return true;
        }
    }
    return false;
}

enum { KB = 16 }; /* block: a multiple of every vector length of float and double */

/* One block of KB elements through the vectorised body: input i read from
 * a<i> + b and output k written to o<k> + b (direct: contiguous operands),
 * or from the gathered copies t<i> and to u<k>. A constant trip count that
 * every vector length divides leaves no scalar remainder, so every element
 * takes the same vector call. A narrow input (int8, bool...) is first
 * converted into a block of float32, f<i>, that the body (emitted wide)
 * reads for its float uses, as the unfused op converts its whole input
 * before its loop: converted inside the loop, it left a sigmoid or
 * softplus of it (and the whole loop) scalar, calling libm's expf where
 * the unfused op calls libmvec's _ZGVeN16v_expf, or was vectorised at
 * the narrow type's width with other variants. */
static void block_text(tg_str *s, const tg_fgraph *fg, uint64_t scalars, const char *body, const char *ind,
                       bool direct) {
    char src[16];
    for (int i = 0; i < fg->nin; i++) {
        snprintf(src, sizeof src, scalars >> i & 1 ? "c%d[j]" : direct ? "a%d[b + j]" : "t%d[j]", i);
        if (narrow_input(fg, fg->inputs[i]))
            tg_str_addf(s, "%sfloat f%d[%d];\n%sfor (int j = 0; j < %d; j++) f%d[j] = (float)%s;\n", ind, i, KB,
                        ind, KB, i, src);
    }
    tg_str_addf(s, "%s#pragma omp simd\n%sfor (int j = 0; j < %d; j++) {\n", ind, ind, KB);
    for (int i = 0; i < fg->nin; i++) {
        snprintf(src, sizeof src, scalars >> i & 1 ? "c%d[j]" : direct ? "a%d[b + j]" : "t%d[j]", i);
        tg_str_addf(s, "%s    const %s v%d = %s;\n", ind, ctype_of(fg->inputs[i]->type.dtype), fg->inputs[i]->index,
                    src);
        if (narrow_input(fg, fg->inputs[i]))
            tg_str_addf(s, "%s    const float x%d = f%d[j];\n", ind, fg->inputs[i]->index, i);
    }
    tg_str_addf(s, "%s", body);
    for (int k = 0; k < fg->nout; k++)
        tg_str_addf(s, direct ? "%s    o%d[b + j] = v%d;\n" : "%s    u%d[j] = v%d;\n", ind, k, fg->outputs[k]->index);
    tg_str_addf(s, "%s}\n", ind);
}

/* Elements b .. b+m-1 of every strided input into t<i> (the rest of the
 * block repeats the first), the block, and the outputs back: the strided
 * and broadcast path, and the tail of the contiguous one. */
static void gathered_block(tg_str *s, const tg_fgraph *fg, uint64_t scalars, const char *body, const char *ind,
                           const char *m) {
    int nin = fg->nin, nout = fg->nout;
    for (int i = 0; i < nin; i++)
        if (!(scalars >> i & 1)) {
            const char *ct = ctype_of(fg->inputs[i]->type.dtype);
            tg_str_addf(s, "%s%s t%d[%d];\n", ind, ct, i, KB);
            tg_str_addf(s, "%sfor (int j = 0; j < %d; j++) t%d[j] = *(const %s *)(p[%d] + (b + (j < %s ? j : 0)) * s[%d]);\n",
                        ind, KB, i, ct, nout + i, m, nout + i);
        }
    for (int k = 0; k < nout; k++) tg_str_addf(s, "%s%s u%d[%d];\n", ind, ctype_of(fg->outputs[k]->type.dtype), k, KB);
    block_text(s, fg, scalars, body, ind, false);
    for (int k = 0; k < nout; k++)
        tg_str_addf(s, "%sfor (int j = 0; j < %s; j++) *(%s *)(p[%d] + (b + j) * s[%d]) = u%d[j];\n", ind, m,
                    ctype_of(fg->outputs[k]->type.dtype), k, k, k);
}

/* The kernel of a body that calls such functions: whole blocks of KB
 * elements, contiguous (in place) or gathered; the last partial block
 * gathered and padded. Threads take whole blocks, so the bits of an
 * element depend neither on the array's length, its layout, its place in
 * it, nor the number of threads. */
static void gen_blocked(tg_str *s, const tg_fgraph *fg, uint64_t scalars, const char *body, const char *contig) {
    int nin = fg->nin, nout = fg->nout;
    tg_str_addf(s, "    const int64_t nb = n - n %% %d;\n    if (%s) {\n", KB, contig);
    for (int k = 0; k < nout; k++)
        tg_str_addf(s, "        %s *o%d = (%s *)p[%d];\n", ctype_of(fg->outputs[k]->type.dtype), k,
                    ctype_of(fg->outputs[k]->type.dtype), k);
    for (int i = 0; i < nin; i++)
        if (!(scalars >> i & 1))
            tg_str_addf(s, "        const %s *a%d = (const %s *)p[%d];\n", ctype_of(fg->inputs[i]->type.dtype), i,
                        ctype_of(fg->inputs[i]->type.dtype), nout + i);
    char kb[8];
    snprintf(kb, sizeof kb, "%d", KB);
    for (int direct = 1; direct >= 0; direct--) {
        for (int par = 1; par >= 0; par--) {
            if (par)
                tg_str_addf(s, "        if (nb >= %d) {\n#pragma omp parallel for schedule(static)\n", TG_COMPOSITE_PAR_MIN);
            else
                tg_str_addf(s, "        } else {\n");
            tg_str_addf(s, "        for (int64_t b = 0; b < nb; b += %d) {\n", KB);
            if (direct)
                block_text(s, fg, scalars, body, "            ", true);
            else
                gathered_block(s, fg, scalars, body, "            ", kb);
            tg_str_addf(s, "        }\n");
        }
        if (direct) tg_str_addf(s, "        }\n    } else {\n");
    }
    tg_str_addf(s, "        }\n    }\n    if (nb < n) {\n        const int64_t b = nb;\n        const int m = (int)(n - nb);\n");
    gathered_block(s, fg, scalars, body, "        ", "m");
    tg_str_addf(s, "    }\n}\n");
}

/* The kernel source, or NULL (see tg_composite_node_source; *oom, when
 * oom is not NULL, says whether that was for want of memory). Input i
 * with bit i of `scalars` is 0-d: read once, before the loop, so that
 * the contiguous loop still vectorises (a learning rate, a scale). */
static char *gen_source(const tg_fgraph *fg, uint64_t scalars, bool *oom) {
    int nin = fg->nin, nout = fg->nout;
    tg_str s = {0}, body = {0};
    char *res = NULL;
    bool dup = false; /* res is tg_strdup's answer */
    for (int i = 0; i < nin; i++)
        if (!ctype_of(fg->inputs[i]->type.dtype)) goto done;
    for (int k = 0; k < nout; k++)
        if (!ctype_of(fg->outputs[k]->type.dtype)) goto done;
    if (!emit_body(&body, fg, false, false) || body.oom) goto done;
    /* A body that emits nothing (its outputs are its inputs) has no text:
     * an empty string, not NULL, for the "%s" below. */
    const char *bt = body.s ? body.s : "";
    /* The first line says what the kernel computes (tgc cache list). */
    tg_str_addf(&s, "/* tg composite: %d in, %d out, ops", nin, nout);
    for (int j = 0; j < fg->nnodes && j < 12; j++) tg_str_addf(&s, " %s", fg->nodes[j]->op->name);
    if (fg->nnodes > 12) tg_str_addf(&s, " ...");
    tg_str_addf(&s, "; %s */\n%s", tg_dtype_name(fg->outputs[0]->type.dtype), PRELUDE);
    tg_str_addf(&s, "void tg_composite_kernel(int64_t n, char **p, const int64_t *s) {\n");
    /* Contiguous operands: typed pointers, a vectorisable loop. A body
     * that calls a vector function reads each 0-d input from a block of
     * KB copies, as the others: from one variable, GCC moved exp(s) of a
     * 0-d s out of the loop and called scalar libm, which rounds
     * differently from the vector variant the unfused exp calls even for
     * one element (vmath.c). */
    bool blocked = calls_simd_fn(bt);
    /* Beside a function without a vector variant, the loop would run
     * scalar, calling scalar libm, whose bits are not the unfused op's
     * vector call's. The interpreter runs such a body. */
    if (blocked && calls_scalar_fn(bt)) goto done;
    if (blocked) {
        /* (the body again, its narrow inputs read as float: block_text) */
        tg_str_free(&body);
        if (!emit_body(&body, fg, false, true) || body.oom) goto done;
        bt = body.s ? body.s : "";
    }
    for (int i = 0; i < nin; i++)
        if ((scalars >> i & 1) && blocked)
            tg_str_addf(&s, "    %s c%d[%d];\n    for (int j = 0; j < %d; j++) c%d[j] = *(const %s *)p[%d];\n",
                        ctype_of(fg->inputs[i]->type.dtype), i, KB, KB, i, ctype_of(fg->inputs[i]->type.dtype),
                        nout + i);
        else if (scalars >> i & 1)
            tg_str_addf(&s, "    const %s v%d = *(const %s *)p[%d];\n",
                        ctype_of(fg->inputs[i]->type.dtype), fg->inputs[i]->index,
                        ctype_of(fg->inputs[i]->type.dtype), nout + i);
    tg_str cond = {0};
    tg_str_addf(&cond, "1");
    for (int k = 0; k < nout + nin; k++) {
        tg_dtype dt = k < nout ? fg->outputs[k]->type.dtype : fg->inputs[k - nout]->type.dtype;
        if (k < nout || !(scalars >> (k - nout) & 1))
            tg_str_addf(&cond, " && s[%d] == %zu", k, tg_dtype_size(dt));
    }
    if (blocked) {
        gen_blocked(&s, fg, scalars, bt, cond.s ? cond.s : "0");
        if (cond.oom) s.oom = true;
        tg_str_free(&cond);
        if (!s.oom) res = tg_strdup(s.s);
        dup = true;
        goto done;
    }
    tg_str_addf(&s, "    if (%s) {\n", cond.s ? cond.s : "0");
    if (cond.oom) s.oom = true;
    tg_str_free(&cond);
    for (int k = 0; k < nout; k++)
        tg_str_addf(&s, "        %s *o%d = (%s *)p[%d];\n", ctype_of(fg->outputs[k]->type.dtype),
                    k, ctype_of(fg->outputs[k]->type.dtype), k);
    /* No restrict: an output may overwrite an input in place (each
     * position is read before it is written; `omp simd` vectorises
     * without the promise). */
    for (int i = 0; i < nin; i++)
        if (!(scalars >> i & 1))
            tg_str_addf(&s, "        const %s *a%d = (const %s *)p[%d];\n",
                    ctype_of(fg->inputs[i]->type.dtype), i, ctype_of(fg->inputs[i]->type.dtype),
                    nout + i);
    /* Each loop twice: with threads from TG_COMPOSITE_PAR_MIN elements,
     * and without any OpenMP runtime call below it (a broadcast operand
     * makes the VM call the kernel once per row, and GOMP_parallel, even
     * told to run on one thread, cost more than a short row). */
    tg_str loop = {0};
    tg_str_addf(&loop, "for (int64_t i = 0; i < n; i++) {\n");
    for (int i = 0; i < nin; i++)
        if (!(scalars >> i & 1))
            tg_str_addf(&loop, "        const %s v%d = a%d[i];\n", ctype_of(fg->inputs[i]->type.dtype),
                        fg->inputs[i]->index, i);
    tg_str_addf(&loop, "%s", bt);
    for (int k = 0; k < nout; k++) tg_str_addf(&loop, "        o%d[i] = v%d;\n", k, fg->outputs[k]->index);
    tg_str_addf(&loop, "        }\n");
    tg_str_addf(&s,
                "        if (n >= %d) {\n#pragma omp parallel for simd schedule(static)\n        %s"
                "        } else {\n#pragma omp simd\n        %s        }\n        return;\n    }\n",
                TG_COMPOSITE_PAR_MIN, loop.s ? loop.s : "", loop.s ? loop.s : "");
    tg_str_free(&loop);
    /* Any strides (broadcast inputs have stride 0). */
    tg_str sl = {0};
    tg_str_addf(&sl, "for (int64_t i = 0; i < n; i++) {\n");
    for (int i = 0; i < nin; i++)
        if (!(scalars >> i & 1))
            tg_str_addf(&sl, "        const %s v%d = *(const %s *)(p[%d] + i * s[%d]);\n",
                    ctype_of(fg->inputs[i]->type.dtype), fg->inputs[i]->index,
                    ctype_of(fg->inputs[i]->type.dtype), nout + i, nout + i);
    tg_str_addf(&sl, "%s", bt);
    for (int k = 0; k < nout; k++)
        tg_str_addf(&sl, "        *(%s *)(p[%d] + i * s[%d]) = v%d;\n",
                    ctype_of(fg->outputs[k]->type.dtype), k, k, fg->outputs[k]->index);
    tg_str_addf(&sl, "    }\n");
    /* `omp simd` here too: a broadcast operand (stride 0) or a strided
     * row must not make each element call the scalar tanhf, expf... (the
     * vector variants gather; same libmvec functions as the contiguous
     * loop, so the same values). */
    tg_str_addf(&s, "    if (n >= %d) {\n#pragma omp parallel for simd schedule(static)\n    %s    } else {\n#pragma omp simd\n    %s    }\n}\n",
                TG_COMPOSITE_PAR_MIN, sl.s ? sl.s : "", sl.s ? sl.s : "");
    if (loop.oom || sl.oom) s.oom = true;
    tg_str_free(&sl);
    if (!s.oom) res = tg_strdup(s.s);
    dup = true;
done:
    if (oom) *oom = !res && (s.oom || body.oom || dup);
    tg_str_free(&s);
    tg_str_free(&body);
    return res;
}

/* ---- attributes: the body ---- */

typedef struct body_text {
    uint64_t hash;
    char text[];
} body_text;

/* The body's text, the parse cache's key, with its hash: a copy the
 * caller frees. NULL when out of memory. Writing the text goes through
 * jb's own print buffer: jb is this node's (or, in one function, its
 * clones' and the restored nodes' with the same attrs), never an object
 * another function holds, which may be in use in another thread. Nodes
 * that share one object take the parsed body from each other instead
 * (comp_share_extra), so the text is written once per object. */
static body_text *body_key(json_object *jb) {
    const char *key = json_object_to_json_string_ext(jb, JSON_C_TO_STRING_PLAIN);
    size_t len = key ? strlen(key) : 0;
    body_text *k = key ? tg_malloc(sizeof *k + len + 1) : NULL;
    if (!k) return NULL;
    k->hash = fnv1a(key);
    memcpy(k->text, key, len + 1);
    return k;
}

static int comp_parse_attrs(tg_node *n, tg_ctx *ctx) {
    json_object *jb;
    tg_graph *g = NULL;
    comp_body *b = NULL;
    int rc = TG_OK;
    comp_parsed *p = NULL;
    if (!n->attrs || !json_object_object_get_ex(n->attrs, "body", &jb))
        return tg_errorf(ctx, TG_ELOAD, "attrs.body: missing (a body of elementwise ops)");
    if (!(b = tg_calloc(1, sizeof *b))) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    b->mode = -1;
    body_text *bt = body_key(jb);
    const char *key = bt ? bt->text : NULL;
    uint64_t h = bt ? bt->hash : 0;
    if (key && (b->parsed = parsed_get(key, h))) {
        b->fg = b->parsed->fg;
        goto check_node;
    }
    if (!(g = tg_body_load(jb, "attrs.body", ctx))) {
        rc = ctx ? ctx->status : TG_ELOAD;
        goto fail;
    }
    for (int i = 0; i < g->nnodes; i++) {
        tg_node *nd = g->nodes[i];
        char desc[256]; /* (written only for a message) */
        if (!(nd->op->flags & TG_OPF_ELEMWISE)) {
            tg_node_describe(nd, desc, sizeof desc);
            rc = tg_errorf(ctx, TG_ELOAD, "attrs.body: %s: %s is not an elementwise op", desc,
                           nd->op->name);
            goto fail;
        }
        if (nd->inplace) {
            tg_node_describe(nd, desc, sizeof desc);
            rc = tg_errorf(ctx, TG_ELOAD, "attrs.body: %s: inplace has no meaning in a body",
                           desc);
            goto fail;
        }
        for (int k = 0; k < nd->nin + nd->nout; k++) {
            tg_var *v = k < nd->nin ? nd->inputs[k] : nd->outputs[k - nd->nin];
            if (v->type.ndim != 0 || v->kind == TG_VAR_SHARED) {
                char ts[160];
                tg_node_describe(nd, desc, sizeof desc);
                tg_type_str(&v->type, ts, sizeof ts);
                rc = tg_errorf(ctx, TG_ELOAD,
                               "attrs.body: %s: '%s' is %s%s; a body works on scalars (shape [])",
                               desc, v->id, v->kind == TG_VAR_SHARED ? "shared " : "", ts);
                goto fail;
            }
        }
    }
    for (int i = 0; i < g->funcs[0].nin; i++)
        if (g->funcs[0].inputs[i]->type.ndim != 0) {
            rc = tg_errorf(ctx, TG_ELOAD, "attrs.body.inputs[%d]: '%s' must be a scalar (shape [])",
                           i, g->funcs[0].inputs[i]->id);
            goto fail;
        }
    for (int i = 0; i < g->funcs[0].nout; i++)
        if (g->funcs[0].outputs[i]->type.ndim != 0) {
            rc = tg_errorf(ctx, TG_ELOAD, "attrs.body.outputs[%d]: '%s' must be a scalar", i,
                           g->funcs[0].outputs[i]->id);
            goto fail;
        }
    if (!(b->fg = tg_fgraph_from_decl(g, &g->funcs[0], ctx))) {
        rc = ctx ? ctx->status : TG_ELOAD;
        goto fail;
    }
    if (b->fg->nin + b->fg->nout > TG_COMPOSITE_MAX_IO) {
        rc = tg_errorf(ctx, TG_ELOAD, "attrs.body: more than %d inputs and outputs",
                       TG_COMPOSITE_MAX_IO);
        goto fail;
    }
    bool computed = true;
    for (int k = 0; k < b->fg->nout && computed; k++) {
        const tg_node *o = b->fg->outputs[k]->owner;
        computed = o && strcmp(o->op->name, "identity");
    }
    if (key) {
        if (!(p = tg_calloc(1, sizeof *p)) || !(p->key = tg_strdup(key))) {
            if (p) tg_free(p);
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto fail;
        }
        p->hash = h;
        p->fg = b->fg;
        p->computed_outputs = computed;
        b->parsed = parsed_put(p); /* takes p (or frees it for an equal one) */
        b->fg = b->parsed->fg;
    } else {
        /* No key (out of memory in json-c): a body of its own. */
        if (!(p = tg_calloc(1, sizeof *p))) {
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto fail;
        }
        p->refs = 1;
        p->fg = b->fg;
        p->computed_outputs = computed;
        p->hash = 0;
        p->key = NULL;
        b->parsed = p;
    }
check_node:
    if (n->nout != b->fg->nout) {
        rc = tg_errorf(ctx, TG_ELOAD, "outputs: the body has %d output%s, the node lists %d",
                       b->fg->nout, b->fg->nout == 1 ? "" : "s", n->nout);
        goto fail;
    }
    tg_graph_free(g);
    tg_free(bt);
    n->a.extra = b;
    return TG_OK;
fail:
    tg_graph_free(g);
    tg_free(bt);
    if (b) {
        if (b->parsed)
            parsed_release(b->parsed);
        else
            tg_fgraph_free(b->fg);
        tg_free(b);
    }
    return rc;
}

/* c's body from n's, whose attrs object c shares (a clone; a restored
 * node whose attrs text an earlier one had): what comp_parse_attrs would
 * find, without writing the body out as text again (157 composites of a
 * 64-node body: a third of restoring the 10,000-node chain). */
static int comp_share_extra(tg_node *c, const tg_node *n, tg_ctx *ctx) {
    const comp_body *src = n->a.extra;
    if (!src || !src->parsed || c->attrs != n->attrs) return comp_parse_attrs(c, ctx);
    if (c->nout != src->fg->nout)
        return tg_errorf(ctx, TG_ELOAD, "outputs: the body has %d output%s, the node lists %d",
                         src->fg->nout, src->fg->nout == 1 ? "" : "s", c->nout);
    comp_body *b = tg_calloc(1, sizeof *b);
    if (!b) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    b->mode = -1;
    pthread_mutex_lock(&parsed_lock);
    src->parsed->refs++;
    pthread_mutex_unlock(&parsed_lock);
    b->parsed = src->parsed;
    b->fg = src->fg;
    c->a.extra = b;
    return TG_OK;
}

/* ---- types ---- */

static int comp_infer(tg_node *n, tg_ctx *ctx) {
    comp_body *b = n->a.extra;
    tg_fgraph *fg = b->fg;
    int rc;
    if (n->nin != fg->nin)
        return tg_errorf(ctx, TG_ELOAD, "inputs: the body takes %d input%s, the node gives %d",
                         fg->nin, fg->nin == 1 ? "" : "s", n->nin);
    for (int i = 0; i < n->nin; i++) {
        tg_dtype want = fg->inputs[i]->type.dtype;
        if (n->inputs[i]->weak && (rc = tg_weak_take(n, i, want, ctx))) return rc;
        if (n->inputs[i]->type.dtype != want)
            return tg_errorf(ctx, TG_ETYPE,
                             "inputs[%d] '%s': expected %s (the body's input '%s'), got %s", i,
                             tg_var_label(n->inputs[i]), tg_dtype_name(want), fg->inputs[i]->id,
                             tg_dtype_name(n->inputs[i]->type.dtype));
    }
    tg_type t;
    if ((rc = tg_infer_broadcast(n, 0, n->nin, &t, ctx))) return rc;
    for (int k = 0; k < n->nout; k++)
        tg_set_out_type(n, k, fg->outputs[k]->type.dtype, t.ndim, t.shape);
    return TG_OK;
}

/* ---- running ---- */

/* The interpreter's state for one run. */
typedef struct interp {
    const tg_node *n;
    tg_fgraph *fg;
    int nout, nin;
    tg_array *hdr;    /* nin block headers over the inputs */
    tg_array **owned; /* per body variable: node results (reused) */
    tg_array **cur;   /* per body variable: its current block value */
    tg_array **args;  /* scratch for one node's inputs */
    tg_ctx *ctx;
    int rc;
    int failed; /* the body node whose op failed (index in fg->nodes) */
    int64_t at, fail_at; /* the element the row given starts at (row * len +
                            offset), and the block where the op failed */
} interp;

static void interp_rows(int64_t n, char **p, const int64_t *s, void *ud) {
    interp *I = ud;
    tg_fgraph *fg = I->fg;
    for (int64_t off = 0; off < n && !I->rc; off += TG_COMPOSITE_BLOCK) {
        int64_t m = n - off < TG_COMPOSITE_BLOCK ? n - off : TG_COMPOSITE_BLOCK;
        for (int i = 0; i < I->nin; i++) {
            tg_array *h = &I->hdr[i];
            h->dtype = fg->inputs[i]->type.dtype;
            h->ndim = 1;
            h->shape[0] = m;
            h->strides[0] = s[I->nout + i];
            h->data = p[I->nout + i] + off * s[I->nout + i];
            h->buf = NULL;
            I->cur[fg->inputs[i]->index] = h;
        }
        for (int j = 0; j < fg->nnodes && !I->rc; j++) {
            tg_node *nd = fg->nodes[j];
            for (int k = 0; k < nd->nin; k++) {
                tg_var *v = nd->inputs[k];
                I->args[k] = v->kind == TG_VAR_CONSTANT ? v->value : I->cur[v->index];
            }
            int oi = nd->outputs[0]->index;
            if (!strcmp(nd->op->name, "identity")) {
                /* identity returns a reference to its input: alias it. */
                I->cur[oi] = I->args[0];
                continue;
            }
            if ((I->rc = nd->op->run(nd, I->args, &I->owned[oi], I->ctx))) {
                I->failed = j;
                I->fail_at = I->at + off;
                break;
            }
            I->cur[oi] = I->owned[oi];
        }
        if (I->rc) break;
        /* Output 0 last: it may overwrite an input in place, which the
         * other outputs' values may still be (an identity's). */
        for (int k = I->nout - 1; k >= 0; k--) {
            tg_var *v = fg->outputs[k];
            const tg_array *src = v->kind == TG_VAR_CONSTANT ? v->value : I->cur[v->index];
            tg_cast_strided(v->type.dtype, p[k] + off * s[k], s[k], src->dtype, src->data,
                            src->ndim ? src->strides[0] : 0, m);
        }
    }
}

/* The broadcast index space as rows: adjacent axes merged where every
 * operand steps through them as through one (contiguous runs, and axes
 * broadcast together: x (600, 8, 24, 24) + b (1, 8, 1, 1) is 4,800 rows
 * of 576, b constant along each, not 115,200 rows of 24), then
 * fn(n, p, s, ud) once per row, with s the operands' strides along it. */
typedef void (*rows_fn)(int64_t n, char **p, const int64_t *s, void *ud);
typedef struct row_plan {
    int nops, nd;
    int64_t shape[TG_MAX_NDIM];
    int64_t st[TG_COMPOSITE_MAX_IO][TG_MAX_NDIM];
    char *base[TG_COMPOSITE_MAX_IO];
    int64_t total, rows, len; /* len: elements in a row (shape[nd - 1]) */
} row_plan;

static void plan_rows(int nops, tg_array *const *ops, int ndim, const int64_t *shape, row_plan *P) {
    P->nops = nops;
    P->total = tg_shape_size(ndim, shape);
    int64_t st[TG_COMPOSITE_MAX_IO][TG_MAX_NDIM];
    for (int k = 0; k < nops; k++) {
        const tg_array *a = ops[k];
        int off = ndim - a->ndim;
        for (int d = 0; d < ndim; d++)
            st[k][d] = d < off || a->shape[d - off] != shape[d] ? 0 : a->strides[d - off];
        P->base[k] = a->data;
    }
    /* merge axis d into the axis kept before it when, for every operand,
     * stepping the kept one is stepping d shape[d] times; length-1 axes go */
    int nd = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 1 && ndim > 1) continue;
        bool merge = nd > 0;
        for (int k = 0; k < nops && merge; k++) merge = P->st[k][nd - 1] == st[k][d] * shape[d];
        if (merge) {
            P->shape[nd - 1] *= shape[d];
            for (int k = 0; k < nops; k++) P->st[k][nd - 1] = st[k][d];
        } else {
            P->shape[nd] = shape[d];
            for (int k = 0; k < nops; k++) P->st[k][nd] = st[k][d];
            nd++;
        }
    }
    if (nd == 0) { /* every length 1 */
        P->shape[0] = 1;
        for (int k = 0; k < nops; k++) P->st[k][0] = 0;
        nd = 1;
    }
    P->nd = nd;
    P->len = P->shape[nd - 1];
    P->rows = P->len ? P->total / P->len : 0;
}

/* Row r's operand pointers. */
static void row_ptrs(const row_plan *P, int64_t r, char **p) {
    for (int k = 0; k < P->nops; k++) p[k] = P->base[k];
    for (int d = P->nd - 2; d >= 0 && r; d--) {
        int64_t i = r % P->shape[d];
        r /= P->shape[d];
        for (int k = 0; k < P->nops; k++) p[k] += i * P->st[k][d];
    }
}

/* fn on every row; with threads taking whole rows when `par` (fn may run
 * concurrently: the compiled kernels, not the interpreter) and there is
 * enough work in rows too short for the kernel's own threads. */
static void drive_plan(const row_plan *P, rows_fn fn, void *ud, bool par) {
    if (P->total == 0) return;
    int64_t s[TG_COMPOSITE_MAX_IO];
    for (int k = 0; k < P->nops; k++) s[k] = P->st[k][P->nd - 1];
    int nth = par && P->rows > 1 && P->len < TG_COMPOSITE_PAR_MIN && P->total >= TG_COMPOSITE_PAR_MIN
                  ? omp_get_max_threads()
                  : 1;
    TG_PAR_FOR(nth, r, P->rows, {
        char *p[TG_COMPOSITE_MAX_IO];
        row_ptrs(P, r, p);
        fn(P->len, p, s, ud);
    });
}

static void kernel_rows(int64_t n, char **p, const int64_t *s, void *ud) {
    tg_kernel_fn fn = *(tg_kernel_fn *)ud;
    fn(n, p, s);
}

/* Decide once per node: the compiled kernel, or the interpreter (with one
 * warning per process when a compiler was wanted and failed). */
static pthread_mutex_t decide_lock = PTHREAD_MUTEX_INITIALIZER;

/* The compiled kernel of src, or NULL (one warning per process when a
 * compiler was wanted and failed). */
static tg_kernel_fn kernel_of(const char *src) {
    const char *why = NULL;
    tg_kernel_fn fn = tg_kcache_get(src, &why);
    static int warned; /* (threads ask at once: kern_fn lets decide_lock go) */
    if (!fn && why && !__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
        fprintf(stderr, "tg: warning: composite kernels run in the interpreter: %s\n", why);
    return fn;
}

/* Bit i for each 0-d input i: read once per call by the kernel. */
static uint64_t zero_d_inputs(const tg_node *n) {
    uint64_t m = 0;
    for (int i = 0; i < n->nin; i++)
        if (n->inputs[i]->type.ndim == 0) m |= (uint64_t)1 << i;
    return m;
}

/* kernel_of(src), called under decide_lock, which it lets go while the
 * cache answers: a compile takes a second or more, and every call of a
 * broadcast kernel takes the lock (row_kernel), so that functions
 * already running on other threads waited for another's first call to
 * compile. Two threads asking at once both ask the cache, which compiles
 * once and gives both the same kernel. */
static tg_kernel_fn kernel_of_unlocked(const char *src) {
    pthread_mutex_unlock(&decide_lock);
    tg_kernel_fn fn = kernel_of(src);
    pthread_mutex_lock(&decide_lock);
    return fn;
}

/* The kernel of body kernel k, asked of the cache again when it was
 * cleared since (tgc cache clear); under decide_lock, let go while the
 * cache answers (the kernel's source stays as it is meanwhile: made once,
 * kept for the body's life). */
static tg_kernel_fn kern_fn(comp_parsed *p, int k) {
    unsigned long gen = tg_kcache_generation();
    if (!p->kern[k].tried || p->kern[k].gen != gen) {
        tg_kernel_fn fn = kernel_of_unlocked(p->kern[k].src);
        p->kern[k].fn = fn;
        p->kern[k].tried = true;
        p->kern[k].gen = gen;
    }
    return p->kern[k].fn;
}

/* The body kernel (the index in p->kern) that reads the inputs of
 * `scalars` once per call, its source made when missing and the body
 * has room; -1 when it has none (*own: the source made, the caller's to
 * tg_free, or NULL when the body cannot be compiled; *oom, when oom is
 * not NULL, whether that was for want of memory). Under decide_lock. */
static int row_src(comp_body *b, uint64_t scalars, char **own, bool *oom) {
    comp_parsed *p = b->parsed;
    *own = NULL;
    int k = 0;
    while (p && k < p->nkern && p->kern[k].scalars != scalars) k++;
    if (p && k < p->nkern) return k;
    char *src = gen_source(b->fg, scalars, oom);
    if (src && p && p->nkern < KERNS) {
        k = p->nkern++;
        p->kern[k].scalars = scalars;
        p->kern[k].src = src;
        p->kern[k].fn = NULL;
        p->kern[k].tried = false;
        return k;
    }
    *own = src;
    return -1;
}

/* The kernel source of n (b->src; NULL: the interpreter only), made once
 * per node, when its types are known: specialised for its 0-d inputs,
 * and shared by the body's nodes with the same 0-d inputs (where the
 * body has room): the index of that body kernel, or -1 when b->src is
 * the node's own. oom not NULL (the prefetch): when the source cannot
 * be made for want of memory, *oom is set and nothing is decided (the
 * next try, or the first run, makes it again). Under decide_lock. */
static int decide_src(const tg_node *n, comp_body *b, bool *oom) {
    comp_parsed *p = b->parsed;
    int k = 0;
    if (b->src_ready) {
        while (p && b->src_shared && k < p->nkern && p->kern[k].src != b->src) k++;
        return p && b->src_shared && k < p->nkern ? k : -1;
    }
    b->src_ready = true;
    uint64_t scalars = zero_d_inputs(n);
    while (p && k < p->nkern && p->kern[k].scalars != scalars) k++;
    if (p && k < p->nkern) { /* another node with this body decided */
        if (!b->src_shared) tg_free(b->src);
        b->src = p->kern[k].src;
        b->src_shared = true;
        return k;
    }
    if (scalars || !b->src) {
        char *src = gen_source(b->fg, scalars, oom);
        if (oom && *oom) {
            b->src_ready = false;
            return -1;
        }
        if (src) {
            if (!b->src_shared) tg_free(b->src);
            b->src = src;
            b->src_shared = false;
        }
    }
    if (p && p->nkern < KERNS && b->src && !b->src_shared) {
        k = p->nkern++;
        p->kern[k].scalars = scalars;
        p->kern[k].src = b->src;
        p->kern[k].fn = NULL;
        p->kern[k].tried = false;
        b->src_shared = true;
        return k;
    }
    return -1;
}

static void comp_decide(const tg_node *n, comp_body *b) {
    if (__atomic_load_n(&b->mode, __ATOMIC_ACQUIRE) >= 0) return;
    /* Threads running the same node before it is decided each ask the
     * kernel cache (which compiles once), the lock let go meanwhile
     * (kern_fn); the first answer decides. */
    pthread_mutex_lock(&decide_lock);
    if (__atomic_load_n(&b->mode, __ATOMIC_ACQUIRE) < 0) {
        int k = decide_src(n, b, NULL);
        comp_parsed *p = b->parsed;
        tg_kernel_fn fn = NULL;
        /* (b->src stays: decide_src makes it once) */
        if (b->src && !interp_forced()) fn = k < 0 ? kernel_of_unlocked(b->src) : kern_fn(p, k);
        if (__atomic_load_n(&b->mode, __ATOMIC_ACQUIRE) < 0) {
            b->fn = fn;
            __atomic_store_n(&b->mode, fn ? 1 : 0, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&decide_lock);
}

extern const tg_op tg_op_composite;

int tg_composite_node_mode(const tg_node *n) {
    const comp_body *b = n->a.extra;
    return b ? __atomic_load_n(&b->mode, __ATOMIC_ACQUIRE) : -1;
}

const char *tg_composite_node_source(const tg_node *n) {
    comp_body *b = n->a.extra;
    if (b && !b->src && !b->src_ready && __atomic_load_n(&b->mode, __ATOMIC_ACQUIRE) < 0)
        b->src = gen_source(b->fg, 0, NULL); /* before the first run decides */
    return b ? b->src : NULL;
}

bool tg_composite_places_any_output(const tg_node *n) {
    const comp_body *b = n->a.extra;
    return n->nout == 1 || (b && b->parsed && b->parsed->computed_outputs);
}

const tg_fgraph *tg_composite_node_body(const tg_node *n) {
    const comp_body *b = n && n->op == &tg_op_composite ? n->a.extra : NULL;
    return b ? b->fg : NULL;
}

const char *tg_composite_ctype(tg_dtype dt) { return ctype_of(dt); }

bool tg_composite_body_emit(tg_str *s, const tg_fgraph *fg) { return emit_body(s, fg, false, false) && !s->oom; }

bool tg_composite_body_emit_half(tg_str *s, const tg_fgraph *fg) { return emit_body(s, fg, true, false) && !s->oom; }

void *tg_composite_node_dev_get(const tg_node *n) {
    comp_body *b = n->op == &tg_op_composite ? n->a.extra : NULL;
    return b ? __atomic_load_n(&b->dev, __ATOMIC_ACQUIRE) : NULL;
}

void tg_composite_node_dev_set(const tg_node *n, void *k) {
    comp_body *b = n->op == &tg_op_composite ? n->a.extra : NULL;
    if (b) __atomic_store_n(&b->dev, k, __ATOMIC_RELEASE);
}

/* The kernel of b with the inputs in `extra` read once per call as well
 * as the 0-d ones, or NULL (b's own kernel then runs). Kept with the
 * body's kernels (one per mask, KERNS at most) and, for the last mask
 * asked, with the node. */
static tg_kernel_fn row_kernel(const tg_node *n, comp_body *b, uint64_t extra) {
    uint64_t scalars = extra | zero_d_inputs(n);
    pthread_mutex_lock(&decide_lock); /* uncontended: tens of ns beside a broadcast kernel */
    unsigned long gen = tg_kcache_generation();
    if (b->row_ready && b->row_mask == scalars && b->row_gen == gen) {
        tg_kernel_fn fn = b->row_fn;
        pthread_mutex_unlock(&decide_lock);
        return fn;
    }
    tg_kernel_fn fn = NULL;
    char *own;
    int k = row_src(b, scalars, &own, NULL);
    if (k >= 0) {
        fn = kern_fn(b->parsed, k); /* (the lock let go while it compiles) */
    } else if (own) {
        fn = kernel_of_unlocked(own); /* no room among the body's kernels */
        tg_free(own);
    }
    b->row_fn = fn;
    b->row_mask = scalars;
    b->row_gen = gen;
    b->row_ready = true;
    pthread_mutex_unlock(&decide_lock);
    return fn;
}

/* The inputs of n (bit i) constant along the rows of P, which a kernel of
 * their own reads once per row (row_kernel). */
static uint64_t row_consts(const tg_node *n, const row_plan *P, tg_array *const *in) {
    uint64_t rowc = 0;
    if (P->len > 1)
        for (int i = 0; i < n->nin; i++)
            if (in[i]->ndim > 0 && n->inputs[i]->type.ndim > 0 && P->st[n->nout + i][P->nd - 1] == 0)
                rowc |= (uint64_t)1 << i;
    return rowc;
}

/* What row_consts will most likely say at n's runs, from the inputs'
 * static types: the inputs contiguous, a length unknown until run time
 * (a batch) that of the other inputs on its axis, else more than 1.
 * False when the types do not broadcast or have no elements. (A guess
 * that turns out wrong costs a compile at the first run, as without it.) */
static bool row_consts_static(const tg_node *n, uint64_t *rowc) {
    int nin = n->nin, nout = n->nout, ndim = 0;
    if (nin + nout > TG_COMPOSITE_MAX_IO) return false;
    /* the known lengths, axes aligned from the right */
    int64_t known[TG_MAX_NDIM] = {0};
    for (int i = 0; i < nin; i++) {
        const tg_type *t = &n->inputs[i]->type;
        if (t->ndim > ndim) ndim = t->ndim;
        for (int d = 0; d < t->ndim; d++) {
            int64_t *kn = &known[TG_MAX_NDIM - t->ndim + d];
            if (t->shape[d] > *kn) *kn = t->shape[d];
        }
    }
    tg_array arr[TG_COMPOSITE_MAX_IO], *ops[TG_COMPOSITE_MAX_IO];
    int nds[TG_COMPOSITE_MAX_IO];
    const int64_t *shs[TG_COMPOSITE_MAX_IO];
    for (int i = 0; i < nin; i++) {
        const tg_type *t = &n->inputs[i]->type;
        tg_array *a = &arr[nout + i];
        memset(a, 0, sizeof *a);
        a->dtype = t->dtype;
        a->ndim = t->ndim;
        for (int d = 0; d < t->ndim; d++) {
            int64_t kn = known[TG_MAX_NDIM - t->ndim + d];
            a->shape[d] = t->shape[d] >= 0 ? t->shape[d] : kn > 1 ? kn : 2;
        }
        tg_strides_contiguous(a->dtype, a->ndim, a->shape, a->strides);
        ops[nout + i] = a;
        nds[i] = a->ndim;
        shs[i] = a->shape;
    }
    int64_t shape[TG_MAX_NDIM];
    if (tg_broadcast_shapes(nin, nds, shs, &ndim, shape, NULL) || tg_shape_size(ndim, shape) == 0) return false;
    for (int k = 0; k < nout; k++) {
        tg_array *a = &arr[k];
        memset(a, 0, sizeof *a);
        a->dtype = n->outputs[k]->type.dtype;
        a->ndim = ndim;
        memcpy(a->shape, shape, sizeof *shape * (size_t)ndim);
        tg_strides_contiguous(a->dtype, a->ndim, a->shape, a->strides);
        ops[k] = a;
    }
    row_plan P;
    plan_rows(nout + nin, ops, ndim, shape, &P);
    *rowc = row_consts(n, &P, ops + nout);
    return true;
}

/* The source of the kernel n's runs will ask for (the one that reads
 * some inputs once per row, comp_run, when the static types say so;
 * else its own), decided as its run would, or NULL (none, or no room
 * among the body's kernels: made at the run); *k its index among the
 * body's kernels (-1: the node's own); *oom when a source could not be
 * made for want of memory. Under decide_lock. */
static const char *prefetch_src(const tg_node *nd, comp_body *b, int *k, bool *oom) {
    uint64_t rowc = 0;
    if (row_consts_static(nd, &rowc) && rowc) {
        comp_parsed *p = b->parsed;
        uint64_t scalars = rowc | zero_d_inputs(nd);
        int j = 0;
        while (p && j < p->nkern && p->kern[j].scalars != scalars) j++;
        *k = -1;
        if (!p || (j == p->nkern && p->nkern >= KERNS)) return NULL;
        char *own;
        *k = row_src(b, scalars, &own, oom);
        tg_free(own); /* NULL: there was room */
        return *k >= 0 ? p->kern[*k].src : NULL;
    }
    *k = decide_src(nd, b, oom);
    return b->src;
}

int tg_composite_prefetch(tg_node *const *nodes, int n, int (*next)(void *ud, int k), void *ud, tg_ctx *ctx) {
    if (n <= 0 || interp_forced()) return TG_OK;
    /* Two passes over the nodes: the first counts the kernels missing,
     * allocating nothing but the nodes' sources (which their runs would
     * make); only when two or more are missing does the second list
     * them. Nodes of one body share its kernel's source: listed once
     * per pass (mark). */
    static unsigned mark;
    const char **srcs = NULL;
    int rc = TG_OK, nmiss = 0, m = 0;
    bool oom = false;
    pthread_mutex_lock(&decide_lock);
    unsigned long gen = tg_kcache_generation();
    for (int pass = 0; pass < 2 && !oom; pass++) {
        unsigned me = ++mark;
        for (int i = next ? next(ud, 0) : 0; i < n && !oom; i = next ? next(ud, i + 1) : i + 1) {
            const tg_node *nd = nodes[i];
            comp_body *b = nd->op == &tg_op_composite ? nd->a.extra : NULL;
            if (!b || __atomic_load_n(&b->mode, __ATOMIC_ACQUIRE) >= 0 || b->row_ready) continue;
            int k;
            const char *src = prefetch_src(nd, b, &k, &oom);
            if (!src) continue;
            if (k >= 0) {
                comp_parsed *p = b->parsed;
                if ((p->kern[k].tried && p->kern[k].gen == gen) || p->kern[k].mark == me) continue;
                p->kern[k].mark = me;
            }
            int w = tg_kcache_wanted(src);
            if (w < 0) oom = true;
            else if (w && !pass) nmiss++;
            else if (w && m < nmiss) srcs[m++] = src; /* (a kernel removed meanwhile waits for its run) */
        }
        /* One kernel missing: its run compiles it, as fast. */
        if (pass || oom || nmiss < 2) break;
        if (!(srcs = tg_malloc(sizeof *srcs * (size_t)nmiss))) oom = true;
    }
    pthread_mutex_unlock(&decide_lock);
    /* The sources stay: a node's, or its body's, for the node's life,
     * and decide_src changes neither once made. */
    if (!oom && m >= 2 && tg_kcache_prefetch(srcs, m)) oom = true;
    tg_free(srcs);
    if (oom) rc = tg_errorf(ctx, TG_ENOMEM, "out of memory while compiling the function's fused kernels");
    return rc;
}

static int comp_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    comp_body *b = n->a.extra;
    tg_fgraph *fg = b->fg;
    int nin = n->nin, nout = n->nout, rc = TG_OK, ndim;
    b->failed = -1;
    int64_t shape[TG_MAX_NDIM];
    int nds[TG_COMPOSITE_MAX_IO] = {0};
    const int64_t *shs[TG_COMPOSITE_MAX_IO] = {0};
    for (int i = 0; i < nin; i++) {
        nds[i] = in[i]->ndim;
        shs[i] = in[i]->shape;
    }
    if (tg_broadcast_shapes(nin, nds, shs, &ndim, shape, NULL))
        return tg_broadcast_error((const tg_array *const *)in, nin, ctx);
    /* Outputs: an input overwritten in place (every kernel reads position
     * i of each input before it writes position i), else the previous
     * output reused; with several outputs, only under
     * tg_composite_places_any_output's rule. */
    bool place = n->inplace && (nout == 1 || b->parsed->computed_outputs);
    for (int k = 0; k < nout; k++) {
        tg_dtype od = fg->outputs[k]->type.dtype;
        int j = place ? n->inplace[k] : -1;
        if (j >= 0 && in[j]->dtype == od && in[j]->ndim == ndim &&
            tg_shape_equal(ndim, in[j]->shape, shape) && tg_array_is_contiguous(in[j]) &&
            tg_array_is_exclusive(in[j])) {
            if (out[k] != in[j]) {
                tg_array_free(out[k]);
                out[k] = tg_array_ref(in[j]);
            }
            continue;
        }
        if ((rc = tg_array_prepare(&out[k], od, ndim, shape, ctx))) return rc;
    }
    tg_array *ops[TG_COMPOSITE_MAX_IO];
    for (int k = 0; k < nout; k++) ops[k] = out[k];
    for (int i = 0; i < nin; i++) ops[nout + i] = in[i];
    row_plan P;
    plan_rows(nout + nin, ops, ndim, shape, &P);
    /* Inputs constant along the rows (a bias broadcast over an image) are
     * read once per row, as 0-d inputs are, by a kernel of their own: the
     * rest of the row then takes the contiguous, vectorised loop instead
     * of gathering. Only when that kernel is missing is the node's own
     * kernel made (one compile per node, not two). */
    uint64_t rowc = row_consts(n, &P, in);
    tg_kernel_fn fn = rowc && !interp_forced() ? row_kernel(n, b, rowc) : NULL;
    if (!fn) {
        comp_decide(n, b);
        if (b->mode == 1) fn = b->fn;
    }
    if (fn) {
        drive_plan(&P, kernel_rows, &fn, true);
        return TG_OK;
    }
    /* The interpreter: with threads from TG_COMPOSITE_PAR_MIN elements,
     * each with a state of its own (its blocks, its results, its context
     * for an error), taking whole rows when there are enough of them,
     * else a stretch of every row (in blocks). A failure is the one the
     * interpreter alone meets first: the lowest element where one thread
     * failed, and there the first body node that failed. */
    int nth = P.total >= TG_COMPOSITE_PAR_MIN && !omp_in_parallel() ? omp_get_max_threads() : 1;
    if (nth > 64) nth = 64;
    if (P.len < (int64_t)nth * TG_COMPOSITE_BLOCK && P.rows < nth) nth = 1;
    interp I1, *I = nth > 1 ? tg_calloc((size_t)nth, sizeof *I) : &I1;
    tg_ctx *tctx = nth > 1 ? tg_calloc((size_t)nth, sizeof *tctx) : NULL;
    if (!I || (nth > 1 && !tctx)) {
        if (I != &I1) tg_free(I);
        tg_free(tctx);
        return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    }
    int maxin = 1;
    for (int j = 0; j < fg->nnodes; j++)
        if (fg->nodes[j]->nin > maxin) maxin = fg->nodes[j]->nin;
    bool oom = false;
    for (int t = 0; t < nth; t++) {
        I[t] = (interp){.n = n, .fg = fg, .nout = nout, .nin = nin, .ctx = nth > 1 ? &tctx[t] : ctx,
                        .failed = -1, .fail_at = INT64_MAX};
        I[t].hdr = tg_calloc((size_t)nin + 1, sizeof *I[t].hdr);
        I[t].owned = tg_calloc((size_t)fg->nvars + 1, sizeof *I[t].owned);
        I[t].cur = tg_calloc((size_t)fg->nvars + 1, sizeof *I[t].cur);
        I[t].args = tg_calloc((size_t)maxin, sizeof *I[t].args);
        oom |= !I[t].hdr || !I[t].owned || !I[t].cur || !I[t].args;
    }
    if (oom) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
    } else if (nth == 1) {
        drive_plan(&P, interp_rows, &I[0], false); /* (one thread: where it failed does not matter) */
    } else {
        const bool by_rows = P.rows >= nth;
        const int64_t nblk = (P.len + TG_COMPOSITE_BLOCK - 1) / TG_COMPOSITE_BLOCK;
#pragma omp parallel for schedule(static) num_threads(nth)
        for (int t = 0; t < nth; t++) {
            int64_t s[TG_COMPOSITE_MAX_IO];
            for (int k = 0; k < P.nops; k++) s[k] = P.st[k][P.nd - 1];
            /* whole rows [r0, r1), or in every row the elements [e0, e1) (whole blocks) */
            const int64_t r0 = by_rows ? P.rows * t / nth : 0, r1 = by_rows ? P.rows * (t + 1) / nth : P.rows;
            const int64_t e0 = by_rows ? 0 : nblk * t / nth * TG_COMPOSITE_BLOCK;
            int64_t e1 = by_rows ? P.len : nblk * (t + 1) / nth * TG_COMPOSITE_BLOCK;
            if (e1 > P.len) e1 = P.len;
            for (int64_t r = r0; r < r1 && e0 < e1 && !I[t].rc; r++) {
                char *p[TG_COMPOSITE_MAX_IO];
                row_ptrs(&P, r, p);
                for (int k = 0; k < P.nops; k++) p[k] += e0 * s[k];
                I[t].at = r * P.len + e0;
                interp_rows(e1 - e0, p, s, &I[t]);
            }
        }
        int first = -1;
        for (int t = 0; t < nth; t++)
            if (I[t].rc && (first < 0 || I[t].fail_at < I[first].fail_at)) first = t;
        if (first >= 0) {
            if (ctx) *ctx = tctx[first];
            I[0].rc = I[first].rc;
            I[0].failed = I[first].failed;
        }
    }
    if (!oom) {
        rc = I[0].rc;
        if (rc && I[0].failed >= 0) {
            /* Body ids are t<j> for the j-th fused node (see
             * tg_composite_node_new). */
            const char *id = fg->nodes[I[0].failed]->outputs[0]->id;
            b->failed = id[0] == 't' ? atoi(id + 1) : -1;
        }
    }
    for (int t = 0; t < nth; t++) {
        if (I[t].owned)
            for (int i = 0; i < fg->nvars; i++) tg_array_free(I[t].owned[i]);
        tg_free(I[t].hdr);
        tg_free(I[t].owned);
        tg_free(I[t].cur);
        tg_free(I[t].args);
    }
    if (I != &I1) tg_free(I);
    tg_free(tctx);
    return rc;
}

static void comp_cost(const tg_node *n, tg_array *const *in, tg_array *const *out, double *flops,
                      double *bytes) {
    const comp_body *b = n->a.extra;
    double sz = (double)tg_array_size_inline(out[0]), by = 0;
    for (int k = 0; k < n->nout; k++)
        by += (double)tg_array_size_inline(out[k]) * (double)tg_dtype_size(out[k]->dtype);
    for (int i = 0; i < n->nin; i++)
        by += (double)tg_array_size_inline(in[i]) * (double)tg_dtype_size(in[i]->dtype);
    /* Each body op at its own weight per element, as the same ops
     * unfused count (a fused exp, tanh, add was 3 flops an element where
     * the three nodes count 21). */
    double per = 0;
    for (int j = 0; j < b->fg->nnodes; j++) per += tg_elemwise_flops(b->fg->nodes[j]);
    *flops = sz * per;
    *bytes = by;
}

/* ---- gradient: the body expanded into elementwise nodes ---- */

static int comp_grad(tg_gb *gb, tg_node *n, tg_var *const *gout, tg_var **gin) {
    comp_body *b = n->a.extra;
    tg_fgraph *fg = b->fg;
    int rc = TG_OK, nv = fg->nvars;
    tg_var **val = tg_calloc((size_t)nv + 1, sizeof *val);  /* outer var per body var */
    tg_var **grad = tg_calloc((size_t)nv + 1, sizeof *grad); /* its gradient */
    tg_node **clone = tg_calloc((size_t)fg->nnodes + 1, sizeof *clone);
    tg_var *ins[16], *gi[16];
    if (!val || !grad || !clone) {
        rc = tg_errorf(gb->ctx, TG_ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < fg->nin; i++) val[fg->inputs[i]->index] = n->inputs[i];
    for (int i = 0; i < nv; i++) {
        tg_var *v = fg->vars[i];
        if (v->kind == TG_VAR_CONSTANT &&
            !(val[i] = tg_gb_const(gb, v->type.dtype, tg_load_f64(v->value->dtype, v->value->data)))) {
            rc = gb->ctx ? gb->ctx->status : TG_ENOMEM;
            goto done;
        }
    }
    for (int j = 0; j < fg->nnodes; j++) {
        tg_node *nd = fg->nodes[j];
        if (nd->nin > 16) {
            rc = tg_errorf(gb->ctx, TG_EUNSUPPORTED, "composite: a body node with more than 16 inputs");
            goto done;
        }
        for (int k = 0; k < nd->nin; k++) ins[k] = val[nd->inputs[k]->index];
        /* The body is every function's with this body text, in any
         * thread: its attrs are written out (into their own print
         * buffer) under the lock, as a copy. */
        char *at = NULL;
        if (nd->attrs) {
            pthread_mutex_lock(&parsed_lock);
            const char *t = json_object_to_json_string(nd->attrs);
            at = t ? tg_strdup(t) : NULL;
            pthread_mutex_unlock(&parsed_lock);
            if (!at) {
                rc = tg_errorf(gb->ctx, TG_ENOMEM, "out of memory");
                goto done;
            }
        }
        tg_var *o = tg_gb_op(gb, nd->op->name, nd->nin, ins, at);
        tg_free(at);
        if (!o) {
            rc = gb->ctx ? gb->ctx->status : TG_ENOMEM;
            goto done;
        }
        val[nd->outputs[0]->index] = o;
        clone[j] = o->owner;
    }
    for (int k = 0; k < fg->nout; k++) {
        if (!gout[k]) continue;
        int vi = fg->outputs[k]->index;
        /* Every output has the shape of all the inputs broadcast; the
         * expanded node that makes it may have a smaller one (tanh(b) of a
         * b broadcast against a), which the rules expect of its gradient. */
        tg_var *go = tg_gb_sum_to(gb, gout[k], val[vi]);
        grad[vi] = grad[vi] && go ? tg_gb_op2(gb, "add", grad[vi], go) : go;
        if (!grad[vi]) {
            rc = gb->ctx ? gb->ctx->status : TG_ENOMEM;
            goto done;
        }
    }
    for (int j = fg->nnodes - 1; j >= 0; j--) {
        tg_node *nd = fg->nodes[j], *c = clone[j];
        tg_var *g = grad[nd->outputs[0]->index];
        if (!g || (c->op->flags & TG_OPF_NONDIFF)) continue;
        for (int k = 0; k < c->nin; k++) gi[k] = NULL;
        if (!c->op->grad) {
            rc = tg_errorf(gb->ctx, TG_EUNSUPPORTED, "composite: %s has no gradient rule", c->op->name);
            goto done;
        }
        if ((rc = c->op->grad(gb, c, &g, gi))) goto done;
        for (int k = 0; k < c->nin; k++) {
            if (!gi[k]) continue;
            int vi = nd->inputs[k]->index;
            grad[vi] = grad[vi] ? tg_gb_op2(gb, "add", grad[vi], gi[k]) : gi[k];
            if (!grad[vi]) {
                rc = gb->ctx ? gb->ctx->status : TG_ENOMEM;
                goto done;
            }
        }
    }
    for (int i = 0; i < fg->nin; i++) gin[i] = grad[fg->inputs[i]->index];
done:
    tg_free(val);
    tg_free(grad);
    tg_free(clone);
    return rc;
}

static const char *const COMP_KEYS[] = {"body", NULL};

const tg_op tg_op_composite = {
    .name = "composite",
    .nin_min = 1,
    .nin_max = TG_COMPOSITE_MAX_IO - 1,
    .nout = -1,
    .flags = TG_OPF_INPLACE_ANY_OUTPUT,
    .attr_keys = COMP_KEYS,
    .parse_attrs = comp_parse_attrs,
    .share_extra = comp_share_extra,
    .infer = comp_infer,
    .run = comp_run,
    .cost = comp_cost,
    .view_of = -1,
    .inplace_inputs = ~0u,
    .free_extra = comp_free_extra,
    .grad = comp_grad,
};

/* ---- building a composite from fused nodes ---- */

static int find_var(tg_var *const *vs, int n, const tg_var *v) {
    for (int i = 0; i < n; i++)
        if (vs[i] == v) return i;
    return -1;
}

static json_object *scalar_type(tg_dtype dt) {
    json_object *t = json_object_new_object();
    if (!t) return NULL;
    json_object_object_add(t, "dtype", json_object_new_string(tg_dtype_name(dt)));
    json_object_object_add(t, "shape", json_object_new_array());
    return t;
}

/* ---- bodies built before, by structure ----
 *
 * A graph repeats the same fused pattern many times (every layer, every
 * step of an unrolled loop). Building the body's JSON and looking it up
 * by its text cost more than the rest of the optimizer together, so the
 * fusion pass's groups are first looked up by a compact signature of
 * their structure (ops, attrs, where each operand comes from, input
 * dtypes, constants' bits); a hit takes the body's parsed form and a copy
 * of the node's attrs ({"body": ...}). The table's attrs are its own
 * copy, read (copied) only under sig_lock: json-c's objects are not
 * thread-safe (their reference count is a plain add, and writing one out
 * as text writes into the object), and functions built in different
 * threads must share none. A fusion pass copies each entry once
 * (tg_composite_memo): its nodes with one signature share that copy, as
 * the nodes of a restored function share one attrs object per text. The
 * table holds references to the parsed bodies, so an entry's pointers
 * stay valid.
 *
 * Entries whose body no node holds any more go when the table has
 * doubled since it was last swept (sig_sweep): it kept every group ever
 * fused, up to 4,096, with a copy of its attrs and its parsed body, after
 * the functions that made them were freed (a process compiling graphs
 * that differ by a constant, a learning-rate sweep, grew by 25-300 KB a
 * compile, to 650 MB). A pass's memo keys entries by a number never
 * reused, not by address, so that an entry swept and another made at
 * its address cannot hand the pass the first one's attrs. */
typedef struct sig_entry {
    char *sig;
    uint64_t hash;
    uint64_t id;        /* the memo's key (1, 2, ...) */
    json_object *attrs; /* the table's own, never handed out */
    comp_parsed *parsed;
    struct sig_entry *next;
} sig_entry;
enum { SIG_BUCKETS = 1024, SIG_MAX = 4096, SIG_SWEEP_MIN = 64 };
static sig_entry *sig_table[SIG_BUCKETS];
static int sig_count, sig_sweep_at = SIG_SWEEP_MIN, sig_full_misses;
static uint64_t sig_ids;
static pthread_mutex_t sig_lock = PTHREAD_MUTEX_INITIALIZER;

/* One fusion pass's attrs by table entry: references, all to objects of
 * the function being optimized. */
struct tg_composite_memo {
    tg_ptrmap map; /* sig_entry id -> json_object */
};

tg_composite_memo *tg_composite_memo_new(void) { return tg_calloc(1, sizeof(tg_composite_memo)); }

void tg_composite_memo_free(tg_composite_memo *m) {
    if (!m) return;
    for (size_t i = 0; i < m->map.cap; i++)
        if (m->map.key[i]) json_object_put(m->map.val[i]);
    tg_ptrmap_free(&m->map);
    tg_free(m);
}

static json_object *memo_get(const tg_composite_memo *m, const sig_entry *e) {
    return m ? tg_ptrmap_get(&m->map, (const void *)(uintptr_t)e->id) : NULL;
}

/* Remember o (a new reference) for e; nothing when out of memory (the
 * next hit copies the entry again). */
static void memo_put(tg_composite_memo *m, const sig_entry *e, json_object *o) {
    const void *k = (const void *)(uintptr_t)e->id;
    if (!m || tg_ptrmap_get(&m->map, k)) return;
    if (tg_ptrmap_put(&m->map, k, o) == TG_OK) json_object_get(o);
}

/* Drop the entries whose parsed body only the table holds (no node of
 * any function reads it; a body among parsed_put's recent ones is held
 * there too and stays). A body that another thread takes meanwhile
 * lives on by its count: dropping an entry is always safe, and a group
 * seen again makes it again. Under sig_lock. */
static void sig_sweep(void) {
    for (int b = 0; b < SIG_BUCKETS; b++)
        for (sig_entry **at = &sig_table[b]; *at;) {
            sig_entry *e = *at;
            pthread_mutex_lock(&parsed_lock);
            bool unused = e->parsed->refs == 1;
            pthread_mutex_unlock(&parsed_lock);
            if (!unused) {
                at = &e->next;
                continue;
            }
            *at = e->next;
            sig_count--;
            parsed_release(e->parsed);
            json_object_put(e->attrs);
            tg_free(e->sig);
            tg_free(e);
        }
}

int tg_composite_sig_entries(void) {
    pthread_mutex_lock(&sig_lock);
    int n = sig_count;
    pthread_mutex_unlock(&sig_lock);
    return n;
}

static void sig_add_int(tg_str *s, char tag, long v) {
    char buf[24];
    int k = 0;
    unsigned long u = v < 0 ? (unsigned long)-v : (unsigned long)v;
    do buf[k++] = (char)('0' + u % 10);
    while ((u /= 10) && k < 22);
    if (v < 0) buf[k++] = '-';
    char out[26];
    int m = 0;
    out[m++] = tag;
    while (k) out[m++] = buf[--k];
    tg_str_add(s, out, (size_t)m);
}

/* The signature, or NULL when the group is not regular (then the full
 * path builds and checks it, and reports what is wrong). */
static char *group_signature(tg_node *const *nodes, int nnodes, tg_var *const *inputs, int nin,
                             tg_var *const *outputs, int nout) {
    /* (room for a typical group's text at once: growing it from 64 bytes
     * was three reallocations a group) */
    tg_str s = {.s = tg_malloc(512), .cap = 512};
    if (!s.s) return NULL;
    s.s[0] = 0;
    for (int i = 0; i < nin; i++) sig_add_int(&s, 'x', inputs[i]->type.dtype);
    for (int j = 0; j < nnodes; j++) {
        const tg_node *nd = nodes[j];
        if (!(nd->op->flags & TG_OPF_ELEMWISE) || nd->nout != 1) goto irregular;
        tg_str_add(&s, "|", 1);
        tg_str_add(&s, nd->op->name, strlen(nd->op->name));
        if (nd->attrs) {
            const char *a = json_object_to_json_string_ext(nd->attrs, JSON_C_TO_STRING_PLAIN);
            if (!a) goto irregular;
            tg_str_add(&s, a, strlen(a));
        }
        for (int k = 0; k < nd->nin; k++) {
            const tg_var *v = nd->inputs[k];
            int p = -1;
            for (int q = 0; q < j && p < 0; q++)
                if (v->owner == nodes[q]) p = q;
            if (p >= 0) {
                sig_add_int(&s, 't', p);
            } else if ((p = find_var(inputs, nin, v)) >= 0) {
                sig_add_int(&s, 'i', p);
            } else if (v->kind == TG_VAR_CONSTANT && v->value && v->type.ndim == 0) {
                /* the constant's dtype and bits */
                sig_add_int(&s, 'c', v->value->dtype);
                static const char hx[] = "0123456789abcdef";
                const unsigned char *b = (const unsigned char *)v->value->data;
                char h[32];
                size_t nb = tg_isize(v->value->dtype);
                for (size_t q = 0; q < nb && q < 16; q++) {
                    h[2 * q] = hx[b[q] >> 4];
                    h[2 * q + 1] = hx[b[q] & 15];
                }
                tg_str_add(&s, h, 2 * (nb < 16 ? nb : 16));
            } else {
                goto irregular;
            }
        }
    }
    for (int k = 0; k < nout; k++) {
        int p = -1;
        for (int q = 0; q < nnodes && p < 0; q++)
            if (outputs[k]->owner == nodes[q]) p = q;
        if (p < 0) goto irregular;
        sig_add_int(&s, 'o', p);
    }
    if (s.oom) goto irregular;
    return s.s;
irregular:
    tg_str_free(&s);
    return NULL;
}

/* A hit: attrs of the function being optimized (the pass's copy of the
 * entry's, a new reference; NULL when out of memory) and a new reference
 * to the parsed body. */
static bool sig_get(const char *sig, uint64_t h, tg_composite_memo *memo, json_object **attrs,
                    comp_parsed **parsed) {
    bool hit = false;
    pthread_mutex_lock(&sig_lock);
    for (sig_entry *e = sig_table[h % SIG_BUCKETS]; e && !hit; e = e->next)
        if (e->hash == h && !strcmp(e->sig, sig)) {
            json_object *mine = memo_get(memo, e);
            if (mine) {
                *attrs = json_object_get(mine);
            } else if (json_object_deep_copy(e->attrs, attrs, NULL) == 0) {
                memo_put(memo, e, *attrs);
            } else {
                *attrs = NULL;
                break;
            }
            pthread_mutex_lock(&parsed_lock);
            e->parsed->refs++;
            pthread_mutex_unlock(&parsed_lock);
            *parsed = e->parsed;
            hit = true;
        }
    pthread_mutex_unlock(&sig_lock);
    return hit;
}

/* Remember a group's attrs (a copy goes into the table; the pass keeps
 * the node's own) and parsed body. The sig string is taken over. */
static void sig_put(char *sig, uint64_t h, json_object *attrs, comp_parsed *parsed,
                    tg_composite_memo *memo) {
    json_object *copy = NULL;
    if (json_object_deep_copy(attrs, &copy, NULL) != 0) {
        tg_free(sig);
        return; /* (out of memory: not remembered) */
    }
    pthread_mutex_lock(&sig_lock);
    /* Swept when the table has doubled since the last sweep, and once
     * full (every entry read by some node), every SIG_MAX / 4 misses. */
    bool due = sig_count >= sig_sweep_at;
    if (sig_count >= SIG_MAX) due = ++sig_full_misses >= SIG_MAX / 4;
    if (due) {
        sig_sweep();
        sig_full_misses = 0;
        sig_sweep_at = sig_count * 2 < SIG_SWEEP_MIN ? SIG_SWEEP_MIN : sig_count * 2 > SIG_MAX ? SIG_MAX : sig_count * 2;
    }
    sig_entry *e = NULL;
    if (sig_count < SIG_MAX && (e = tg_calloc(1, sizeof *e))) {
        e->sig = sig;
        e->hash = h;
        e->id = ++sig_ids;
        e->attrs = copy;
        pthread_mutex_lock(&parsed_lock);
        parsed->refs++;
        pthread_mutex_unlock(&parsed_lock);
        e->parsed = parsed;
        e->next = sig_table[h % SIG_BUCKETS];
        sig_table[h % SIG_BUCKETS] = e;
        sig_count++;
        sig = NULL;
        copy = NULL;
        memo_put(memo, e, attrs);
    }
    pthread_mutex_unlock(&sig_lock);
    json_object_put(copy);
    tg_free(sig);
}

/* b's names of its fused nodes (comp_body.who) from nodes, while they
 * are still there to describe: an error in a fused op then names the
 * node that failed and its own trace, as it would unfused, not the
 * composite and its last node's trace. Only when one of them can fail
 * (tg_elemwise_may_fail): describing every fused node was half the fusion
 * pass, for errors most bodies cannot raise. TG_ENOMEM. */
static int who_fill(comp_body *b, tg_node *const *nodes, int nnodes) {
    char desc[1024], trace[TG_CTX_MSG_MAX];
    tg_str w = {0};
    bool may_fail = false;
    for (int j = 0; j < nnodes && !may_fail; j++) may_fail = tg_elemwise_may_fail(nodes[j]);
    if (!may_fail) return TG_OK;
    if (!(b->who_at = tg_malloc(sizeof *b->who_at * (size_t)nnodes))) return TG_ENOMEM;
    for (int j = 0; j < nnodes; j++) {
        tg_node_error_parts(nodes[j], desc, sizeof desc, trace, sizeof trace);
        b->who_at[j] = (int)w.len;
        tg_str_add(&w, desc, strlen(desc) + 1);
        tg_str_add(&w, trace, strlen(trace) + 1);
    }
    if (w.oom || !w.s) {
        tg_str_free(&w);
        tg_free(b->who_at);
        b->who_at = NULL;
        return TG_ENOMEM;
    }
    b->who = w.s;
    b->nwho = nnodes;
    b->failed = -1;
    return TG_OK;
}

int tg_composite_who_count(const tg_node *n) {
    const comp_body *b = n->op == &tg_op_composite ? n->a.extra : NULL;
    return b && b->who ? b->nwho : 0;
}

void tg_composite_who(const tg_node *n, int j, const char **desc, const char **trace) {
    const comp_body *b = n->a.extra;
    *desc = b->who + b->who_at[j];
    *trace = *desc + strlen(*desc) + 1;
}

int tg_composite_who_set(tg_node *n, const char *const *parts, int nfused) {
    comp_body *b = n->op == &tg_op_composite ? n->a.extra : NULL;
    if (!b || nfused < 1) return TG_EINVAL;
    size_t small[64], *len = 2 * (size_t)nfused <= 64 ? small : tg_malloc(sizeof *len * 2 * (size_t)nfused);
    if (!len) return TG_ENOMEM;
    size_t total = 0;
    int rc = TG_OK;
    for (int j = 0; j < 2 * nfused && !rc; j++) {
        len[j] = strlen(parts[j]);
        total += len[j] + 1;
        /* who_fill's buffers, which a text read back may not outgrow */
        if (len[j] >= (j % 2 ? (size_t)TG_CTX_MSG_MAX : 1024) || total > INT_MAX) rc = TG_EPARSE;
    }
    char *w = rc ? NULL : tg_malloc(total);
    int *at = rc ? NULL : tg_malloc(sizeof *at * (size_t)nfused);
    if (!rc && (!w || !at)) rc = TG_ENOMEM;
    if (rc) {
        tg_free(w);
        tg_free(at);
        if (len != small) tg_free(len);
        return rc;
    }
    size_t k = 0;
    for (int j = 0; j < 2 * nfused; j++) {
        if (j % 2 == 0) at[j / 2] = (int)k;
        memcpy(w + k, parts[j], len[j] + 1);
        k += len[j] + 1;
    }
    if (len != small) tg_free(len);
    tg_free(b->who);
    tg_free(b->who_at);
    b->who = w;
    b->who_at = at;
    b->nwho = nfused;
    b->failed = -1;
    return TG_OK;
}

bool tg_composite_failed_node(const tg_node *n, const char **desc, const char **trace,
                              const char *const **keys, int *nkeys) {
    const comp_body *b = n->op == &tg_op_composite ? n->a.extra : NULL;
    if (!b || !b->who || b->failed < 0 || b->failed >= b->nwho) return false;
    *desc = b->who + b->who_at[b->failed];
    *trace = *desc + strlen(*desc) + 1;
    int nf, nk;
    const char *const *k;
    const int *st = tg_composite_origin_groups(n, &nf, &k, &nk);
    if (st && b->failed < nf) {
        *keys = k + st[b->failed];
        *nkeys = st[b->failed + 1] - st[b->failed];
    }
    return true;
}

tg_node *tg_composite_node_new(tg_node *const *nodes, int nnodes, tg_var *const *inputs, int nin,
                               tg_var *const *outputs, int nout, tg_ctx *ctx) {
    return tg_composite_node_new_in(NULL, NULL, nodes, nnodes, inputs, nin, outputs, nout, ctx);
}

tg_node *tg_composite_node_new_in(tg_arena *arena, tg_composite_memo *memo, tg_node *const *nodes,
                                  int nnodes, tg_var *const *inputs, int nin,
                                  tg_var *const *outputs, int nout, tg_ctx *ctx) {
    tg_node *n = NULL;
    json_object *body = NULL, *jvars, *jnodes, *jin, *jout, *attrs = NULL;
    tg_var **consts = NULL;
    int nconst = 0;
    char id[32];
    if (!nodes || nnodes < 1 || !inputs || nin < 1 || !outputs || nout < 1 ||
        nin + nout > TG_COMPOSITE_MAX_IO) {
        tg_errorf(ctx, TG_EINVAL,
                  "composite: need nodes, 1 or more inputs and outputs, at most %d in all",
                  TG_COMPOSITE_MAX_IO);
        return NULL;
    }
    char *sig = group_signature(nodes, nnodes, inputs, nin, outputs, nout);
    uint64_t sig_hash = sig ? fnv1a(sig) : 0;
    comp_parsed *shared_parsed = NULL;
    if (sig && sig_get(sig, sig_hash, memo, &attrs, &shared_parsed)) {
        tg_free(sig);
        sig = NULL;
        comp_body *cb = attrs ? tg_calloc(1, sizeof *cb) : NULL;
        if (!cb || !(n = tg_node_new_in(arena, &tg_op_composite, nin, nout))) {
            tg_free(cb);
            parsed_release(shared_parsed);
            goto oom;
        }
        cb->mode = -1;
        cb->parsed = shared_parsed;
        cb->fg = shared_parsed->fg;
        n->a.extra = cb;
        goto wire;
    }
    int nreads = 0;
    for (int j = 0; j < nnodes; j++) nreads += nodes[j]->nin;
    if (!(consts = tg_calloc((size_t)nreads + 1, sizeof *consts))) goto oom;
    body = json_object_new_object();
    jvars = json_object_new_array();
    jnodes = json_object_new_array();
    jin = json_object_new_array();
    jout = json_object_new_array();
    if (!body || !jvars || !jnodes || !jin || !jout) {
        json_object_put(jvars);
        json_object_put(jnodes);
        json_object_put(jin);
        json_object_put(jout);
        goto oom;
    }
    json_object_object_add(body, "variables", jvars);
    json_object_object_add(body, "nodes", jnodes);
    json_object_object_add(body, "inputs", jin);
    json_object_object_add(body, "outputs", jout);
    /* Body ids: x<i> for inputs, c<i> for copied constants, t<j> for the
     * output of nodes[j]. */
    for (int i = 0; i < nin; i++) {
        json_object *v = json_object_new_object();
        snprintf(id, sizeof id, "x%d", i);
        json_object_object_add(v, "id", json_object_new_string(id));
        json_object_object_add(v, "type", scalar_type(inputs[i]->type.dtype));
        json_object_array_add(jvars, v);
        json_object_array_add(jin, json_object_new_string(id));
    }
    for (int j = 0; j < nnodes; j++) {
        tg_node *nd = nodes[j];
        char desc[256];
        desc[0] = 0;
        if (!(nd->op->flags & TG_OPF_ELEMWISE) || nd->nout != 1) {
            tg_node_describe(nd, desc, sizeof desc);
            tg_errorf(ctx, TG_EINVAL, "composite: %s is not an elementwise op", desc);
            goto fail;
        }
        json_object *jn = json_object_new_object(), *ji = json_object_new_array(),
                    *jo = json_object_new_array();
        json_object_object_add(jn, "op", json_object_new_string(nd->op->name));
        json_object_object_add(jn, "inputs", ji);
        json_object_object_add(jn, "outputs", jo);
        if (nd->attrs) json_object_object_add(jn, "attrs", json_object_get(nd->attrs));
        json_object_array_add(jnodes, jn);
        snprintf(id, sizeof id, "t%d", j);
        json_object_array_add(jo, json_object_new_string(id));
        for (int k = 0; k < nd->nin; k++) {
            tg_var *v = nd->inputs[k];
            int p = -1;
            for (int q = 0; q < j && p < 0; q++)
                if (v->owner == nodes[q]) p = q;
            if (p >= 0) {
                snprintf(id, sizeof id, "t%d", p);
            } else if ((p = find_var(inputs, nin, v)) >= 0) {
                snprintf(id, sizeof id, "x%d", p);
            } else if (v->kind == TG_VAR_CONSTANT && v->value && v->type.ndim == 0) {
                if ((p = find_var(consts, nconst, v)) < 0) {
                    p = nconst;
                    consts[nconst++] = v;
                    json_object *jc = json_object_new_object(), *val = tg_value_to_json(v->value);
                    snprintf(id, sizeof id, "c%d", p);
                    json_object_object_add(jc, "id", json_object_new_string(id));
                    json_object_object_add(jc, "type", scalar_type(v->type.dtype));
                    json_object_object_add(jc, "constant", val);
                    json_object_array_add(jvars, jc);
                    if (!val) goto oom;
                }
                snprintf(id, sizeof id, "c%d", p);
            } else {
                int later = -1;
                for (int q = j; q < nnodes && later < 0; q++)
                    if (v->owner == nodes[q]) later = q;
                tg_node_describe(nd, desc, sizeof desc);
                tg_errorf(ctx, TG_EINVAL,
                          later >= 0 ? "composite: %s reads '%s' before nodes[%d] makes it (not "
                                       "in topological order)"
                                     : "composite: %s reads '%s', which is neither an input nor "
                                       "made by the fused nodes%.0d",
                          desc, tg_var_label(v), later);
                goto fail;
            }
            json_object_array_add(ji, json_object_new_string(id));
        }
    }
    for (int k = 0; k < nout; k++) {
        int p = -1;
        for (int q = 0; q < nnodes && p < 0; q++)
            if (outputs[k]->owner == nodes[q]) p = q;
        if (p < 0) {
            tg_errorf(ctx, TG_EINVAL, "composite: outputs[%d] '%s' is not made by the fused nodes",
                      k, tg_var_label(outputs[k]));
            goto fail;
        }
        snprintf(id, sizeof id, "t%d", p);
        json_object_array_add(jout, json_object_new_string(id));
    }
    if (!(attrs = json_object_new_object())) goto oom;
    json_object_object_add(attrs, "body", body);
    body = NULL;
    if (!(n = tg_node_new_in(arena, &tg_op_composite, nin, nout))) goto oom;
wire:
    n->json_index = -1;
    n->attrs = attrs;
    attrs = NULL;
    for (int i = 0; i < nin; i++) n->inputs[i] = inputs[i];
    for (int k = 0; k < nout; k++) {
        tg_var *v = tg_var_new_in(arena, outputs[k]->id, TG_VAR_RESULT);
        if (!v) goto oom;
        n->outputs[k] = v;
        v->owner = n;
        v->owner_index = k;
        v->json_index = -1;
        if (outputs[k]->name && !(v->name = tg_strdup(outputs[k]->name))) goto oom;
    }
    if (!n->a.extra) {
        if (comp_parse_attrs(n, ctx)) {
            tg_error_prefix(ctx, "composite (built from %d nodes)", nnodes);
            goto fail;
        }
        if (sig) {
            sig_put(sig, sig_hash, n->attrs, ((comp_body *)n->a.extra)->parsed, memo);
            sig = NULL;
        }
    }
    if (((comp_body *)n->a.extra)->fg->nout != n->nout) {
        tg_errorf(ctx, TG_EINVAL, "composite: the body has %d outputs, the node %d",
                  ((comp_body *)n->a.extra)->fg->nout, n->nout);
        goto fail;
    }
    if (comp_infer(n, ctx)) {
        tg_error_prefix(ctx, "composite (built from %d nodes)", nnodes);
        goto fail;
    }
    for (int k = 0; k < nout; k++) {
        const tg_type *want = &outputs[k]->type, *got = &n->outputs[k]->type;
        if (want->dtype != got->dtype || want->ndim != got->ndim ||
            !tg_type_compatible(want, got)) {
            char a[160], b[160];
            tg_type_str(want, a, sizeof a);
            tg_type_str(got, b, sizeof b);
            tg_errorf(ctx, TG_ETYPE,
                      "composite: outputs[%d] '%s' is %s, but the composite would give %s (every "
                      "output has the broadcast shape of all the inputs)",
                      k, tg_var_label(outputs[k]), a, b);
            goto fail;
        }
        n->outputs[k]->type = *want; /* keeps the static lengths it had */
    }
    /* Origins: what the fused nodes stood for (written out first where
     * the optimizer still holds them as a set). */
    int no = 0;
    for (int j = 0; j < nnodes; j++) {
        if (tg_node_origins_settle(nodes[j])) goto oom;
        no += nodes[j]->norigins ? nodes[j]->norigins : 1;
    }
    comp_body *cb = n->a.extra;
    const char **keys = tg_malloc(sizeof *keys * (size_t)(no + 1));
    if (!keys || !(cb->ostart = tg_calloc((size_t)nnodes + 1, sizeof *cb->ostart))) {
        tg_free(keys);
        goto oom;
    }
    cb->nfused = nnodes;
    for (int j = 0, k = 0; j < nnodes; j++) {
        cb->ostart[j] = k;
        if (!nodes[j]->norigins)
            keys[k++] = nodes[j]->outputs[0]->id;
        else
            for (int q = 0; q < nodes[j]->norigins; q++) keys[k++] = nodes[j]->origins[q];
    }
    cb->ostart[nnodes] = no;
    /* The node's origins: each key once, where it first appears; the
     * groups keep the repeats when there are any. */
    int nu = 0;
    n->origins = tg_origins_pack_unique(keys, no, &nu);
    if (n->origins && nu < no) {
        if (!(cb->gkeys = tg_origins_pack(keys, no))) {
            tg_free(n->origins);
            n->origins = NULL;
        }
        cb->ngkeys = no;
    }
    tg_free(keys);
    if (!n->origins) goto oom;
    n->norigins = nu;
    if (outputs[0]->owner && tg_trace_copy(&n->trace, &outputs[0]->owner->trace)) goto oom;
    if (who_fill(cb, nodes, nnodes)) goto oom;
    tg_free(consts);
    tg_free(sig);
    return n;
oom:
    tg_errorf(ctx, TG_ENOMEM, "out of memory");
fail:
    if (n)
        for (int k = 0; k < nout; k++) tg_var_free(n->outputs[k]);
    tg_node_free(n);
    if (body) json_object_put(body);
    if (attrs) json_object_put(attrs);
    tg_free(consts);
    tg_free(sig);
    return NULL;
}

static bool in_set(tg_node *const *nodes, int nnodes, const tg_node *nd) {
    for (int j = 0; j < nnodes; j++)
        if (nodes[j] == nd) return true;
    return false;
}

int tg_composite_io(tg_node *const *nodes, int nnodes, tg_var ***inputs, int *nin,
                    tg_var ***outputs, int *nout, tg_ctx *ctx) {
    int nreads = 0, nmade = 0;
    *inputs = *outputs = NULL;
    *nin = *nout = 0;
    for (int j = 0; j < nnodes; j++) {
        nreads += nodes[j]->nin;
        nmade += nodes[j]->nout;
    }
    tg_var **in = tg_calloc((size_t)nreads + 1, sizeof *in);
    tg_var **out = tg_calloc((size_t)nmade + 1, sizeof *out);
    if (!in || !out) {
        tg_free(in);
        tg_free(out);
        return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    }
    for (int j = 0; j < nnodes; j++) {
        for (int k = 0; k < nodes[j]->nin; k++) {
            tg_var *v = nodes[j]->inputs[k];
            if ((v->owner && in_set(nodes, nnodes, v->owner)) ||
                (v->kind == TG_VAR_CONSTANT && v->value && v->type.ndim == 0) ||
                find_var(in, *nin, v) >= 0)
                continue;
            in[(*nin)++] = v;
        }
        for (int k = 0; k < nodes[j]->nout; k++) {
            tg_var *v = nodes[j]->outputs[k];
            bool outside = false;
            for (int c = 0; c < v->nclients && !outside; c++)
                outside = !v->clients[c].node || !in_set(nodes, nnodes, v->clients[c].node);
            if (outside) out[(*nout)++] = v;
        }
    }
    *inputs = in;
    *outputs = out;
    return TG_OK;
}

const int *tg_composite_origin_groups(const tg_node *n, int *nfused, const char *const **keys, int *nkeys) {
    const comp_body *b = n->op == &tg_op_composite ? n->a.extra : NULL;
    *nfused = *nkeys = 0;
    *keys = NULL;
    if (!b || !b->ostart || b->nfused < 1) return NULL;
    const char *const *k = b->gkeys ? (const char *const *)b->gkeys : (const char *const *)n->origins;
    int nk = b->gkeys ? b->ngkeys : n->norigins;
    /* (a merge that folded an equal composite into this one appended its
     * origins, past the last group: then the groups, which index the
     * origins, no longer cover them) */
    if (!k || b->ostart[b->nfused] != nk) return NULL;
    *nfused = b->nfused;
    *keys = k;
    *nkeys = nk;
    return b->ostart;
}

int tg_composite_set_origin_groups(tg_node *n, const int *starts, int nfused) {
    comp_body *b = n->op == &tg_op_composite ? n->a.extra : NULL;
    if (!b || !n->origins || nfused < 1 || nfused > n->norigins || starts[0] != 0 ||
        starts[nfused] != n->norigins)
        return TG_EINVAL;
    for (int j = 0; j < nfused; j++)
        if (starts[j + 1] <= starts[j]) return TG_EINVAL;
    int *c = tg_malloc(sizeof *c * ((size_t)nfused + 1));
    if (!c) return TG_ENOMEM;
    memcpy(c, starts, sizeof *c * ((size_t)nfused + 1));
    /* Groups that repeat a key: they keep the list as given, the node
     * each key once (where it first appears), as when it was built. */
    char **g = NULL;
    int nu = tg_origins_first((const char *const *)n->origins, n->norigins, NULL);
    if (nu >= 0 && nu < n->norigins) {
        char **u = tg_origins_pack_unique((const char *const *)n->origins, n->norigins, &nu);
        if (u) {
            g = n->origins;
            n->origins = u;
        } else {
            nu = -1;
        }
    }
    if (nu < 0) {
        tg_free(c);
        return TG_ENOMEM;
    }
    tg_free(b->ostart);
    tg_free(b->gkeys);
    b->gkeys = g;
    b->ngkeys = g ? n->norigins : 0;
    if (g) n->norigins = nu;
    b->ostart = c;
    b->nfused = nfused;
    return TG_OK;
}

/* ---- finding the body op that made a bad value (tgdebug nanguard) ---- */

int tg_composite_locate(const tg_node *n, tg_array *const *in,
                        bool (*bad)(const tg_array *a, void *ud), void *ud,
                        tg_composite_where *w, tg_ctx *ctx) {
    const comp_body *b = n->a.extra;
    w->body_node = -1;
    w->op = NULL;
    w->var = NULL;
    w->origins = (const char *const *)n->origins;
    w->norigins = n->norigins;
    if (!b) return tg_errorf(ctx, TG_EINVAL, "not a parsed composite node");
    tg_fgraph *fg = b->fg;
    tg_array **val = tg_calloc((size_t)fg->nvars + 1, sizeof *val);
    tg_array **args = tg_calloc((size_t)TG_COMPOSITE_MAX_IO + 8, sizeof *args);
    bool *isbad = tg_calloc((size_t)fg->nvars + 1, sizeof *isbad);
    int rc = TG_OK;
    if (!val || !args || !isbad) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < fg->nin && i < n->nin; i++) {
        val[fg->inputs[i]->index] = tg_array_ref(in[i]);
        isbad[fg->inputs[i]->index] = bad(in[i], ud);
    }
    /* The body's ops on the whole arrays (they broadcast as the node
     * does), in the body's order, each checked as it is made. */
    for (int j = 0; j < fg->nnodes; j++) {
        tg_node *nd = fg->nodes[j];
        bool in_bad = false;
        for (int k = 0; k < nd->nin; k++) {
            tg_var *v = nd->inputs[k];
            args[k] = v->kind == TG_VAR_CONSTANT ? v->value : val[v->index];
            if (!args[k]) {
                rc = tg_errorf(ctx, TG_EINVAL, "composite body: '%s' has no value", v->id);
                goto done;
            }
            in_bad |= v->kind == TG_VAR_CONSTANT ? bad(v->value, ud) : isbad[v->index];
        }
        int oi = nd->outputs[0]->index;
        if ((rc = nd->op->run(nd, args, &val[oi], ctx))) goto done;
        isbad[oi] = bad(val[oi], ud);
        if (isbad[oi] && !in_bad) {
            /* Body ids are t<j> for the j-th fused node (see
             * tg_composite_node_new). */
            const char *id = nd->outputs[0]->id;
            int t = id[0] == 't' ? atoi(id + 1) : -1;
            w->body_node = t;
            w->op = nd->op->name;
            w->var = id;
            /* The groups index gkeys, or the first of the origins (a
             * merge may have appended more past them, never fewer).
             * Without groups, every origin: which one the body op
             * stood for is not known, and a guess could name the
             * wrong node. */
            const char *const *gk = b->gkeys ? (const char *const *)b->gkeys : (const char *const *)n->origins;
            int ngk = b->gkeys ? b->ngkeys : n->norigins;
            if (b->ostart && t >= 0 && t < b->nfused && b->ostart[b->nfused] <= ngk) {
                w->origins = gk + b->ostart[t];
                w->norigins = b->ostart[t + 1] - b->ostart[t];
            }
            break;
        }
    }
done:
    if (val)
        for (int i = 0; i < fg->nvars; i++) tg_array_free(val[i]);
    tg_free(val);
    tg_free(args);
    tg_free(isbad);
    return rc;
}

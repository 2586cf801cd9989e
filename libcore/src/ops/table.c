/* The op table, built from ops.def, and name look-ups. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "ops/op.h"

#define TG_OP(name) extern const tg_op tg_op_##name;
#include "ops/ops.def"
#undef TG_OP

static const tg_op *const table[] = {
#define TG_OP(name) &tg_op_##name,
#include "ops/ops.def"
#undef TG_OP
    NULL};

enum {
    TABLE_SIZE = (int)(sizeof table / sizeof table[0]) - 1
};
_Static_assert(TABLE_SIZE * 2 <= 1024, "the op hash table (NSLOT) is at most half full");

/* Every op name of FORMAT.md section 7, for suggestions and for telling a
 * planned op from a misspelt one. */
static const char *const format_ops[] = {
    "neg", "abs", "sign", "exp", "exp2", "expm1", "log", "log2", "log10",
    "log1p", "sqrt", "sqr", "reciprocal", "sin", "cos", "tan", "arcsin",
    "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh",
    "arctanh", "sigmoid", "softplus", "relu", "erf", "erfc", "gammaln",
    "floor", "ceil", "round", "trunc", "isnan", "isinf", "logical_not",
    "identity", "sub", "true_div", "int_div", "mod", "pow", "maximum",
    "minimum", "arctan2", "eq", "neq", "lt", "le", "gt", "ge", "logical_and",
    "logical_or", "logical_xor", "add", "mul", "switch", "clip", "cast",
    "sum", "prod", "mean", "max", "min", "all", "any", "logsumexp", "var",
    "std", "argmax", "argmin", "dot", "matmul", "outer", "gemm", "gemv",
    "ger", "cholesky", "matrix_inverse", "det", "solve", "shape", "shape_i",
    "reshape", "dimshuffle", "transpose", "flatten", "squeeze",
    "expand_dims", "subtensor", "set_subtensor", "inc_subtensor", "take",
    "take_set", "take_add", "join", "stack", "split", "alloc", "zeros_like",
    "ones_like", "arange", "eye", "repeat", "softmax", "log_softmax",
    "categorical_crossentropy", "binary_crossentropy", "conv2d",
    "conv2d_grad_inputs", "conv2d_grad_weights", "pool2d", "pool2d_grad",
    "random_uniform", "random_normal", "random_binomial",
    "random_multinomial", "ifelse", "op_from_graph", "scan", "breakpoint",
    "print", "assert", "grad", "rop", "lop", "composite", "transfer",
    /* tg's own forms, written by differentiation (docs/format-choices.md) */
    "sum_to", "digamma", "trigamma", "polygamma", "pool2d_grad_grad", NULL};

/* Names to ops through a hash table built once: the loader looks up
 * every node's op and the optimizer every op it builds, and a walk down
 * the table was a hundred string comparisons each. */
enum { NSLOT = 1024 };
static const tg_op *slots[NSLOT];
static pthread_once_t slots_once = PTHREAD_ONCE_INIT;

static uint32_t name_hash(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static void build_slots(void) {
    for (int i = 0; i < TABLE_SIZE; i++) {
        uint32_t j = name_hash(table[i]->name) & (NSLOT - 1);
        while (slots[j]) j = (j + 1) & (NSLOT - 1);
        slots[j] = table[i];
    }
}

const tg_op *tg_op_find(const char *name) {
    pthread_once(&slots_once, build_slots);
    for (uint32_t j = name_hash(name) & (NSLOT - 1); slots[j]; j = (j + 1) & (NSLOT - 1))
        if (strcmp(slots[j]->name, name) == 0) return slots[j];
    return NULL;
}

bool tg_op_is_planned(const char *name) {
    for (int i = 0; format_ops[i]; i++)
        if (strcmp(format_ops[i], name) == 0) return true;
    return false;
}

int tg_op_count(void) { return TABLE_SIZE; }
const tg_op *tg_op_at(int i) {
    return i >= 0 && i < TABLE_SIZE ? table[i] : NULL;
}

/* Levenshtein distance, capped: names are short. */
static int edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 1000;
    int prev[64], cur[64];
    for (size_t j = 0; j <= lb; j++) prev[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int c = prev[j - 1] + (a[i - 1] != b[j - 1]);
            if (prev[j] + 1 < c) c = prev[j] + 1;
            if (cur[j - 1] + 1 < c) c = cur[j - 1] + 1;
            cur[j] = c;
        }
        memcpy(prev, cur, sizeof(int) * (lb + 1));
    }
    return prev[lb];
}

const char *tg_op_nearest(const char *name) {
    const char *best = NULL;
    int bestd = 1 << 30;
    for (int i = 0; format_ops[i]; i++) {
        int d = edit_distance(name, format_ops[i]);
        if (d < bestd) {
            bestd = d;
            best = format_ops[i];
        }
    }
    return best;
}

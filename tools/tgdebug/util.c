/* What the tgdebug subcommands share: messages, option values, printing
 * arrays and traces. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor.h"
#include "tgdebug.h"

void tgd_error(const char *sub, const char *fmt, ...) {
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    cli_error(TGDEBUG, "%s: %s", sub, buf);
}

bool tgd_parse_long(const char *sub, const char *opt, const char *s, long min, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || end == s || errno || v < min) {
        tgd_error(sub, "%s: expected an integer >= %ld, got '%s'", opt, min, s);
        return false;
    }
    *out = v;
    return true;
}

bool tgd_parse_double(const char *sub, const char *opt, const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || end == s || errno == ERANGE || isnan(v) || v < 0) {
        tgd_error(sub, "%s: expected a number >= 0, got '%s'", opt, s);
        return false;
    }
    *out = v;
    return true;
}

void tgd_shape_str(const tg_array *a, char *buf, size_t size) {
    size_t k = (size_t)snprintf(buf, size, "%s (", tg_dtype_name(a->dtype));
    for (int d = 0; d < a->ndim && k < size; d++)
        k += (size_t)snprintf(buf + k, size - k, "%s%lld", d ? ", " : "", (long long)a->shape[d]);
    if (k < size) snprintf(buf + k, size - k, a->ndim == 1 ? ",)" : ")");
}

void tgd_print_stats(FILE *o, const tg_array *a) {
    if (!a) {
        fprintf(o, "(no value)\n");
        return;
    }
    char sh[256];
    tgd_shape_str(a, sh, sizeof sh);
    tg_stats st;
    tg_array_stats(a, INFINITY, &st);
    fprintf(o, "%s min=%.6g max=%.6g mean=%.6g nan=%lld inf=%lld\n", sh, st.min, st.max, st.mean,
            (long long)st.nan, (long long)st.inf);
}

void tgd_print_trace(FILE *o, const tg_node *n, const char *indent) {
    if (!n || !n->trace.n) {
        fprintf(o, "%s(no trace in the file)\n", indent);
        return;
    }
    for (int i = 0; i < n->trace.n; i++) {
        const tg_frame *f = &n->trace.frames[i];
        fprintf(o, "%s%s", indent, f->file ? f->file : "?");
        if (f->line >= 0) fprintf(o, ":%lld", (long long)f->line);
        if (f->function) fprintf(o, " in %s", f->function);
        if (f->code) fprintf(o, ": %s", f->code);
        fputc('\n', o);
    }
}

void tgd_print_gradient(FILE *o, const tg_function *f, const char *key, const char *indent, const char *label) {
    tg_key_gradient kg;
    /* (at most 8 steps: a chain of such keys ends, but output is bounded) */
    for (int step = 0; step < 8 && tg_function_key_gradient(f, key, &kg); step++) {
        if (step)
            fprintf(o, "%s  %s: ", indent, key);
        else
            fprintf(o, "%s%s: ", indent, label ? label : "from");
        fprintf(o, "%s %s", kg.by_op, kg.by);
        if (!*kg.of) {
            fputc('\n', o);
            return;
        }
        fprintf(o, ", differentiating %s (%s)\n", kg.of, kg.of_op);
        key = kg.of;
    }
}

tg_node *tgd_graph_node(const tg_graph *g, const char *key) {
    tg_var *v = key ? tg_graph_find(g, key) : NULL;
    return v && v->owner && v->owner->nout && v->owner->outputs[0] == v ? v->owner : NULL;
}

int tgd_exit_for(int status) {
    switch (status) {
    case TG_EIO:
    case TG_EPARSE:
    case TG_ELOAD:
    case TG_ETYPE:
    case TG_EMISSING:
    case TG_ENOTFOUND:
    case TG_EVERSION:
    case TG_EINVAL:
    case TG_EUNSUPPORTED: return TG_EXIT_USAGE;
    default: return TG_EXIT_FOUND;
    }
}

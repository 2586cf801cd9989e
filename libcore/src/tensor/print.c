/* Printing arrays as NumPy does: a header line "float64 (2, 3)", then the
 * values as np.array2string(a, separator=", ") writes them (NumPy 1.24
 * defaults: precision 8, floatmode "maxprec", line width 75, summarised
 * with the first and last 3 items of each axis when there are more than
 * 1000 elements). This is repr(a) without the "array(" wrapper.
 *
 * Ported from numpy/core/arrayprint.py: the float format (fixed or
 * scientific, chosen from the displayed values, padded so that decimal
 * points line up) and _formatArray (line wrapping and the summary). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor.h"

#define EDGE 3
#define THRESHOLD 1000
#define LINE_WIDTH 75

typedef struct pfmt {
    tg_dtype dt;
    char kind;
    bool summary;
    /* bool */
    bool pad_bool;
    /* integers */
    int width;
    /* floats */
    bool exp;
    int pad_left, pad_right, precision, min_digits, exp_size;
    bool trim_k;
} pfmt;

/* ---- float digits ---- */

/* True when the decimal string s reads back as the value v of dtype dt. */
static bool reads_back(const char *s, double v, tg_dtype dt) {
    if (dt == TG_FLOAT32) return tg_strtof_c(s, NULL) == (float)v;
    double x = tg_strtod_c(s, NULL);
    if (dt == TG_FLOAT64) return x == v;
    uint16_t a, b;
    tg_cast_strided(TG_FLOAT16, &a, 2, TG_FLOAT64, &x, 8, 1);
    tg_cast_strided(TG_FLOAT16, &b, 2, TG_FLOAT64, &v, 8, 1);
    return a == b;
}

/* Digits of |v| (finite) in d (no dot, no leading zero unless v is 0) and
 * the decimal exponent of the first: |v| = d[0].d[1...] x 10^*e. With
 * frac < 0 the shortest digits that read back as v; otherwise v's exact
 * value rounded to `frac` digits after the first (scientific). Trailing
 * zeros dropped unless keep. */
static int digits_sci(double v, tg_dtype dt, int frac, bool keep, char *d,
                      int *e) {
    char buf[64];
    v = fabs(v);
    if (frac < 0) {
        for (int p = 0; p <= 17; p++) {
            tg_snprintf_c(buf, sizeof buf, "%.*e", p, v);
            if (reads_back(buf, v, dt)) break;
        }
    } else {
        tg_snprintf_c(buf, sizeof buf, "%.*e", frac, v);
    }
    int n = 0;
    for (const char *c = buf; *c && *c != 'e'; c++)
        if (*c >= '0' && *c <= '9') d[n++] = *c;
    while (!keep && n > 1 && d[n - 1] == '0') n--;
    d[n] = 0;
    *e = atoi(strchr(buf, 'e') + 1);
    return n;
}

/* NumPy's dragon4_positional with unique=True: the shortest digits, at
 * most `precision` after the point, at least `min_digits`; the integer
 * part (with its sign) right-aligned in pad_left, the fraction
 * left-aligned in pad_right. */
static void fmt_positional(tg_str *o, double v, tg_dtype dt, int precision,
                           int min_digits, int pad_left, int pad_right) {
    char d[40], ip[400], fp[400];
    int e, n = digits_sci(v, dt, -1, false, d, &e);
    int ni = 0, nf = 0;
    if (signbit(v)) ip[ni++] = '-';
    int want = n - 1 - e > precision ? precision
               : n - 1 - e < min_digits ? min_digits
                                        : -1;
    if (want >= 0 && !(n == 1 && d[0] == '0')) {
        /* Too many fractional digits: round at the cap instead; too few:
         * print more of the exact value (dragon4's min_digits). */
        char buf[400];
        tg_snprintf_c(buf, sizeof buf, "%.*f", want, fabs(v));
        char *dot = strchr(buf, '.');
        size_t il = dot ? (size_t)(dot - buf) : strlen(buf);
        memcpy(ip + ni, buf, il);
        ni += (int)il;
        if (dot)
            for (const char *c = dot + 1; *c; c++) fp[nf++] = *c;
        while (want == precision && nf > min_digits && fp[nf - 1] == '0') nf--;
    } else if (e >= 0) {
        for (int i = 0; i <= e; i++) ip[ni++] = i < n ? d[i] : '0';
        for (int i = e + 1; i < n; i++) fp[nf++] = d[i];
    } else {
        ip[ni++] = '0';
        for (int i = 0; i < -e - 1; i++) fp[nf++] = '0';
        for (int i = 0; i < n; i++) fp[nf++] = d[i];
    }
    if (n == 1 && d[0] == '0') nf = 0; /* zero: "0." */
    while (nf < min_digits) fp[nf++] = '0';
    for (int i = ni; i < pad_left; i++) tg_str_add(o, " ", 1);
    tg_str_add(o, ip, (size_t)ni);
    tg_str_add(o, ".", 1);
    tg_str_add(o, fp, (size_t)nf);
    for (int i = nf; i < pad_right; i++) tg_str_add(o, " ", 1);
}

/* NumPy's dragon4_scientific with unique=True. */
static void fmt_scientific(tg_str *o, double v, tg_dtype dt, int precision,
                           int min_digits, int pad_left, int exp_digits) {
    char d[40];
    int e, n = digits_sci(v, dt, -1, false, d, &e);
    if (n - 1 > precision)
        n = digits_sci(v, dt, precision, false, d, &e);
    else if (n - 1 < min_digits && !(n == 1 && d[0] == '0'))
        n = digits_sci(v, dt, min_digits, true, d, &e);
    if (n == 1 && d[0] == '0') e = 0;
    int ni = signbit(v) ? 2 : 1;
    for (int i = ni; i < pad_left; i++) tg_str_add(o, " ", 1);
    if (signbit(v)) tg_str_add(o, "-", 1);
    tg_str_add(o, d, 1);
    tg_str_add(o, ".", 1);
    int nf = n - 1;
    tg_str_add(o, d + 1, (size_t)nf);
    for (; nf < min_digits; nf++) tg_str_add(o, "0", 1);
    int w = exp_digits > 2 ? exp_digits : 2;
    tg_str_addf(o, "e%c%0*d", e < 0 ? '-' : '+', w, abs(e));
}

/* ---- fitting the format to the displayed values ---- */

typedef struct fit {
    pfmt *f;
    bool any, any_finite, neg_inf, any_nonfinite;
    double max_abs, min_abs; /* over finite non-zero values */
    bool any_nonzero;
    int64_t imax, imin;
    uint64_t umax;
    int pass; /* floats: 1 finds the range, 2 the paddings */
    int pl, pr, prec, exps;
} fit;

static void fit_value(fit *t, const char *p) {
    const pfmt *f = t->f;
    t->any = true;
    if (f->kind == 'i' || f->kind == 'u') {
        if (f->dt == TG_UINT64) {
            uint64_t u;
            memcpy(&u, p, 8);
            if (u > t->umax) t->umax = u;
            return;
        }
        int64_t x = tg_load_i64(f->dt, p);
        if (x > t->imax) t->imax = x;
        if (x < t->imin) t->imin = x;
        return;
    }
    if (f->kind != 'f') return;
    double v = tg_load_f64(f->dt, p);
    if (!isfinite(v)) {
        t->any_nonfinite = true;
        if (isinf(v) && v < 0) t->neg_inf = true;
        return;
    }
    t->any_finite = true;
    if (t->pass == 1) {
        if (v != 0) {
            double a = fabs(v);
            if (!t->any_nonzero || a > t->max_abs) t->max_abs = a;
            if (!t->any_nonzero || a < t->min_abs) t->min_abs = a;
            t->any_nonzero = true;
        }
        return;
    }
    /* Pass 2: the widths of the parts of each value's own shortest form. */
    tg_str s = {0};
    if (f->exp)
        fmt_scientific(&s, v, f->dt, 8, 0, 0, -1);
    else
        fmt_positional(&s, v, f->dt, 8, 0, 0, 0);
    if (s.oom || !s.s) {
        tg_str_free(&s);
        return;
    }
    const char *dot = strchr(s.s, '.');
    int il = (int)(dot - s.s);
    const char *ep = strchr(s.s, 'e');
    int fl = ep ? (int)(ep - dot - 1) : (int)strlen(dot + 1);
    if (il > t->pl) t->pl = il;
    if (fl > t->pr) t->pr = fl;
    if (ep && (int)strlen(ep + 1) - 1 > t->exps) t->exps = (int)strlen(ep + 1) - 1;
    tg_str_free(&s);
}

/* Visit the elements that will be displayed (all, or the edges of each
 * axis when summarising). */
static void visit(const tg_array *a, int d, const char *p, fit *t) {
    if (d == a->ndim) {
        fit_value(t, p);
        return;
    }
    int64_t n = a->shape[d];
    bool sum = t->f->summary && n > 2 * EDGE;
    for (int64_t i = 0; i < n; i++) {
        if (sum && i == EDGE) i = n - EDGE;
        visit(a, d + 1, p + i * a->strides[d], t);
    }
}

/* Round a double to the array's dtype (NumPy compares in the dtype). */
static double in_dtype(double v, tg_dtype dt) {
    char b[8];
    tg_store_f64(dt, b, v);
    return tg_load_f64(dt, b);
}

static void fit_format(const tg_array *a, pfmt *f) {
    fit t = {.f = f, .imax = INT64_MIN, .imin = INT64_MAX, .pass = 1};
    visit(a, 0, a->data, &t);
    char buf[32];
    if (f->kind == 'b') {
        f->pad_bool = a->ndim > 0;
    } else if (f->dt == TG_UINT64) {
        f->width = snprintf(buf, sizeof buf, "%llu", (unsigned long long)t.umax);
    } else if (f->kind == 'i' || f->kind == 'u') {
        int w1 = snprintf(buf, sizeof buf, "%lld", (long long)t.imax);
        int w2 = snprintf(buf, sizeof buf, "%lld", (long long)t.imin);
        f->width = w1 > w2 ? w1 : w2;
    } else {
        f->exp = false;
        if (t.any_nonzero) {
            double ratio = in_dtype(t.max_abs / t.min_abs, f->dt);
            f->exp = t.max_abs >= in_dtype(1e8, f->dt) ||
                     t.min_abs < in_dtype(0.0001, f->dt) || ratio > 1000.0;
        }
        f->precision = 8;
        f->min_digits = 0;
        f->trim_k = false;
        f->exp_size = -1;
        f->pad_left = f->pad_right = 0;
        if (t.any_finite) {
            t.pass = 2;
            t.pl = t.pr = 0;
            t.exps = -1;
            visit(a, 0, a->data, &t);
            f->pad_left = t.pl;
            if (f->exp) {
                f->precision = f->min_digits = t.pr;
                f->trim_k = true;
                f->exp_size = t.exps;
                f->pad_right = t.exps + 2 + t.pr;
            } else {
                f->pad_right = t.pr;
            }
        }
        if (t.any_nonfinite) {
            int offset = f->pad_right + 1;
            int inflen = 3 + (t.neg_inf ? 1 : 0);
            if (3 - offset > f->pad_left) f->pad_left = 3 - offset;
            if (inflen - offset > f->pad_left) f->pad_left = inflen - offset;
        }
    }
}

static void fmt_value(tg_str *o, const pfmt *f, const char *p) {
    switch (f->kind) {
    case 'b':
        if (*(const uint8_t *)p)
            tg_str_addf(o, "%s", f->pad_bool ? " True" : "True");
        else
            tg_str_add(o, "False", 5);
        return;
    case 'i':
    case 'u':
        if (f->dt == TG_UINT64) {
            uint64_t u;
            memcpy(&u, p, 8);
            tg_str_addf(o, "%*llu", f->width, (unsigned long long)u);
        } else {
            tg_str_addf(o, "%*lld", f->width, (long long)tg_load_i64(f->dt, p));
        }
        return;
    default: break;
    }
    double v = tg_load_f64(f->dt, p);
    if (!isfinite(v)) {
        const char *s = isnan(v) ? "nan" : v < 0 ? "-inf" : "inf";
        tg_str_addf(o, "%*s", f->pad_left + f->pad_right + 1, s);
    } else if (f->exp) {
        fmt_scientific(o, v, f->dt, f->precision, f->min_digits, f->pad_left,
                       f->exp_size);
    } else {
        fmt_positional(o, v, f->dt, f->precision, f->min_digits, f->pad_left,
                       f->pad_right);
    }
}

/* ---- layout: numpy's _formatArray ---- */

typedef struct layout {
    const tg_array *a;
    const pfmt *f;
} layout;

/* Append word to line, first moving line into s when it would pass
 * width (unless the line holds nothing but its indent). */
static void extend_line(tg_str *s, tg_str *line, const char *word, size_t wlen,
                        size_t width, size_t indent_len, const char *indent) {
    if (line->len + wlen > width && line->len > indent_len) {
        size_t n = line->len;
        while (n > 0 && line->s[n - 1] == ' ') n--;
        tg_str_add(s, line->s, n);
        tg_str_add(s, "\n", 1);
        line->len = 0;
        tg_str_add(line, indent, indent_len);
    }
    tg_str_add(line, word, wlen);
}

static void recurse(const layout *L, int d, const char *p, const char *indent,
                    size_t indent_len, size_t width, tg_str *out) {
    const tg_array *a = L->a;
    if (d == a->ndim) {
        fmt_value(out, L->f, p);
        return;
    }
    /* Nested items align one column further right, one column narrower. */
    char next_indent[TG_MAX_NDIM + 2];
    memcpy(next_indent, indent, indent_len);
    next_indent[indent_len] = ' ';
    size_t next_len = indent_len + 1, next_width = width - 1;
    int64_t n = a->shape[d];
    bool sum = L->f->summary && n > 2 * EDGE;
    int64_t lead = sum ? EDGE : 0, trail = sum ? EDGE : n;
    int64_t st = a->strides[d];
    tg_str s = {0};
    if (d == a->ndim - 1) {
        size_t elem_width = width - 1; /* room for "," or "]" */
        tg_str line = {0};
        tg_str_add(&line, indent, indent_len);
        for (int64_t i = 0; i < lead + trail; i++) {
            int64_t k = i < lead ? i : n - (lead + trail - i);
            tg_str w = {0};
            recurse(L, d + 1, p + k * st, next_indent, next_len, next_width, &w);
            extend_line(&s, &line, w.s ? w.s : "", w.len, elem_width, indent_len,
                        indent);
            tg_str_free(&w);
            if (i + 1 < lead + trail) tg_str_add(&line, ", ", 2);
            if (sum && i == lead - 1) {
                extend_line(&s, &line, "...", 3, elem_width, indent_len, indent);
                tg_str_add(&line, ", ", 2);
            }
        }
        tg_str_add(&s, line.s ? line.s : "", line.len);
        tg_str_free(&line);
    } else {
        int blank = a->ndim - 1 - d; /* newlines between rows */
        for (int64_t i = 0; i < lead + trail; i++) {
            int64_t k = i < lead ? i : n - (lead + trail - i);
            tg_str_add(&s, indent, indent_len);
            recurse(L, d + 1, p + k * st, next_indent, next_len, next_width, &s);
            if (i + 1 < lead + trail) {
                tg_str_add(&s, ",", 1);
                for (int b = 0; b < blank; b++) tg_str_add(&s, "\n", 1);
            }
            if (sum && i == lead - 1) {
                tg_str_add(&s, indent, indent_len);
                tg_str_add(&s, "...,", 4);
                for (int b = 0; b < blank; b++) tg_str_add(&s, "\n", 1);
            }
        }
    }
    /* Drop the hanging indent of the first line and bracket the lot. */
    tg_str_add(out, "[", 1);
    if (s.s && s.len >= indent_len) tg_str_add(out, s.s + indent_len, s.len - indent_len);
    tg_str_add(out, "]", 1);
    if (s.oom) out->oom = true;
    tg_str_free(&s);
}

void tg_array_print(FILE *f, const tg_array *a) {
    tg_str o = {0};
    tg_str_addf(&o, "%s (", tg_dtype_name(a->dtype));
    for (int i = 0; i < a->ndim; i++)
        tg_str_addf(&o, "%s%lld", i ? ", " : "", (long long)a->shape[i]);
    tg_str_add(&o, a->ndim == 1 ? ",)\n" : ")\n", a->ndim == 1 ? 3 : 2);
    int64_t size = tg_array_size_inline(a);
    if (size == 0) {
        tg_str_add(&o, "[]", 2);
    } else {
        pfmt fm = {.dt = a->dtype, .kind = tg_dtype_kind(a->dtype),
                   .summary = size > THRESHOLD};
        fit_format(a, &fm);
        layout L = {a, &fm};
        recurse(&L, 0, a->data, " ", 1, LINE_WIDTH, &o);
    }
    tg_str_add(&o, "\n", 1);
    if (o.s) fwrite(o.s, 1, o.len, f);
    tg_str_free(&o);
}

/* The values as one line: what tg_array_print writes after its header,
 * newlines and the indents after them made single spaces ("[[1, 2], [3,
 * 4]]"), for an array of at most max_values elements; for a larger one
 * whose elements are all equal (NaNs included), "(2, 3) of 0." as Theano's
 * debugprint writes such a constant. Returns false, writing nothing, for
 * anything else. */
bool tg_array_brief(const tg_array *a, int64_t max_values, tg_str *out) {
    int64_t size = tg_array_size_inline(a);
    if (size > max_values) {
        if (size > ((int64_t)1 << 24)) return false; /* not worth the scan */
        /* The same bytes (so -0. is not 0., nor 2^62 + 1 2^62), or NaNs
         * of any payload, which all print as nan. */
        size_t e = tg_dtype_size(a->dtype);
        bool nan0 = tg_dtype_is_float(a->dtype) && isnan(tg_array_get_flat(a, 0));
        for (int64_t i = 1; i < size; i++) {
            const char *p = tg_array_elem_flat(a, i);
            if (memcmp(p, a->data, e) && !(nan0 && isnan(tg_load_f64(a->dtype, p)))) return false;
        }
        tg_str_add(out, "(", 1);
        for (int i = 0; i < a->ndim; i++)
            tg_str_addf(out, "%s%lld", i ? ", " : "", (long long)a->shape[i]);
        tg_str_add(out, a->ndim == 1 ? ",) of " : ") of ", a->ndim == 1 ? 6 : 5);
        tg_array one = *a; /* the first element, as a 0-d array */
        one.ndim = 0;
        pfmt fm = {.dt = a->dtype, .kind = tg_dtype_kind(a->dtype)};
        fit_format(&one, &fm);
        fmt_value(out, &fm, a->data);
        return true;
    }
    if (size == 0) {
        tg_str_add(out, "[]", 2);
        return true;
    }
    tg_str o = {0};
    pfmt fm = {.dt = a->dtype, .kind = tg_dtype_kind(a->dtype)};
    fit_format(a, &fm);
    layout L = {a, &fm};
    recurse(&L, 0, a->data, " ", 1, LINE_WIDTH, &o);
    for (size_t i = 0; i < o.len; i++) {
        if (o.s[i] != '\n') {
            tg_str_add(out, o.s + i, 1);
            continue;
        }
        while (i + 1 < o.len && (o.s[i + 1] == '\n' || o.s[i + 1] == ' ')) i++;
        tg_str_add(out, " ", 1);
    }
    if (o.oom) out->oom = true;
    tg_str_free(&o);
    return true;
}

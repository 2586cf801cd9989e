/* The tgviz page: its template with the CSS, d3, the script and the
 * drawing's data put in place of the four markers (tgviz -o X.html, and
 * tgdebug serve's /graph). */
#include <stdio.h>
#include <string.h>

#include "model.h"

/* The page's sources, embedded at build time (tgviz_assets.c). */
extern const unsigned char tgviz_html[], tgviz_css[], tgviz_js[], tgviz_d3[];
extern const size_t tgviz_html_len, tgviz_css_len, tgviz_js_len, tgviz_d3_len;

/* fwrite all of n bytes, or -1. */
static int put(FILE *out, const void *p, size_t n) { return fwrite(p, 1, n, out) == n ? 0 : -1; }

/* The drawing's JSON inside the page's <script>: every '<' (only ever
   inside a JSON string) written as \u003c, so that no name can hold
   "<!--<script>", which would keep the HTML parser from ever ending the
   script block, nor "</script>". */
static int put_data(FILE *out, const char *data) {
    for (const char *p = data;;) {
        const char *lt = strchr(p, '<');
        if (!lt) return put(out, p, strlen(p));
        if (put(out, p, (size_t)(lt - p)) || put(out, "\\u003c", 6)) return -1;
        p = lt + 1;
    }
}

/* The template holds four markers, each replaced by what it names. */
int vz_page_write(FILE *out, const char *data) {
    const char *t = (const char *)tgviz_html, *end = t + tgviz_html_len;
    static const char *const marks[] = {"/*TGVIZ_CSS*/", "/*TGVIZ_D3*/", "/*TGVIZ_JS*/", "/*TGVIZ_DATA*/"};
    while (t < end) {
        const char *best = NULL;
        int which = -1;
        for (int m = 0; m < 4; m++) {
            const char *p = strstr(t, marks[m]);
            if (p && p < end && (!best || p < best)) best = p, which = m;
        }
        if (!best) return put(out, t, (size_t)(end - t));
        if (put(out, t, (size_t)(best - t))) return -1;
        int rc = 0;
        switch (which) {
        case 0: rc = put(out, tgviz_css, tgviz_css_len); break;
        case 1: rc = put(out, tgviz_d3, tgviz_d3_len); break;
        case 2: rc = put(out, tgviz_js, tgviz_js_len); break;
        default: rc = put_data(out, data); break;
        }
        if (rc) return -1;
        t = best + strlen(marks[which]);
    }
    return 0;
}


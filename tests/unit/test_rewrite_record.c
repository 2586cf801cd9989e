/* The rewrite record (docs/optimizer.md, "The record"): replayed over the
 * nodes of the function compiled under -O none (drop each removed key,
 * add each created one, entry by entry; a removed key must be there), it
 * ends at exactly the scheduled nodes of the optimized function; every
 * node of the unoptimized function is among the origins of a scheduled
 * node or was removed for good; origins name only such nodes, each once;
 * a .tgf keeps the record and the origins as they were. Checked on every
 * graph of tests/data/ops and examples/, then on the cases an audit
 * found: a node that dies with a rewrite without being matched (the exp
 * of log(exp x + exp x)), a matched node that other readers keep (the
 * sigmoid of log(sigmoid x) read again), and in-place nodes. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "tg/tgf.h"

/* ---- a list of keys (the graphs are small: linear search) ---- */

typedef struct keys {
    char **k;
    int n, cap;
} keys;

static int keys_find(const keys *s, const char *k) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->k[i], k)) return i;
    return -1;
}

static void keys_add(keys *s, const char *k) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->k = realloc(s->k, sizeof *s->k * (size_t)s->cap);
        assert_non_null(s->k);
    }
    s->k[s->n++] = strdup(k);
}

static void keys_del(keys *s, int i) {
    free(s->k[i]);
    s->k[i] = s->k[--s->n];
}

static void keys_free(keys *s) {
    for (int i = 0; i < s->n; i++) free(s->k[i]);
    free(s->k);
    memset(s, 0, sizeof *s);
}

/* ---- the invariants ---- */

static tg_function *compile_named(tg_graph *g, int fi, const char *preset, const char *const *include) {
    tg_ctx *ctx = tg_ctx_new();
    tg_compile_options o = {.preset = preset, .include = include};
    tg_function *f = tg_function_compile(g, fi, &o, ctx);
    if (!f) print_message("compile (%s): %s\n", preset, tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    return f;
}

/* Check the record of `opt` against the nodes of `none` (the same
 * function, -O none); `what` names it in a failure. Returns the number of
 * problems, each printed. */
static int check_record(const tg_function *none, const tg_function *opt, const char *what) {
    int bad = 0;
    keys orig = {0}, alive = {0};
    for (int i = 0; i < tg_function_node_count(none); i++) {
        keys_add(&orig, tg_function_node_key(none, i));
        keys_add(&alive, tg_function_node_key(none, i));
    }
    for (int e = 0; e < tg_function_rewrite_count(opt); e++) {
        tg_rewrite_info r;
        assert_int_equal(tg_function_rewrite_get(opt, e, &r), 0);
        for (int j = 0; j < r.nremoved; j++) {
            int at = keys_find(&alive, r.removed[j]);
            if (at < 0) {
                print_message("%s: entry %d (%s) removes '%s', which is not there\n", what, e, r.name, r.removed[j]);
                bad++;
            } else {
                keys_del(&alive, at);
            }
        }
        for (int j = 0; j < r.ncreated; j++) {
            if (keys_find(&alive, r.created[j]) >= 0) {
                print_message("%s: entry %d (%s) creates '%s', which is there\n", what, e, r.name, r.created[j]);
                bad++;
            } else {
                keys_add(&alive, r.created[j]);
            }
        }
    }
    keys covered = {0};
    for (int i = 0; i < tg_function_node_count(opt); i++) {
        const char *k = tg_function_node_key(opt, i);
        int at = keys_find(&alive, k);
        if (at < 0) {
            print_message("%s: scheduled node '%s' (%s) is not where the record leads\n", what, k,
                          tg_function_node_op(opt, i));
            bad++;
        } else {
            keys_del(&alive, at);
        }
        const char *const *o;
        int no = tg_function_node_origins(opt, i, &o);
        for (int j = 0; j < no; j++) {
            if (keys_find(&orig, o[j]) < 0) {
                print_message("%s: node '%s' stands for '%s', no node of the function as written\n", what, k, o[j]);
                bad++;
            }
            for (int m = 0; m < j; m++)
                if (!strcmp(o[m], o[j])) {
                    print_message("%s: node '%s' stands for '%s' twice\n", what, k, o[j]);
                    bad++;
                }
            if (keys_find(&covered, o[j]) < 0) keys_add(&covered, o[j]);
        }
    }
    for (int i = 0; i < alive.n; i++) {
        print_message("%s: the record leads to '%s', which is not scheduled\n", what, alive.k[i]);
        bad++;
    }
    /* every node as written: stood for, or removed (and, by the replay
     * above, not there at the end) */
    for (int i = 0; i < orig.n; i++) {
        if (keys_find(&covered, orig.k[i]) >= 0) continue;
        bool removed = false;
        for (int e = 0; e < tg_function_rewrite_count(opt) && !removed; e++) {
            tg_rewrite_info r;
            assert_int_equal(tg_function_rewrite_get(opt, e, &r), 0);
            for (int j = 0; j < r.nremoved && !removed; j++) removed = !strcmp(r.removed[j], orig.k[i]);
        }
        if (!removed) {
            print_message("%s: '%s' is neither stood for nor removed\n", what, orig.k[i]);
            bad++;
        }
    }
    keys_free(&orig);
    keys_free(&alive);
    keys_free(&covered);
    return bad;
}

/* The record and origins of b are those of a. */
static int same_record(const tg_function *a, const tg_function *b, const char *what) {
    int bad = 0, n = tg_function_rewrite_count(a);
    if (n != tg_function_rewrite_count(b)) {
        print_message("%s: %d entries, %d from the .tgf\n", what, n, tg_function_rewrite_count(b));
        return 1;
    }
    for (int e = 0; e < n; e++) {
        tg_rewrite_info r, s;
        assert_int_equal(tg_function_rewrite_get(a, e, &r), 0);
        assert_int_equal(tg_function_rewrite_get(b, e, &s), 0);
        bool same = !strcmp(r.name, s.name) && !strcmp(r.pass, s.pass) && r.nremoved == s.nremoved &&
                    r.ncreated == s.ncreated;
        for (int j = 0; same && j < r.nremoved; j++) same = !strcmp(r.removed[j], s.removed[j]);
        for (int j = 0; same && j < r.ncreated; j++) same = !strcmp(r.created[j], s.created[j]);
        if (!same) {
            print_message("%s: entry %d (%s) differs in the .tgf (%s)\n", what, e, r.name, s.name);
            bad++;
        }
    }
    if (tg_function_node_count(a) != tg_function_node_count(b)) {
        print_message("%s: %d nodes, %d from the .tgf\n", what, tg_function_node_count(a), tg_function_node_count(b));
        return bad + 1;
    }
    for (int i = 0; i < tg_function_node_count(a); i++) {
        const char *const *x, *const *y;
        int nx = tg_function_node_origins(a, i, &x), ny = tg_function_node_origins(b, i, &y);
        bool same = nx == ny && !strcmp(tg_function_node_key(a, i), tg_function_node_key(b, i));
        for (int j = 0; same && j < nx; j++) same = !strcmp(x[j], y[j]);
        if (!same) {
            print_message("%s: the origins of node %d (%s) differ in the .tgf\n", what, i, tg_function_node_key(a, i));
            bad++;
        }
    }
    return bad;
}

/* Every function of the graph file at path (at most four): the record
 * against -O none, and through a .tgf. Returns the problems found. */
static int check_file(const char *path, int *nfunctions) {
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tg_graph_load(path, ctx); /* (one that does not load is not this test's) */
    int bad = 0;
    for (int fi = 0; g && fi < tg_graph_function_count(g) && fi < 4; fi++) {
        char what[512];
        snprintf(what, sizeof what, "%s, function %s", path, tg_graph_function_name(g, fi));
        tg_function *none = compile_named(g, fi, "none", NULL);
        tg_function *opt = none ? compile_named(g, fi, "fast_run", NULL) : NULL;
        if (!none || !opt) { /* (a function that does not compile as written is not this test's) */
            if (none && !opt) {
                print_message("%s: compiles under -O none, not fast_run\n", what);
                bad++;
            }
            tg_function_free(none);
            continue;
        }
        ++*nfunctions;
        bad += check_record(none, opt, what);
        char tgf[64];
        snprintf(tgf, sizeof tgf, "record_%d.tgf", (int)getpid());
        if (tg_tgf_save(tgf, &opt, 1, NULL, ctx) == 0) {
            tg_tgf *t = tg_tgf_load(tgf, NULL, ctx);
            if (!t) {
                print_message("%s: the .tgf does not load: %s\n", what, tg_ctx_message(ctx));
                bad++;
            } else {
                bad += same_record(opt, tg_tgf_function(t, 0), what);
                tg_tgf_free(t);
            }
            unlink(tgf);
        } else {
            print_message("%s: not saved: %s\n", what, tg_ctx_message(ctx));
            bad++;
        }
        tg_function_free(none);
        tg_function_free(opt);
    }
    tg_graph_free(g);
    tg_ctx_free(ctx);
    return bad;
}

static int check_dir(const char *dir, int *nfiles, int *nfunctions) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int bad = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".json")) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        bad += check_file(path, nfunctions);
        ++*nfiles;
    }
    closedir(d);
    return bad;
}

static void test_record_replays_to_the_optimized_graph(void **state) {
    (void)state;
    int nfiles = 0, nfunctions = 0, bad = 0;
    bad += check_dir(TG_SOURCE_DIR "/examples", &nfiles, &nfunctions);
    bad += check_dir(TG_TEST_DATA "/ops", &nfiles, &nfunctions);
    bad += check_dir(TG_TEST_DATA "/tgdebug", &nfiles, &nfunctions);
    print_message("%d files, %d functions, %d problems\n", nfiles, nfunctions, bad);
    assert_true(nfunctions > 100);
    assert_int_equal(bad, 0);
}

/* ---- the cases found ---- */

static tg_graph *load_sq(const char *s) {
    tg_graph *g = tu_load_sq(s);
    assert_non_null(g);
    return g;
}

/* The entry that removed key, or -1. */
static int removed_by(const tg_function *f, const char *key) {
    int at = -1;
    for (int e = 0; e < tg_function_rewrite_count(f); e++) {
        tg_rewrite_info r;
        assert_int_equal(tg_function_rewrite_get(f, e, &r), 0);
        for (int j = 0; j < r.nremoved; j++)
            if (!strcmp(r.removed[j], key)) at = e;
    }
    return at;
}

static bool stands_for(const tg_function *f, int k, const char *key) {
    const char *const *o;
    int no = tg_function_node_origins(f, k, &o);
    for (int j = 0; j < no; j++)
        if (!strcmp(o[j], key)) return true;
    return false;
}

static int sched(const tg_function *f, const char *key) {
    for (int k = 0; k < tg_function_node_count(f); k++)
        if (!strcmp(tg_function_node_key(f, k), key)) return k;
    return -1;
}

/* log(e + e) with e = exp x becomes logaddexp(x, x): the exp dies with
 * the rewrite, which matched only c and d, and is recorded as removed by
 * it (it was in no removed list and no origin list). */
static void test_dead_producer_recorded(void **state) {
    (void)state;
    tg_graph *g = load_sq("{'format':'tg-graph','version':1,"
                          "'variables':[{'id':'x','type':{'dtype':'float64','shape':[3]}}],"
                          "'nodes':[{'op':'exp','inputs':['x'],'outputs':['e']},"
                          "{'op':'add','inputs':['e','e'],'outputs':['c']},"
                          "{'op':'log','inputs':['c'],'outputs':['d']}],"
                          "'functions':{'main':{'inputs':['x'],'outputs':['d']}}}");
    tg_function *none = compile_named(g, 0, "none", NULL), *f = compile_named(g, 0, "fast_run", NULL);
    assert_non_null(none);
    assert_non_null(f);
    int e = removed_by(f, "e");
    assert_true(e >= 0);
    tg_rewrite_info r;
    assert_int_equal(tg_function_rewrite_get(f, e, &r), 0);
    assert_string_equal(r.name, "logaddexp");
    assert_true(removed_by(f, "c") == e && removed_by(f, "d") == e);
    for (int k = 0; k < tg_function_node_count(f); k++) assert_false(stands_for(f, k, "e"));
    assert_int_equal(check_record(none, f, "lae"), 0);
    tg_function_free(none);
    tg_function_free(f);
    tg_graph_free(g);
}

/* log(s) with s = sigmoid x read again by the dot: log_sigmoid makes
 * -softplus(-x) for l, and s stays. s is not removed, and what stands for
 * l does not stand for s (the record said "removed s, l" and the
 * composite claimed s). */
static void test_kept_producer_not_removed(void **state) {
    (void)state;
    tg_graph *g = load_sq("{'format':'tg-graph','version':1,"
                          "'variables':[{'id':'x','type':{'dtype':'float64','shape':[3]}}],"
                          "'nodes':[{'op':'sigmoid','inputs':['x'],'outputs':['s']},"
                          "{'op':'log','inputs':['s'],'outputs':['l']},"
                          "{'op':'dot','inputs':['l','s'],'outputs':['o']}],"
                          "'functions':{'main':{'inputs':['x'],'outputs':['o']}}}");
    static const char *const no_fusion[] = {"fusion", NULL};
    for (int pass = 0; pass < 2; pass++) {
        tg_ctx *ctx = tg_ctx_new();
        tg_compile_options o = {.preset = "fast_run", .exclude = pass ? NULL : no_fusion};
        tg_function *f = tg_function_compile(g, 0, &o, ctx);
        tg_function *none = compile_named(g, 0, "none", NULL);
        assert_non_null(f);
        assert_non_null(none);
        assert_true(removed_by(f, "l") >= 0);
        tg_rewrite_info r;
        assert_int_equal(tg_function_rewrite_get(f, removed_by(f, "l"), &r), 0);
        assert_string_equal(r.name, "log_sigmoid");
        int ks = sched(f, "s");
        assert_true(ks >= 0);
        assert_int_equal(removed_by(f, "s"), -1);
        /* s stands for itself alone; what computes l, for l alone */
        const char *const *keys;
        assert_int_equal(tg_function_node_origins(f, ks, &keys), 1);
        assert_string_equal(keys[0], "s");
        int nl = 0;
        for (int k = 0; k < tg_function_node_count(f); k++)
            if (stands_for(f, k, "l")) {
                nl++;
                assert_false(stands_for(f, k, "s"));
            }
        assert_true(nl >= 1);
        assert_int_equal(check_record(none, f, "lsig"), 0);
        tg_function_free(f);
        tg_function_free(none);
        tg_ctx_free(ctx);
    }
    tg_graph_free(g);
}

/* An in-place node lives on under its key: its entry removes and creates
 * it, as a merge's survivor (it removed it and created nothing). The
 * lengths are large: the VM keeps small results from call to call, and
 * the pass leaves them be. */
static void test_inplace_entry_replays(void **state) {
    (void)state;
    tg_graph *g = load_sq("{'format':'tg-graph','version':1,"
                          "'variables':[{'id':'x','type':{'dtype':'float64','shape':[100000]}}],"
                          "'nodes':[{'op':'add','inputs':['x','x'],'outputs':['a']},"
                          "{'op':'exp','inputs':['a'],'outputs':['b']},"
                          "{'op':'tanh','inputs':['b'],'outputs':['c']}],"
                          "'functions':{'main':{'inputs':['x'],'outputs':['c']}}}");
    static const char *const inplace[] = {"inplace", NULL};
    tg_function *none = compile_named(g, 0, "none", NULL), *f = compile_named(g, 0, "none", inplace);
    assert_non_null(none);
    assert_non_null(f);
    int n = 0;
    for (int e = 0; e < tg_function_rewrite_count(f); e++) {
        tg_rewrite_info r;
        assert_int_equal(tg_function_rewrite_get(f, e, &r), 0);
        if (strcmp(r.name, "inplace")) continue;
        n++;
        assert_int_equal(r.nremoved, 1);
        assert_int_equal(r.ncreated, 1);
        assert_string_equal(r.removed[0], r.created[0]);
        int k = sched(f, r.created[0]);
        assert_true(k >= 0);
        const char *const *keys;
        assert_int_equal(tg_function_node_origins(f, k, &keys), 1);
        assert_string_equal(keys[0], r.created[0]);
    }
    assert_int_equal(n, 2); /* b over a, c over b */
    assert_int_equal(check_record(none, f, "inplace"), 0);
    tg_function_free(none);
    tg_function_free(f);
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dead_producer_recorded),
        cmocka_unit_test(test_kept_producer_not_removed),
        cmocka_unit_test(test_inplace_entry_replays),
        cmocka_unit_test(test_record_replays_to_the_optimized_graph),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

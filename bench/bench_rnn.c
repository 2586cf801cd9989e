/* A vanilla RNN's training step through scan: forward
 *   h_t = tanh(x_t Wx + h_{t-1} Wh + b),  cost = mean(h * y),
 * the gradient by the format's `grad` (back-propagation through time, a
 * reverse scan), and the SGD update of Wx, Wh, b (one call of `train`),
 * float32, batch 20, for the 2016 paper's small and medium LSTM
 * benchmark sizes (hidden 200 over 20 steps, hidden 600 over 40 steps;
 * the input size is the hidden size, as the embeddings of those Penn
 * Treebank models are; the 10,000-word softmax, one product outside the
 * loop, is left out so that the loop is what is timed). Words per second
 * (batch * steps per step), best of 3 rounds, beside PyTorch on the CPU
 * with the same thread count (peers/rnn.py: a Python loop of matmuls and
 * torch.tanh, and torch.nn.RNN), measured in the same run.
 *
 *   OMP_NUM_THREADS=2 build-bench/bench/bench_rnn [MIN_SECONDS]
 */
#include <unistd.h>

#include "bench_common.h"
#include "io/io.h"

static double min_s = 0.5;

typedef struct cfg {
    int H, T, B;
} cfg;
static const cfg cfgs[] = {{200, 20, 20}, {600, 40, 20}};
enum { NCFG = 2 };

static float *uniform(size_t n, float scale, unsigned *seed) {
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = ((float)rand_r(seed) / (float)RAND_MAX - 0.5f) * scale;
    return p;
}

/* A shared float32 value as base64. */
static char *shared_b64(const float *p, size_t n) { return tg_base64_encode(p, n * sizeof *p); }

static char *graph_json(const cfg *c) {
    int H = c->H, D = c->H, B = c->B;
    unsigned seed = 11;
    float *wx = uniform((size_t)D * H, 0.1f, &seed), *wh = uniform((size_t)H * H, 0.1f, &seed);
    float *b = calloc((size_t)H, sizeof *b);
    char *bx = shared_b64(wx, (size_t)D * H), *bh = shared_b64(wh, (size_t)H * H), *bb = shared_b64(b, (size_t)H);
    free(wx);
    free(wh);
    free(b);
    size_t cap = strlen(bx) + strlen(bh) + strlen(bb) + 8192;
    char *j = malloc(cap);
    snprintf(j, cap,
             "{\"format\": \"tg-graph\", \"version\": 1, \"variables\": ["
             "{\"id\": \"x\", \"type\": {\"dtype\": \"float32\", \"shape\": [null, %d, %d]}},"
             "{\"id\": \"y\", \"type\": {\"dtype\": \"float32\", \"shape\": [null, %d, %d]}},"
             "{\"id\": \"Wx\", \"type\": {\"dtype\": \"float32\", \"shape\": [%d, %d]}, "
             "\"shared\": {\"dtype\": \"float32\", \"shape\": [%d, %d], \"base64\": \"%s\"}},"
             "{\"id\": \"Wh\", \"type\": {\"dtype\": \"float32\", \"shape\": [%d, %d]}, "
             "\"shared\": {\"dtype\": \"float32\", \"shape\": [%d, %d], \"base64\": \"%s\"}},"
             "{\"id\": \"b\", \"type\": {\"dtype\": \"float32\", \"shape\": [%d]}, "
             "\"shared\": {\"dtype\": \"float32\", \"shape\": [%d], \"base64\": \"%s\"}}],"
             "\"nodes\": ["
             "{\"op\": \"alloc\", \"inputs\": [{\"value\": {\"dtype\": \"float32\", \"data\": 0}}, {\"value\": %d}, {\"value\": %d}], "
             "\"outputs\": [\"h0\"]},"
             "{\"op\": \"scan\", \"inputs\": [\"x\", \"h0\", \"Wx\", \"Wh\", \"b\"], \"outputs\": [\"h\"],"
             " \"attrs\": {\"n_sequences\": 1, \"sequence_taps\": [[0]], \"n_recurrent\": 1,"
             " \"output_taps\": [[-1]], \"n_nonrecurrent\": 0, \"n_non_sequences\": 3,"
             " \"has_n_steps\": false, \"has_until\": false, \"name\": \"rnn\", \"body\": {"
             "  \"variables\": [{\"id\": \"x_t\", \"type\": {\"dtype\": \"float32\", \"shape\": [%d, %d]}},"
             "   {\"id\": \"h_p\", \"type\": {\"dtype\": \"float32\", \"shape\": [%d, %d]}},"
             "   {\"id\": \"Wx_\", \"type\": {\"dtype\": \"float32\", \"shape\": [%d, %d]}},"
             "   {\"id\": \"Wh_\", \"type\": {\"dtype\": \"float32\", \"shape\": [%d, %d]}},"
             "   {\"id\": \"b_\", \"type\": {\"dtype\": \"float32\", \"shape\": [%d]}}],"
             "  \"nodes\": [{\"op\": \"dot\", \"inputs\": [\"x_t\", \"Wx_\"], \"outputs\": [\"xw\"]},"
             "   {\"op\": \"dot\", \"inputs\": [\"h_p\", \"Wh_\"], \"outputs\": [\"hw\"]},"
             "   {\"op\": \"add\", \"inputs\": [\"xw\", \"hw\", \"b_\"], \"outputs\": [\"pre\"]},"
             "   {\"op\": \"tanh\", \"inputs\": [\"pre\"], \"outputs\": [\"h_t\"]}],"
             "  \"inputs\": [\"x_t\", \"h_p\", \"Wx_\", \"Wh_\", \"b_\"], \"outputs\": [\"h_t\"]}}},"
             "{\"op\": \"mul\", \"inputs\": [\"h\", \"y\"], \"outputs\": [\"hy\"]},"
             "{\"op\": \"mean\", \"inputs\": [\"hy\"], \"outputs\": [\"cost\"]},"
             "{\"op\": \"grad\", \"inputs\": [\"cost\", \"Wx\", \"Wh\", \"b\"], \"outputs\": [\"gWx\", \"gWh\", \"gb\"]},"
             "{\"op\": \"mul\", \"inputs\": [{\"value\": 0.1}, \"gWx\"], \"outputs\": [\"sWx\"]},"
             "{\"op\": \"sub\", \"inputs\": [\"Wx\", \"sWx\"], \"outputs\": [\"Wx_next\"]},"
             "{\"op\": \"mul\", \"inputs\": [{\"value\": 0.1}, \"gWh\"], \"outputs\": [\"sWh\"]},"
             "{\"op\": \"sub\", \"inputs\": [\"Wh\", \"sWh\"], \"outputs\": [\"Wh_next\"]},"
             "{\"op\": \"mul\", \"inputs\": [{\"value\": 0.1}, \"gb\"], \"outputs\": [\"sb\"]},"
             "{\"op\": \"sub\", \"inputs\": [\"b\", \"sb\"], \"outputs\": [\"b_next\"]}],"
             "\"functions\": {\"train\": {\"inputs\": [\"x\", \"y\"], \"outputs\": [\"cost\"],"
             " \"updates\": {\"Wx\": \"Wx_next\", \"Wh\": \"Wh_next\", \"b\": \"b_next\"}}}}",
             B, D, B, H, D, H, D, H, bx, H, H, H, H, bh, H, H, bb, B, H, B, D, B, H, D, H, H, H, H);
    free(bx);
    free(bh);
    free(bb);
    return j;
}

int main(int argc, char **argv) {
    if (argc > 1) min_s = atof(argv[1]);
    const char *env = getenv("OMP_NUM_THREADS");
    int threads = env ? atoi(env) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1) threads = 1;
    char args[256];
    snprintf(args, sizeof args, "%d %g %d:%d:%d,%d:%d:%d", threads, min_s, cfgs[0].H, cfgs[0].T, cfgs[0].B,
             cfgs[1].H, cfgs[1].T, cfgs[1].B);
    char *peer = bench_peer("rnn.py", args);
    printf("vanilla RNN training step (forward, BPTT, SGD), float32, batch 20, input = hidden;\n"
           "words per second (higher is better), %d thread%s (tg: OMP_NUM_THREADS, torch: set_num_threads)\n",
           threads, threads == 1 ? "" : "s");
    printf("%6s %5s %12s %12s %12s %9s\n", "hidden", "steps", "tg", "torch loop", "torch nn.RNN", "tg/best");
    for (int ci = 0; ci < NCFG; ci++) {
        const cfg *c = &cfgs[ci];
        tg_ctx *ctx = tg_ctx_new();
        char *json = graph_json(c);
        tg_graph *g = tg_graph_load_string(json, strlen(json), NULL, "bench_rnn", ctx);
        free(json);
        if (!g) bench_die("load", ctx);
        bench_call s = {.ctx = ctx};
        s.f = tg_function_compile(g, tg_graph_function_find(g, "train", ctx), NULL, ctx);
        if (!s.f) bench_die("compile", ctx);
        unsigned seed = 5;
        size_t n = (size_t)c->T * c->B * c->H;
        int64_t shp[3] = {c->T, c->B, c->H};
        float *xd = uniform(n, 1.0f, &seed), *yd = uniform(n, 1.0f, &seed);
        s.in[0] = tg_array_new(TG_FLOAT32, 3, shp);
        s.in[1] = tg_array_new(TG_FLOAT32, 3, shp);
        memcpy(tg_array_data(s.in[0]), xd, n * sizeof *xd);
        memcpy(tg_array_data(s.in[1]), yd, n * sizeof *yd);
        free(xd);
        free(yd);
        /* TG_BENCH_RNN_DUMP=DIR: the graph and inputs, for tgprof. */
        const char *dump = getenv("TG_BENCH_RNN_DUMP");
        if (dump) {
            char path[512];
            snprintf(path, sizeof path, "%s/rnn_%d.json", dump, c->H);
            if (tg_graph_save(g, path, ctx)) bench_die("save", ctx);
            snprintf(path, sizeof path, "%s/x_%d.npy", dump, c->H);
            if (tg_npy_save(path, s.in[0], ctx)) bench_die("save", ctx);
            snprintf(path, sizeof path, "%s/y_%d.npy", dump, c->H);
            if (tg_npy_save(path, s.in[1], ctx)) bench_die("save", ctx);
        }
        double words = (double)c->T * c->B;
        double tgr = bench_rate(bench_run_call, &s, 3, min_s) * words;
        char k1[64], k2[64];
        snprintf(k1, sizeof k1, "loop_%d_%d", c->H, c->T);
        snprintf(k2, sizeof k2, "rnn_%d_%d", c->H, c->T);
        double pl = bench_peer_value(peer, k1), pr = bench_peer_value(peer, k2);
        double best = pl > pr ? pl : pr;
        printf("%6d %5d %12.0f", c->H, c->T, tgr);
        if (pl > 0) printf(" %12.0f", pl); else printf(" %12s", "-");
        if (pr > 0) printf(" %12.0f", pr); else printf(" %12s", "-");
        if (best > 0) printf(" %9.2f\n", tgr / best); else printf(" %9s\n", "-");
        tg_array_free(s.in[0]);
        tg_array_free(s.in[1]);
        tg_function_free(s.f);
        tg_graph_free(g);
        tg_ctx_free(ctx);
    }
    if (!peer) printf("peers: numpy or torch not installed (apt-get install python3-torch)\n");
    printf("tg/best: tg's words per second over the faster PyTorch form (target: >= 1)\n");
    free(peer);
    return 0;
}

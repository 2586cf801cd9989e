/* `composite` bodies on the GPU: CUDA C++ generated from the body,
 * compiled at run time by NVRTC, cached on disk beside the CPU kernels
 * (ops/kcache.c: same folder, lock and hash), loaded with the runtime's
 * library calls (cudaLibraryLoadData, CUDA 12+: no link to the driver
 * library) and launched on the compute stream.
 *
 * The body's statements are the CPU code generator's own
 * (tg_composite_body_emit), so the GPU computes the same formulas:
 * overflow-safe sigmoid/softplus, NaN-propagating maximum/minimum/relu/
 * clip, integer arithmetic wrapping as uint64, bool as 0/1 bytes. The
 * prelude gives them what the CPU prelude gives the C compiler. Arithmetic
 * is compiled with --fmad=false (the CPU kernels use -ffp-contract=off),
 * so only the transcendental functions differ, by CUDA's documented ulps.
 *
 * NVRTC is opened with dlopen at the first composite placed on the GPU,
 * not linked: the library is ~100 MB that a CPU run never needs, and a
 * machine with the CUDA runtime but no NVRTC then keeps its composites on
 * the CPU (one warning line) instead of failing to start.
 *
 * A cache entry is <hash>.cu (the source, for `tgc cache list` and for
 * reading) and <hash>.cubin (target sm_XY, the device's own) or
 * <hash>.ptx (target compute_XY: a device newer than this NVRTC knows,
 * finished by the driver). The code file starts with a line
 * "tg-nvrtc 1 <target> <bytes> <fnv64 of the bytes>", so that a damaged
 * file is found and compiled again rather than handed to the driver.
 */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/nvrtc.h"
#include "io/io.h"
#include "ops/composite.h"
#include "ops/special.h"

#define THREADS 256

/* ---- code generation ---- */

/* What the CPU kernel's prelude gives its body (ops/composite.c), for
 * NVRTC: fixed-width types and the NaN/infinity builtins (NVRTC has no
 * headers or GCC builtins by default), the libm names are CUDA's, and
 * the same sigmoid, softplus, clip and floor division of floats, and
 * gammaln (CUDA's lgamma), digamma, trigamma and polygamma
 * (ops/special.h). */
static const char PRELUDE[] =
    "#ifndef TG_HOST_SHIM\n"
    "typedef signed char int8_t;\ntypedef short int16_t;\ntypedef int int32_t;\n"
    "typedef long long int64_t;\ntypedef unsigned char uint8_t;\ntypedef unsigned short uint16_t;\n"
    "typedef unsigned int uint32_t;\ntypedef unsigned long long uint64_t;\n"
    "#define __builtin_nan(s) __longlong_as_double(0x7ff8000000000000ll)\n"
    "#define __builtin_inf() __longlong_as_double(0x7ff0000000000000ll)\n"
    "#endif\n"
    "#define TG_DEV static __device__ __forceinline__\n"
    "TG_DEV double tg_sigmoid_d(double x) {\n"
    "    double e = exp(-fabs(x)), r = 1.0 / (1.0 + e);\n"
    "    return x >= 0 ? r : (x < 0 ? e * r : x);\n}\n"
    "TG_DEV float tg_sigmoid_f(float x) {\n"
    "    float e = expf(-fabsf(x)), r = 1.0f / (1.0f + e);\n"
    "    return x >= 0 ? r : (x < 0 ? e * r : x);\n}\n"
    /* (fabs: the sum is never negative, but a NaN takes the sign of
     * -fabs(x) through exp and log1p; the CPU's softplus(NaN) has its
     * sign bit clear, ops/composite.c's prelude and vmath.c) */
    "TG_DEV double tg_softplus_d(double x) { return fabs((x > 0 ? x : 0) + log1p(exp(-fabs(x)))); }\n"
    "TG_DEV float tg_softplus_f(float x) { return fabsf((x > 0 ? x : 0) + log1pf(expf(-fabsf(x)))); }\n"
    "#define TG_CLIP(T) TG_DEV T tg_clip_##T(T x, T lo, T hi) { \\\n"
    "    T m = (x > lo || x != x) ? x : lo; return (m < hi || m != m) ? m : hi; }\n"
    "TG_CLIP(int8_t) TG_CLIP(int16_t) TG_CLIP(int32_t) TG_CLIP(int64_t) TG_CLIP(uint8_t)\n"
    "TG_CLIP(uint16_t) TG_CLIP(uint32_t) TG_CLIP(uint64_t) TG_CLIP(float) TG_CLIP(double)\n"
    TG_SPECIAL_FDIVMOD_TEXT(TG_DEV, )
    TG_COMPOSITE_F2I("TG_DEV")
    "TG_DEV double tg_gammaln_d(double x) { return lgamma(x); }\n"
    "TG_DEV float tg_gammaln_f(float x) { return lgammaf(x); }\n"
    TG_SPECIAL_TEXT(TG_DEV);

/* For bodies with float16: tg_half loads and stores, and the rounding of
 * each float16 result (tg_composite_body_emit_half), to nearest even as
 * the CPU's conversions. PTX's cvt does the conversions, so that NVRTC
 * needs no toolkit headers (cuda_fp16.h) at run time. Under TG_HOST_SHIM
 * the includer defines tg_half and the three conversions. */
static const char PRELUDE_HALF[] =
    "#ifndef TG_HOST_SHIM\n"
    "struct tg_half { unsigned short x; };\n"
    "TG_DEV float tg_h2f(tg_half h) { float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h.x)); return f; }\n"
    "TG_DEV tg_half tg_f2h(float f) { tg_half h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h.x) : \"f\"(f)); return h; }\n"
    "TG_DEV tg_half tg_d2h(double d) { tg_half h; asm(\"cvt.rn.f16.f64 %0, %1;\" : \"=h\"(h.x) : \"d\"(d)); return h; }\n"
    "#endif\n"
    "TG_DEV float tg_h(float x) { return tg_h2f(tg_f2h(x)); }\n"
    "TG_DEV float tg_hd(double x) { return tg_h2f(tg_d2h(x)); }\n";

static const char *nv_ctype(tg_dtype dt) { return dt == TG_FLOAT16 ? "float" : tg_composite_ctype(dt); }

char *tg_nvrtc_source(const tg_node *n, const char **why) {
    const char *dummy;
    if (!why) why = &dummy;
    *why = NULL;
    const tg_fgraph *fg = tg_composite_node_body(n);
    if (!fg) {
        *why = "not a composite";
        return NULL;
    }
    const int nin = n->nin, nout = n->nout;
    if (nin != fg->nin || nout != fg->nout) {
        *why = "the body does not match the node";
        return NULL;
    }
    if (nin + nout > TG_NV_MAXOPS) {
        *why = "more inputs and outputs than a kernel's arguments hold";
        return NULL;
    }
    bool half = false;
    for (int k = 0; k < fg->nvars; k++) half |= fg->vars[k]->type.dtype == TG_FLOAT16;
    for (int k = 0; k < nin + nout; k++) {
        const tg_var *v = k < nin ? fg->inputs[k] : fg->outputs[k - nin];
        if (!nv_ctype(v->type.dtype)) {
            *why = "a dtype the kernel generator does not handle";
            return NULL;
        }
    }
    tg_str body = {0}, s = {0};
    char *res = NULL;
    if (!tg_composite_body_emit_half(&body, fg)) {
        *why = body.oom ? "out of memory" : "an op the kernel generator does not handle";
        goto done;
    }
    /* The first line says what the kernel computes (tgc cache list). */
    tg_str_addf(&s, "/* tg composite (cuda): %d in, %d out, ops", nin, nout);
    for (int j = 0; j < fg->nnodes && j < 12; j++) tg_str_addf(&s, " %s", fg->nodes[j]->op->name);
    if (fg->nnodes > 12) tg_str_addf(&s, " ...");
    tg_str_addf(&s, "; %s */\n%s%s", tg_dtype_name(fg->outputs[0]->type.dtype), PRELUDE, half ? PRELUDE_HALF : "");
    /* The argument block: tg_nvrtc_args_pack's layout. */
    tg_str_addf(&s,
                "struct tg_args {\n    long long n;\n    int ndim, flat;\n    long long shape[8];\n"
                "    char *p[%d];\n    long long st[%d][8];\n};\n",
                nin + nout, nin);
    /* One element: inputs at byte offsets o[], outputs at position i. */
    tg_str_addf(&s, "TG_DEV void tg_point(const tg_args &a, long long i, const long long *o) {\n");
    for (int k = 0; k < nin; k++) {
        const char *ct = nv_ctype(fg->inputs[k]->type.dtype);
        if (fg->inputs[k]->type.dtype == TG_FLOAT16) { /* loaded into float, exactly */
            if (n->inputs[k]->type.ndim == 0)
                tg_str_addf(&s, "    const float v%d = tg_h2f(*(const tg_half *)a.p[%d]);\n",
                            fg->inputs[k]->index, nout + k);
            else
                tg_str_addf(&s, "    const float v%d = tg_h2f(*(const tg_half *)(a.p[%d] + o[%d]));\n",
                            fg->inputs[k]->index, nout + k, k);
        } else if (n->inputs[k]->type.ndim == 0) /* 0-d: the same value everywhere */
            tg_str_addf(&s, "    const %s v%d = *(const %s *)a.p[%d];\n", ct, fg->inputs[k]->index, ct,
                        nout + k);
        else
            tg_str_addf(&s, "    const %s v%d = *(const %s *)(a.p[%d] + o[%d]);\n", ct,
                        fg->inputs[k]->index, ct, nout + k, k);
    }
    tg_str_addf(&s, "%s", body.s ? body.s : "");
    for (int k = 0; k < nout; k++) {
        const char *ct = nv_ctype(fg->outputs[k]->type.dtype);
        if (fg->outputs[k]->type.dtype == TG_FLOAT16) /* already a float16 value: exact */
            tg_str_addf(&s, "    ((tg_half *)a.p[%d])[i] = tg_f2h(v%d);\n", k, fg->outputs[k]->index);
        else
            tg_str_addf(&s, "    ((%s *)a.p[%d])[i] = v%d;\n", ct, k, fg->outputs[k]->index);
    }
    tg_str_addf(&s, "}\n");
    /* The grid-stride loop: flat positions, else the broadcast index
     * space decomposed axis by axis (in 32 bits when it fits: 64-bit
     * division is many instructions on a GPU). */
    tg_str flat = {0}, off32 = {0}, off64 = {0};
    for (int k = 0; k < nin; k++) {
        tg_str_addf(&flat, " o[%d] = i * %zu;", k, tg_dtype_size(fg->inputs[k]->type.dtype));
        tg_str_addf(&off32, " o[%d] += (long long)x * a.st[%d][d];", k, k);
        tg_str_addf(&off64, " o[%d] += x * a.st[%d][d];", k, k);
    }
    tg_str_addf(&s,
                "extern \"C\" __global__ void __launch_bounds__(%d) tg_composite_kernel(const tg_args a) {\n"
                "    const long long step = (long long)gridDim.x * blockDim.x;\n"
                "    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
                "    long long o[%d];\n"
                "    if (a.flat) {\n"
                "        for (; i < a.n; i += step) {\n"
                "           %s\n"
                "            tg_point(a, i, o);\n"
                "        }\n"
                "    } else if (a.n <= 0x7fffffffll) {\n"
                "        for (; i < a.n; i += step) {\n"
                "            unsigned r = (unsigned)i;\n"
                "            for (int k = 0; k < %d; k++) o[k] = 0;\n"
                "            for (int d = a.ndim - 1; d >= 0; d--) {\n"
                "                const unsigned len = (unsigned)a.shape[d], x = r %% len;\n"
                "                r /= len;\n"
                "               %s\n"
                "            }\n"
                "            tg_point(a, i, o);\n"
                "        }\n"
                "    } else {\n"
                "        for (; i < a.n; i += step) {\n"
                "            long long r = i;\n"
                "            for (int k = 0; k < %d; k++) o[k] = 0;\n"
                "            for (int d = a.ndim - 1; d >= 0; d--) {\n"
                "                const long long x = r %% a.shape[d];\n"
                "                r /= a.shape[d];\n"
                "               %s\n"
                "            }\n"
                "            tg_point(a, i, o);\n"
                "        }\n"
                "    }\n"
                "}\n",
                THREADS, nin, flat.s ? flat.s : "", nin, off32.s ? off32.s : "", nin,
                off64.s ? off64.s : "");
    if (flat.oom || off32.oom || off64.oom) s.oom = true;
    tg_str_free(&flat);
    tg_str_free(&off32);
    tg_str_free(&off64);
    if (s.oom)
        *why = "out of memory";
    else
        res = tg_strdup(s.s);
done:
    tg_str_free(&s);
    tg_str_free(&body);
    return res;
}

size_t tg_nvrtc_args_pack(int nout, int nin, void *const *out_ptr, const tg_array *const *in,
                          uint64_t scalars, int ndim, const int64_t *shape, unsigned char *buf) {
    const int nops = nout + nin;
    int64_t n = tg_shape_size(ndim, shape), sh[8] = {0};
    int32_t nd = ndim, flat = 1;
    for (int d = 0; d < ndim && d < 8; d++) sh[d] = shape[d];
    for (int i = 0; i < nin; i++)
        if (!(scalars >> i & 1))
            flat &= in[i]->ndim == ndim && tg_shape_equal(ndim, in[i]->shape, shape) &&
                    tg_array_is_contiguous(in[i]);
    memcpy(buf, &n, 8);
    memcpy(buf + 8, &nd, 4);
    memcpy(buf + 12, &flat, 4);
    memcpy(buf + 16, sh, sizeof sh);
    unsigned char *p = buf + 80, *st = p + 8 * nops;
    for (int k = 0; k < nout; k++) memcpy(p + 8 * k, &out_ptr[k], 8);
    for (int i = 0; i < nin; i++) {
        void *d = in[i]->data;
        memcpy(p + 8 * (nout + i), &d, 8);
        /* NumPy broadcasting, as the CPU's drive(): right-aligned axes,
         * stride 0 where the operand has length 1 or no axis. */
        int64_t s[8] = {0};
        const int off = ndim - in[i]->ndim;
        for (int d = 0; d < ndim && d < 8; d++)
            s[d] = d < off || in[i]->shape[d - off] != shape[d] ? 0 : in[i]->strides[d - off];
        memcpy(st + 64 * i, s, sizeof s);
    }
    return (size_t)(80 + 8 * nops + 64 * nin);
}

/* ---- NVRTC, opened at first use ---- */

static const char *const NV_OPTS[] = {"--std=c++17", "--fmad=false", NULL};

static struct {
    char *tried_for; /* the TG_NVRTC value the library was looked up for */
    void *lib;
    int major, minor;
    char why[240];
    __typeof__(nvrtcCreateProgram) *create;
    __typeof__(nvrtcCompileProgram) *compile;
    __typeof__(nvrtcDestroyProgram) *destroy;
    __typeof__(nvrtcGetProgramLogSize) *log_size;
    __typeof__(nvrtcGetProgramLog) *log;
    __typeof__(nvrtcGetCUBINSize) *cubin_size;
    __typeof__(nvrtcGetCUBIN) *cubin;
    __typeof__(nvrtcGetPTXSize) *ptx_size;
    __typeof__(nvrtcGetPTX) *ptx;
    __typeof__(nvrtcVersion) *version;
    __typeof__(nvrtcGetNumSupportedArchs) *narchs;
    __typeof__(nvrtcGetSupportedArchs) *archs;
    __typeof__(nvrtcGetErrorString) *error_string;
} nv;

/* One mutex for NVRTC, the image map and the kernel map. */
static pthread_mutex_t nv_lock = PTHREAD_MUTEX_INITIALIZER;
static tg_nvrtc_stats stats;

/* Open NVRTC for the current TG_NVRTC (lock held): once per value, so
 * that a test can point it elsewhere. The handle is never closed. */
static bool nv_load(void) {
    const char *env = getenv("TG_NVRTC");
    if (!env) env = "";
    if (nv.tried_for && !strcmp(nv.tried_for, env)) return nv.lib != NULL;
    free(nv.tried_for);
    nv.tried_for = strdup(env);
    nv.lib = NULL;
    nv.why[0] = 0;
    void *h = tg_cuda_dlopen(env, "libnvrtc.so", CUDART_VERSION / 1000, "NVRTC", nv.why, sizeof nv.why);
    if (!h) return false;
    bool ok = true;
#define SYM(field, name) ok = ok && (*(void **)&nv.field = dlsym(h, name)) != NULL
    SYM(create, "nvrtcCreateProgram");
    SYM(compile, "nvrtcCompileProgram");
    SYM(destroy, "nvrtcDestroyProgram");
    SYM(log_size, "nvrtcGetProgramLogSize");
    SYM(log, "nvrtcGetProgramLog");
    SYM(cubin_size, "nvrtcGetCUBINSize");
    SYM(cubin, "nvrtcGetCUBIN");
    SYM(ptx_size, "nvrtcGetPTXSize");
    SYM(ptx, "nvrtcGetPTX");
    SYM(version, "nvrtcVersion");
    SYM(narchs, "nvrtcGetNumSupportedArchs");
    SYM(archs, "nvrtcGetSupportedArchs");
    SYM(error_string, "nvrtcGetErrorString");
#undef SYM
    if (!ok || nv.version(&nv.major, &nv.minor) != NVRTC_SUCCESS) {
        snprintf(nv.why, sizeof nv.why, "NVRTC library unusable (a function is missing)");
        return false;
    }
    nv.lib = h;
    nv.why[0] = 0;
    return true;
}

bool tg_nvrtc_available(const char **why) {
    pthread_mutex_lock(&nv_lock);
    bool ok = nv_load();
    if (why) *why = ok ? NULL : nv.why;
    pthread_mutex_unlock(&nv_lock);
    return ok;
}

void tg_nvrtc_version(int *major, int *minor) {
    pthread_mutex_lock(&nv_lock);
    bool ok = nv_load();
    *major = ok ? nv.major : 0;
    *minor = ok ? nv.minor : 0;
    pthread_mutex_unlock(&nv_lock);
}

static _Thread_local char why_buf[300];

/* Compile src for target (lock held): a malloc'ed image, or NULL with
 * *why. PTX keeps its terminating NUL (the loader needs it). */
static char *nv_compile(const char *src, const char *target, size_t *size, const char **why) {
    nvrtcProgram prog;
    char arch[64];
    const char *opts[8];
    int k = 0;
    snprintf(arch, sizeof arch, "--gpu-architecture=%s", target);
    opts[k++] = arch;
    for (int i = 0; NV_OPTS[i]; i++) opts[k++] = NV_OPTS[i];
    nvrtcResult r = nv.create(&prog, src, "tg_composite.cu", 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) {
        snprintf(why_buf, sizeof why_buf, "NVRTC: %s", nv.error_string(r));
        *why = why_buf;
        return NULL;
    }
    stats.compiles++;
    char *img = NULL;
    r = nv.compile(prog, k, opts);
    if (r != NVRTC_SUCCESS) {
        /* The log's first error line says what the generator got wrong. */
        size_t ls = 0;
        char *log = nv.log_size(prog, &ls) == NVRTC_SUCCESS && ls ? malloc(ls + 1) : NULL;
        const char *line = NULL;
        if (log && nv.log(prog, log) == NVRTC_SUCCESS) {
            log[ls] = 0;
            line = strstr(log, "error");
            if (!line) line = log;
        }
        snprintf(why_buf, sizeof why_buf, "NVRTC failed to compile a composite: %.*s",
                 line ? (int)strcspn(line, "\n") : 0, line ? line : "");
        if (!line) snprintf(why_buf, sizeof why_buf, "NVRTC: %s", nv.error_string(r));
        free(log);
        *why = why_buf;
        goto done;
    }
    bool cubin = !strncmp(target, "sm_", 3);
    size_t n = 0;
    r = cubin ? nv.cubin_size(prog, &n) : nv.ptx_size(prog, &n);
    if (r == NVRTC_SUCCESS && n && (img = malloc(n)))
        r = cubin ? nv.cubin(prog, img) : nv.ptx(prog, img);
    if (r != NVRTC_SUCCESS || !img || !n) {
        free(img);
        img = NULL;
        *why = "NVRTC gave no code";
        goto done;
    }
    *size = n;
done:
    nv.destroy(&prog);
    return img;
}

/* ---- the image map and the disk ---- */

typedef struct nv_image {
    char hash[33];
    char *img; /* NULL: the compile failed (not tried again) */
    size_t size;
    char *why;
    struct nv_image *next;
} nv_image;
static nv_image *images;

static uint64_t fnv64(const void *p, size_t n) {
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

#define HDR_FMT "tg-nvrtc 1 %s %zu %016" PRIx64 "\n"

/* The image in file `path`, written for target, when the file is whole:
 * malloc'ed, or NULL (*corrupt set when it exists but does not check
 * out). */
static char *read_image(const char *path, const char *target, size_t *size, bool *corrupt) {
    *corrupt = false;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat st;
    char *buf = NULL, *img = NULL;
    if (fstat(fd, &st) != 0 || st.st_size <= 0 || st.st_size > (1 << 28)) goto bad;
    size_t len = (size_t)st.st_size, got = 0;
    if (!(buf = malloc(len + 1))) goto done;
    while (got < len) {
        ssize_t r = read(fd, buf + got, len - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) goto bad;
        got += (size_t)r;
    }
    buf[len] = 0;
    char t[32];
    size_t n;
    uint64_t sum;
    int hl = 0;
    if (sscanf(buf, "tg-nvrtc 1 %31s %zu %" SCNx64 "%n", t, &n, &sum, &hl) != 3 || hl <= 0 ||
        (size_t)hl >= len || buf[hl] != '\n' || strcmp(t, target))
        goto bad;
    hl++;
    if (len - (size_t)hl != n || fnv64(buf + hl, n) != sum) goto bad;
    if (strncmp(target, "sm_", 3) && buf[len - 1] != 0) goto bad; /* PTX ends in NUL */
    if (!(img = malloc(n))) goto done;
    memcpy(img, buf + hl, n);
    *size = n;
    goto done;
bad:
    *corrupt = true;
done:
    free(buf);
    close(fd);
    return img;
}

static void write_image(const char *path, const char *target, const char *img, size_t n) {
    char hdr[128];
    int hl = snprintf(hdr, sizeof hdr, HDR_FMT, target, n, fnv64(img, n));
    char *buf = malloc((size_t)hl + n);
    if (!buf) return;
    memcpy(buf, hdr, (size_t)hl);
    memcpy(buf + hl, img, n);
    tg_ctx *ctx = tg_ctx_new();
    tg_file_write_atomic(path, buf, (size_t)hl + n, ctx); /* no disk copy: only slower */
    tg_ctx_free(ctx);
    free(buf);
}

/* tg_nvrtc_image with the lock held; *hash receives the key. */
static const void *image_get(const char *src, const char *target, size_t *size, const char **why,
                             char hash[33]) {
    *why = NULL;
    if (!nv_load()) {
        *why = nv.why;
        stats.failures++;
        return NULL;
    }
    char ver[32];
    snprintf(ver, sizeof ver, "nvrtc %d.%d", nv.major, nv.minor);
    const char *parts[16];
    int np = 0;
    parts[np++] = src;
    parts[np++] = ver;
    parts[np++] = target;
    for (int i = 0; NV_OPTS[i]; i++) parts[np++] = NV_OPTS[i];
    tg_kcache_hash(parts, np, hash);
    for (nv_image *e = images; e; e = e->next)
        if (!strcmp(e->hash, hash)) {
            if (!e->img) {
                *why = e->why;
                stats.failures++;
                return NULL;
            }
            stats.memory_hits++;
            *size = e->size;
            return e->img;
        }
    nv_image *e = calloc(1, sizeof *e);
    if (!e) {
        *why = "out of memory";
        stats.failures++;
        return NULL;
    }
    memcpy(e->hash, hash, 33);
    bool cubin = !strncmp(target, "sm_", 3), corrupt = false;
    char *dir = tg_kcache_dir(), path[4200] = "", spath[4200], lpath[4200];
    int lfd = -1;
    if (dir && tg_kcache_mkdir(dir) == 0) {
        snprintf(path, sizeof path, "%s/%s.%s", dir, hash, cubin ? "cubin" : "ptx");
        snprintf(spath, sizeof spath, "%s/%s.cu", dir, hash);
        snprintf(lpath, sizeof lpath, "%s/lock", dir);
    }
    if (*path) {
        e->img = read_image(path, target, &e->size, &corrupt);
        if (corrupt) stats.corrupt++;
        if (!e->img) {
            /* Compile under the folder's lock; another process may have
             * written the file while we waited. */
            lfd = open(lpath, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
            if (lfd >= 0 && flock(lfd, LOCK_EX) != 0) {
                close(lfd);
                lfd = -1;
            }
            e->img = read_image(path, target, &e->size, &corrupt);
        }
        if (e->img) {
            stats.disk_hits++;
            tg_kcache_mark_used(path);
        }
    }
    if (!e->img) {
        e->img = nv_compile(src, target, &e->size, why);
        if (e->img && *path) {
            tg_ctx *ctx = tg_ctx_new();
            tg_file_write_atomic(spath, src, strlen(src), ctx);
            tg_ctx_free(ctx);
            write_image(path, target, e->img, e->size);
        }
    }
    if (lfd >= 0) close(lfd); /* releases the flock */
    tg_free(dir);
    if (!e->img) {
        stats.failures++;
        e->why = strdup(*why ? *why : "NVRTC failed");
        if (!e->why) {
            free(e);
            return NULL;
        }
    }
    e->next = images;
    images = e;
    *size = e->size;
    return e->img;
}

const void *tg_nvrtc_image(const char *src, const char *target, size_t *size, const char **why) {
    char hash[33];
    const char *w = NULL;
    pthread_mutex_lock(&nv_lock);
    const void *img = image_get(src, target, size, &w, hash);
    /* Copy a message that lives in the map or nv: the caller reads it
     * after the lock is gone. */
    if (w && w != why_buf) {
        snprintf(why_buf, sizeof why_buf, "%s", w);
        w = why_buf;
    }
    pthread_mutex_unlock(&nv_lock);
    if (why) *why = w;
    return img;
}

tg_nvrtc_stats tg_nvrtc_stats_get(void) {
    pthread_mutex_lock(&nv_lock);
    tg_nvrtc_stats s = stats;
    s.launches = __atomic_load_n(&stats.launches, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&nv_lock);
    return s;
}

void tg_nvrtc_forget(void) {
    pthread_mutex_lock(&nv_lock);
    while (images) {
        nv_image *e = images;
        images = e->next;
        free(e->img);
        free(e->why);
        free(e);
    }
    pthread_mutex_unlock(&nv_lock);
}

/* ---- on the device ---- */

/* A loaded kernel, shared by every node with the same source; kept for
 * the life of the process (nodes' slots point at it). */
typedef struct nv_kernel {
    char hash[33];
    cudaLibrary_t lib;
    cudaKernel_t fn;
    struct nv_kernel *next;
} nv_kernel;
static nv_kernel *kernels;

/* The device's target (lock held): sm_XY when this NVRTC compiles for
 * it, compute_<newest NVRTC knows> for a newer device (the driver
 * finishes the PTX), NULL for an older one. */
static const char *device_target(const char **why) {
    static char target[24];
    static bool done;
    if (done) return *target ? target : NULL;
    int major = 0, minor = 0, n = 0, archs[128];
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) != cudaSuccess) {
        cudaGetLastError();
        *why = "the device's compute capability could not be read";
        return NULL;
    }
    done = true;
    const int arch = major * 10 + minor;
    if (nv.narchs(&n) != NVRTC_SUCCESS || n < 1 || n > 128 || nv.archs(archs) != NVRTC_SUCCESS) n = 0;
    int newest = 0;
    for (int i = 0; i < n; i++) {
        if (archs[i] == arch) snprintf(target, sizeof target, "sm_%d", arch);
        if (archs[i] > newest) newest = archs[i];
    }
    if (!*target && newest && arch > newest) snprintf(target, sizeof target, "compute_%d", newest);
    if (!*target) *why = "NVRTC does not compile for this device's architecture";
    return *target ? target : NULL;
}

static int nv_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx);

tg_nvrtc_run_fn tg_nvrtc_kernel(const tg_node *n) {
    if (strcmp(n->op->name, "composite")) return NULL;
    if (tg_composite_node_dev_get(n)) return nv_run;
    if (!tg_cuda_available()) return NULL;
    char *src = tg_nvrtc_source(n, NULL);
    if (!src) return NULL; /* a body the GPU cannot run: the CPU, silently */
    const char *why = NULL;
    nv_kernel *k = NULL;
    pthread_mutex_lock(&nv_lock);
    const char *target = NULL;
    if (nv_load())
        target = device_target(&why);
    else
        why = nv.why;
    size_t size = 0;
    char hash[33];
    const void *img = target ? image_get(src, target, &size, &why, hash) : NULL;
    if (img) {
        for (k = kernels; k && strcmp(k->hash, hash); k = k->next) {}
        if (!k && (k = calloc(1, sizeof *k))) {
            cudaError_t e = cudaLibraryLoadData(&k->lib, img, NULL, NULL, 0, NULL, NULL, 0);
            const bool loaded = e == cudaSuccess;
            if (loaded) e = cudaLibraryGetKernel(&k->fn, k->lib, "tg_composite_kernel");
            if (e != cudaSuccess) {
                cudaGetLastError();
                if (loaded) cudaLibraryUnload(k->lib); /* loaded, but without the kernel */
                snprintf(why_buf, sizeof why_buf, "the compiled kernel does not load (%s)",
                         cudaGetErrorString(e));
                why = why_buf;
                free(k);
                k = NULL;
            } else {
                memcpy(k->hash, hash, 33);
                k->next = kernels;
                kernels = k;
            }
        }
    }
    static bool warned;
    if (!k && why && !warned) {
        warned = true;
        fprintf(stderr, "tg: warning: composite kernels stay on the CPU: %s\n", why);
    }
    pthread_mutex_unlock(&nv_lock);
    tg_free(src);
    if (!k) return NULL;
    tg_composite_node_dev_set(n, k);
    return nv_run;
}

static int nv_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    nv_kernel *k = tg_composite_node_dev_get(n);
    if (!k && tg_nvrtc_kernel(n)) k = tg_composite_node_dev_get(n);
    if (!k) return tg_errorf(ctx, TG_ERUNTIME, "composite: no GPU kernel for this node");
    const tg_fgraph *fg = tg_composite_node_body(n);
    const int nin = n->nin, nout = n->nout;
    int ndim, rc;
    int64_t shape[TG_MAX_NDIM];
    int nds[TG_NV_MAXOPS];
    const int64_t *shs[TG_NV_MAXOPS];
    uint64_t scalars = 0;
    for (int i = 0; i < nin; i++) {
        nds[i] = in[i]->ndim;
        shs[i] = in[i]->shape;
        if (n->inputs[i]->type.ndim == 0) scalars |= (uint64_t)1 << i;
    }
    if (tg_broadcast_shapes(nin, nds, shs, &ndim, shape, NULL))
        return tg_broadcast_error((const tg_array *const *)in, nin, ctx);
    /* Outputs: an input overwritten in place under the CPU kernel's rule
     * (each thread reads element i of every input before it writes
     * element i), else a pool block. */
    void *optr[TG_NV_MAXOPS];
    for (int j = 0; j < nout; j++) {
        tg_dtype od = fg->outputs[j]->type.dtype;
        int src = n->inplace ? n->inplace[j] : -1;
        if (src >= 0 && in[src]->dtype == od && in[src]->ndim == ndim &&
            tg_shape_equal(ndim, in[src]->shape, shape) && tg_array_is_contiguous(in[src]) &&
            tg_array_is_exclusive(in[src])) {
            if (out[j] != in[src]) {
                tg_array_free(out[j]);
                out[j] = tg_array_ref(in[src]);
            }
        } else if ((rc = tg_cuda_prepare(&out[j], od, ndim, shape, ctx))) {
            return rc;
        }
        optr[j] = out[j]->data;
    }
    int64_t total = tg_shape_size(ndim, shape);
    if (total == 0) return TG_OK;
    unsigned char args[TG_NV_ARGS_MAX] __attribute__((aligned(16)));
    tg_nvrtc_args_pack(nout, nin, optr, (const tg_array *const *)in, scalars, ndim, shape, args);
    int64_t blocks = (total + THREADS - 1) / THREADS;
    dim3 grid = {(unsigned)(blocks > 65535 ? 65535 : blocks), 1, 1}, block = {THREADS, 1, 1};
    void *params[1] = {args};
    cudaError_t e = cudaLaunchKernel((const void *)k->fn, grid, block, params, 0,
                                     (cudaStream_t)tg_cuda_compute_stream());
    if (e != cudaSuccess) {
        cudaGetLastError();
        return tg_errorf(ctx, e == cudaErrorMemoryAllocation ? TG_ENOMEM : TG_ERUNTIME, "CUDA: %s",
                         cudaGetErrorString(e));
    }
    __atomic_add_fetch(&stats.launches, 1, __ATOMIC_RELAXED);
    return TG_OK;
}

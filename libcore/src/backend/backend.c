/* The registry of device backends: the CUDA backend when this build has
 * one (TG_HAVE_CUDA), nothing otherwise; or, in tests, the backend a test
 * registered in its place (tg_backend_test_set). */
#include "backend/backend.h"

#ifdef TG_HAVE_CUDA
#include "backend/cuda/cuda.h"
#endif

static const tg_backend *test_backend;
void tg_backend_test_set(const tg_backend *b) { test_backend = b; }

const tg_backend *tg_backend_cuda(void) {
    if (__builtin_expect(test_backend != NULL, 0)) return test_backend;
#ifdef TG_HAVE_CUDA
    return tg_cuda_backend_get();
#else
    return NULL;
#endif
}

bool tg_array_on_device(const tg_array *a) {
    const tg_backend *b = tg_backend_cuda();
    return b && b->is_device(a);
}

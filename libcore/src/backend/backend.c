/* The registry of device backends: the CUDA backend when this build has
 * one (TG_HAVE_CUDA), nothing otherwise. */
#include "backend/backend.h"

#ifdef TG_HAVE_CUDA
#include "backend/cuda/cuda.h"
#endif

const tg_backend *tg_backend_cuda(void) {
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

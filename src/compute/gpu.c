/* gpu.c — the GPU facade (gpu.h) over the Vulkan backend, or "no GPU" when
 * the build has none. */
#include "compute/gpu.h"
#include "util/error.h"

#include <string.h>

#ifdef CMF_HAVE_VULKAN
#include "compute/vulkan/vk_backend.h"

cmf_status cmf__gpu_probe(cmf__gpu_info *out) { return cmf__vk_probe(out); }

cmf__backend *cmf__gpu_backend_new(void) { return cmf__vk_backend_new(); }

uint64_t cmf__gpu_weight_bytes(int dtype, uint64_t stored_bytes, uint64_t n_elements)
{
    return cmf__vk_weight_bytes(dtype, stored_bytes, n_elements);
}
#else
static cmf_status none(void)
{
    return cmf__error(CMF_ERR_UNSUPPORTED, "this build has no GPU backend (built without glslc or the Vulkan headers)");
}

cmf_status cmf__gpu_probe(cmf__gpu_info *out)
{
    memset(out, 0, sizeof *out);
    return none();
}

cmf__backend *cmf__gpu_backend_new(void)
{
    (void)none();
    return NULL;
}

uint64_t cmf__gpu_weight_bytes(int dtype, uint64_t stored_bytes, uint64_t n_elements)
{
    (void)dtype;
    (void)n_elements;
    return stored_bytes;
}
#endif

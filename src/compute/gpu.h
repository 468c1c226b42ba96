/* gpu.h — the GPU as the layers above the compute core see it, whatever
 * API drives it (Vulkan, when the build has it): the device a backend would
 * be made on, a backend on it, and how many bytes a weight takes there.
 * The engine's --gpu auto and `cmf info --gpu` ask these instead of a
 * backend's own headers. Without a GPU backend in the build, every call
 * answers ERR_UNSUPPORTED ("this build has no GPU backend ..."). */
#ifndef CMF_COMPUTE_GPU_H
#define CMF_COMPUTE_GPU_H

#include "compute/backend.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct cmf__gpu_info {
    char name[1024];   /* as the backend's device() names it */
    uint64_t memory;   /* bytes of the heap weights, activations and the KV cache go to */
    bool software;     /* a CPU implementation (Mesa's lavapipe) */
} cmf__gpu_info;

/* The device a GPU backend would take, without making one. ERR_UNSUPPORTED
 * (message set) when there is none. Thread-safe. */
cmf_status cmf__gpu_probe(cmf__gpu_info *out);
/* A backend on that device; NULL with the message set. */
cmf__backend *cmf__gpu_backend_new(void);
/* Bytes a weight of `dtype` (stored_bytes in the file, n_elements values)
 * takes on the device: the one sizing rule the upload follows. */
uint64_t cmf__gpu_weight_bytes(int dtype, uint64_t stored_bytes, uint64_t n_elements);

#endif

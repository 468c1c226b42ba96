/* vk_backend.h — the Vulkan compute backend (when the build has it:
 * CMF_HAVE_VULKAN). The Vulkan loader is found at run time, so one binary
 * runs where there is no loader or no device: the constructor then fails
 * with a message and callers stay on the CPU. */
#ifndef CMF_COMPUTE_VULKAN_VK_BACKEND_H
#define CMF_COMPUTE_VULKAN_VK_BACKEND_H

#include "compute/backend.h"
#include "compute/gpu.h"

/* A backend on the chosen device (CMF_VK_DEVICE=<index>, else the first
 * discrete GPU, else the first device). NULL (message set:
 * ERR_UNSUPPORTED for no loader / no device, ERR_BACKEND, ERR_NOMEM). */
cmf__backend *cmf__vk_backend_new(void);
/* Bytes of the memory heap the backend puts weights, activations and the
 * KV cache in (device-local memory; system memory on lavapipe). */
uint64_t cmf__vk_backend_memory(const cmf__backend *be);
/* Whether the shaders read weights of `dtype` as stored (f32, f16, bf16,
 * q8_row, q8_2f, q4_block); the backend holds every other dtype as an f16
 * copy. */
bool cmf__vk_reads_dtype(int dtype);
/* Bytes a weight takes on the device: its stored bytes for a dtype the
 * shaders read, else its f16 copy (2 bytes an element). The one sizing
 * rule: the upload allocates this, and --gpu auto sums it. */
uint64_t cmf__vk_weight_bytes(int dtype, uint64_t stored_bytes, uint64_t n_elements);

/* Whether prompt chunks (9 tokens or more) multiply weights of 16 bits or
 * less on NV cooperative matrices (f16 operands, f32 sums: activations
 * rounded to f16), else the f32 tiled GEMM. The default where the device
 * has VK_NV_cooperative_matrix; CMF_VK_COOP=0 keeps the f32 tile,
 * CMF_VK_COOP=2 takes the 128 x 128 tiling. */
bool cmf__vk_backend_coop(const cmf__backend *be);

/* The device a backend would be created on, without creating it (no
 * pipelines, no queue), as compute/gpu.h describes it (memory: as
 * cmf__vk_backend_memory). ERR_UNSUPPORTED (message set) when there is no
 * loader or device. Asked once per process, then answered from memory;
 * thread-safe. */
cmf_status cmf__vk_probe(cmf__gpu_info *out);

#endif

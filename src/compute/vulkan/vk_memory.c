/* vk_memory.c — the Vulkan backend's memory: buffers (device-local, or
 * host-visible and mapped for the per-step parameter rows), host copies
 * through a bounded staging buffer on the upload command buffer (never the
 * one compute records into), and the weights and model vectors made
 * resident once per backend (dtypes without a shader of their own
 * dequantized to f16 on the way). A buffer a recording may name is freed
 * only with the epoch bumped, so no recording naming it replays. */
#include "compute/vulkan/vk_be.h"
#include "util/error.h"
#include "util/half.h"

#include <stdlib.h>
#include <string.h>

/* ---- buffers ------------------------------------------------------------------------ */
/* A buffer of `bytes` in memory type `type`, mapped (and zeroed) when `map`
 * (type must then be host-visible); others are zeroed by a copy. */
cmf_status cmf__vk_buffer_make(vk_be *be, size_t bytes, uint32_t type, bool map, VkBufferUsageFlags usage,
                               const char *what, cmf__buffer **out)
{
    *out = NULL;
    size_t size = ((bytes ? bytes : 4) + 255) / 256 * 256;
    cmf__buffer *buf = calloc(1, sizeof *buf);
    if (!buf) return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", what);
    VkBufferCreateInfo bi = {VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, NULL, 0, size, usage, VK_SHARING_MODE_EXCLUSIVE, 0,
                             NULL};
    VkResult r = vkCreateBuffer(be->dev, &bi, NULL, &buf->buf);
    VkMemoryRequirements mr;
    if (r == VK_SUCCESS) {
        vkGetBufferMemoryRequirements(be->dev, buf->buf, &mr);
        VkMemoryAllocateInfo ai = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, NULL, mr.size, type};
        r = vkAllocateMemory(be->dev, &ai, NULL, &buf->mem);
    }
    if (r == VK_SUCCESS) r = vkBindBufferMemory(be->dev, buf->buf, buf->mem, 0);
    if (r == VK_SUCCESS && map) r = vkMapMemory(be->dev, buf->mem, 0, VK_WHOLE_SIZE, 0, (void **)&buf->map);
    if (r != VK_SUCCESS) {
        if (buf->mem) vkFreeMemory(be->dev, buf->mem, NULL);
        if (buf->buf) vkDestroyBuffer(be->dev, buf->buf, NULL);
        free(buf);
        cmf_status st = cmf__vk_fail(r, "buffer allocation");
        return cmf__error(st, "%s: %zu bytes on %s: %s", what, bytes, be->name, cmf_last_error());
    }
    if (map) memset(buf->map, 0, size);
    buf->size = bytes, buf->alloc = size;
    *out = buf;
    return CMF_OK;
}

void cmf__vk_buffer_destroy(vk_be *be, cmf__buffer *buf)
{
    if (!buf) return;
    if (buf->map) vkUnmapMemory(be->dev, buf->mem);
    vkFreeMemory(be->dev, buf->mem, NULL);
    vkDestroyBuffer(be->dev, buf->buf, NULL);
    free(buf);
}

/* A freed buffer may be named by a recorded graph: none is replayed after. */
static void buffer_free_locked(vk_be *be, cmf__buffer *buf)
{
    if (!buf) return;
    be->epoch++;
    cmf__vk_buffer_destroy(be, buf);
}

static cmf_status span_ok(const cmf__buffer *buf, size_t off, size_t bytes)
{
    return cmf__buffer_span_check(buf != NULL, buf ? buf->size : 0, off, bytes, "vulkan");
}

/* ---- host copies -------------------------------------------------------------------- */
#define STAGING_BYTES ((size_t)64 << 20) /* weights go up through a bounded staging buffer */

/* Copies between host memory and a device-local buffer through the
 * staging buffer, STAGING_BYTES at a time, on the upload command buffer
 * (never the one compute records into). */
static cmf_status xfer(vk_be *be, cmf__buffer *dev, size_t off, void *host, size_t bytes, bool to_device)
{
    cmf_status st = CMF_OK;
    if (!be->staging) {
        if ((st = cmf__vk_buffer_make(be, STAGING_BYTES, be->stage_type, true,
                                      VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT, "staging",
                                      &be->staging)))
            return st;
    }
    for (size_t done = 0; done < bytes && !st;) {
        size_t n = bytes - done < STAGING_BYTES ? bytes - done : STAGING_BYTES;
        if (to_device) memcpy(be->staging->map, (const uint8_t *)host + done, n);
        VkCommandBufferBeginInfo bi = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, NULL,
                                       VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT, NULL};
        VkBufferCopy region = {to_device ? 0 : off + done, to_device ? off + done : 0, n};
        VkSubmitInfo si = {VK_STRUCTURE_TYPE_SUBMIT_INFO, NULL, 0, NULL, NULL, 1, &be->upload_cb, 0, NULL};
        VkResult r;
        vkResetCommandBuffer(be->upload_cb, 0);
        if ((r = vkBeginCommandBuffer(be->upload_cb, &bi)) == VK_SUCCESS) {
            if (to_device) vkCmdCopyBuffer(be->upload_cb, be->staging->buf, dev->buf, 1, &region);
            else vkCmdCopyBuffer(be->upload_cb, dev->buf, be->staging->buf, 1, &region);
            r = vkEndCommandBuffer(be->upload_cb);
        }
        vkResetFences(be->dev, 1, &be->upload_fence);
        if (r == VK_SUCCESS) r = vkQueueSubmit(be->queue, 1, &si, be->upload_fence);
        if (r == VK_SUCCESS) r = vkWaitForFences(be->dev, 1, &be->upload_fence, VK_TRUE, UINT64_MAX);
        if (r != VK_SUCCESS) st = cmf__vk_fail(r, to_device ? "upload" : "readback");
        else if (!to_device) memcpy((uint8_t *)host + done, be->staging->map, n);
        done += n;
    }
    return st;
}

/* Zeroes a range of a device-local buffer: vkCmdFillBuffer over its
 * 4-byte-aligned middle, staging copies for the unaligned ends. */
static cmf_status fill_zero(vk_be *be, cmf__buffer *dev, size_t off, size_t bytes)
{
    static const uint8_t zeros[8]; /* the unaligned ends: at most 6 bytes */
    size_t a0 = (off + 3) / 4 * 4, a1 = (off + bytes) / 4 * 4;
    cmf_status st = CMF_OK;
    if (a0 >= a1) return xfer(be, dev, off, (void *)zeros, bytes, true); /* under 8 bytes */
    if (a0 > off) st = xfer(be, dev, off, (void *)zeros, a0 - off, true);
    if (!st && off + bytes > a1) st = xfer(be, dev, a1, (void *)zeros, off + bytes - a1, true);
    if (st) return st;
    VkCommandBufferBeginInfo bi = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, NULL,
                                   VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT, NULL};
    VkSubmitInfo si = {VK_STRUCTURE_TYPE_SUBMIT_INFO, NULL, 0, NULL, NULL, 1, &be->upload_cb, 0, NULL};
    VkResult r;
    vkResetCommandBuffer(be->upload_cb, 0);
    if ((r = vkBeginCommandBuffer(be->upload_cb, &bi)) == VK_SUCCESS) {
        vkCmdFillBuffer(be->upload_cb, dev->buf, a0, a1 - a0, 0);
        r = vkEndCommandBuffer(be->upload_cb);
    }
    vkResetFences(be->dev, 1, &be->upload_fence);
    if (r == VK_SUCCESS) r = vkQueueSubmit(be->queue, 1, &si, be->upload_fence);
    if (r == VK_SUCCESS) r = vkWaitForFences(be->dev, 1, &be->upload_fence, VK_TRUE, UINT64_MAX);
    return r == VK_SUCCESS ? CMF_OK : cmf__vk_fail(r, "buffer clear");
}

static cmf_status clear_locked(vk_be *be, cmf__buffer *buf, size_t off, size_t bytes)
{
    cmf_status st = span_ok(buf, off, bytes);
    if (st || !bytes) return st;
    if (buf->map) {
        memset(buf->map + off, 0, bytes);
        return CMF_OK;
    }
    return fill_zero(be, buf, off, bytes);
}

/* ---- the backend table's buffer entries ----------------------------------------------- */
/* Every entry point of the backend table takes be->mu (the *_locked
 * functions are the bodies, called with it held): the queue, the upload
 * command buffer and fence, the staging buffer, the weight table and the
 * recordings are the backend's alone, shared by every session on it. A
 * set/get of a host-visible buffer touches only that buffer (a session's
 * own, used by one thread at a time) and takes no lock. */
cmf_status cmf__vk_buffer_new_locked(vk_be *be, size_t bytes, unsigned flags, const char *what, cmf__buffer **out)
{
    bool host = flags & CMF__BUF_HOST;
    cmf_status st = cmf__vk_buffer_make(be, bytes, host ? be->mem_type : be->local_type, host,
                                        VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                            VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                        what, out);
    if (!st && !host && (st = clear_locked(be, *out, 0, bytes))) { /* the contract: zeroed */
        cmf__vk_buffer_destroy(be, *out);
        *out = NULL;
    }
    return st;
}

cmf_status cmf__vk_buffer_new(cmf__backend *b, size_t bytes, unsigned flags, const char *what, cmf__buffer **out)
{
    vk_be *be = (vk_be *)b;
    pthread_mutex_lock(&be->mu);
    cmf_status st = cmf__vk_buffer_new_locked(be, bytes, flags, what, out);
    pthread_mutex_unlock(&be->mu);
    return st;
}

void cmf__vk_buffer_free(cmf__backend *b, cmf__buffer *buf)
{
    vk_be *be = (vk_be *)b;
    if (!buf) return;
    pthread_mutex_lock(&be->mu);
    buffer_free_locked(be, buf);
    pthread_mutex_unlock(&be->mu);
}

cmf_status cmf__vk_set(cmf__backend *b, cmf__buffer *buf, size_t off, const void *src, size_t bytes)
{
    cmf_status st = span_ok(buf, off, bytes);
    if (st || !bytes) return st;
    if (buf->map) {
        memcpy(buf->map + off, src, bytes);
        return CMF_OK;
    }
    vk_be *be = (vk_be *)b;
    pthread_mutex_lock(&be->mu);
    st = xfer(be, buf, off, (void *)src, bytes, true);
    pthread_mutex_unlock(&be->mu);
    return st;
}

cmf_status cmf__vk_get(cmf__backend *b, const cmf__buffer *buf, size_t off, void *dst, size_t bytes)
{
    cmf_status st = span_ok(buf, off, bytes);
    if (st || !bytes) return st;
    if (buf->map) {
        memcpy(dst, buf->map + off, bytes);
        return CMF_OK;
    }
    vk_be *be = (vk_be *)b;
    pthread_mutex_lock(&be->mu);
    st = xfer(be, (cmf__buffer *)buf, off, dst, bytes, false);
    pthread_mutex_unlock(&be->mu);
    return st;
}

cmf_status cmf__vk_clear(cmf__backend *b, cmf__buffer *buf, size_t off, size_t bytes)
{
    vk_be *be = (vk_be *)b;
    if (buf && buf->map) return clear_locked(be, buf, off, bytes);
    pthread_mutex_lock(&be->mu);
    cmf_status st = clear_locked(be, buf, off, bytes);
    pthread_mutex_unlock(&be->mu);
    return st;
}

/* A scratch buffer of at least `bytes` (host-visible when `host`), grown by replacement. */
cmf_status cmf__vk_ensure(vk_be *be, cmf__buffer **buf, size_t bytes, bool host, const char *what)
{
    if (*buf && (*buf)->size >= bytes) return CMF_OK;
    cmf__buffer *nb = NULL;
    cmf_status st = cmf__vk_buffer_new_locked(be, bytes + bytes / 2, host ? CMF__BUF_HOST : 0, what, &nb);
    if (st) return st;
    buffer_free_locked(be, *buf);
    *buf = nb;
    return CMF_OK;
}

/* ---- weights and model vectors ----------------------------------------------------- */
/* dtypes the shaders read directly (weight_at in common.glsl); every other
 * supported dtype is dequantized to f16 at upload */
bool cmf__vk_reads_dtype(int dt)
{
    return dt == CMF_DTYPE_F32 || dt == CMF_DTYPE_F16 || dt == CMF_DTYPE_BF16 || dt == CMF_DTYPE_Q8_ROW ||
           dt == CMF_DTYPE_Q8_2F || dt == CMF_DTYPE_Q4_BLOCK;
}

uint64_t cmf__vk_weight_bytes(int dtype, uint64_t stored_bytes, uint64_t n_elements)
{
    return cmf__vk_reads_dtype(dtype) ? stored_bytes : 2 * n_elements;
}


/* Uploads a weight of a dtype the shaders do not read, dequantized to
 * f16, a block of rows at a time. */
static cmf_status upload_f16(vk_be *be, cmf__buffer *dev, const cmf__qmat *w)
{
    const size_t cols = (size_t)w->cols, per = STAGING_BYTES / 2 / (cols * 2) ? STAGING_BYTES / 2 / (cols * 2) : 1;
    float *row = malloc(cols * 4);
    uint16_t *half = malloc(per * cols * 2);
    cmf_status st = row && half ? CMF_OK : cmf__error(CMF_ERR_NOMEM, "vulkan: out of memory dequantizing a weight");
    for (int64_t r0 = 0; r0 < w->rows && !st; r0 += (int64_t)per) {
        int64_t nr = w->rows - r0 < (int64_t)per ? w->rows - r0 : (int64_t)per;
        for (int64_t r = 0; r < nr; r++) {
            cmf__qmat_decode_row(w, r0 + r, row);
            for (size_t i = 0; i < cols; i++) half[(size_t)r * cols + i] = cmf__f32_to_f16(row[i]);
        }
        st = xfer(be, dev, (size_t)r0 * cols * 2, half, (size_t)nr * cols * 2, true);
    }
    free(row);
    free(half);
    return st;
}

/* The device copy of `bytes` at `host` (a weight w of dtype, or, with
 * dtype -1 and w NULL, a model f32 vector), uploaded on first use. */
static cmf_status resident(vk_be *be, const void *host, uint64_t bytes, int dtype, const cmf__qmat *w,
                           cmf__buffer **out, int *dev_dtype)
{
    for (int i = 0; i < be->n_w; i++)
        if (be->w[i].host == host && be->w[i].bytes == bytes && be->w[i].dtype == dtype) {
            *out = be->w[i].buf;
            if (dev_dtype) *dev_dtype = be->w[i].dev_dtype;
            return CMF_OK;
        }
    if (be->n_w == be->cap_w) {
        int cap = be->cap_w ? 2 * be->cap_w : 256;
        wmap *nw = realloc(be->w, (size_t)cap * sizeof *nw);
        if (!nw) return cmf__error(CMF_ERR_NOMEM, "vulkan: out of memory for the weight table");
        be->w = nw;
        be->cap_w = cap;
    }
    const bool native = !w || cmf__vk_reads_dtype(dtype);
    const uint64_t dev_bytes = w ? cmf__vk_weight_bytes(dtype, bytes, (uint64_t)w->rows * (uint64_t)w->cols) : bytes;
    if (dev_bytes > UINT32_MAX) /* the shaders index bytes with 32 bits */
        return cmf__error(CMF_ERR_UNSUPPORTED, "vulkan: a weight of %llu bytes on the device (over 4 GiB)",
                          (unsigned long long)dev_bytes);
    cmf__buffer *buf = NULL;
    cmf_status st = cmf__vk_buffer_make(be, (size_t)dev_bytes, be->local_type, false,
                                        VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                        "weight upload", &buf);
    if (!st) st = native ? xfer(be, buf, 0, (void *)host, (size_t)bytes, true) : upload_f16(be, buf, w);
    if (st) {
        cmf__vk_buffer_destroy(be, buf);
        return st;
    }
    be->w[be->n_w++] = (wmap){host, bytes, dtype, native ? dtype : CMF_DTYPE_F16, buf};
    *out = buf;
    if (dev_dtype) *dev_dtype = be->w[be->n_w - 1].dev_dtype;
    return CMF_OK;
}

cmf_status cmf__vk_weight_buf(vk_be *be, const cmf__qmat *w, cmf__buffer **out, int *dev_dtype)
{
    const cmf__dtype_info *di = cmf__dtype_get(w->dtype);
    if (!di || !di->supported)
        return cmf__error(CMF_ERR_UNSUPPORTED, "vulkan: weight dtype %d has no decoder", w->dtype);
    return resident(be, w->data, w->nbytes, w->dtype, w, out, dev_dtype);
}

/* A model f32 vector of n values on the device. */
cmf_status cmf__vk_vec_buf(vk_be *be, const float *v, int64_t n, cmf__buffer **out)
{
    return resident(be, v, (uint64_t)n * 4, -1, NULL, out, NULL);
}


const uint8_t *cmf__vk_buffer_map(const cmf__buffer *buf) { return buf->map; }

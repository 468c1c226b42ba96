/* vk_backend.c — the Vulkan compute backend: the table the engine calls
 * (buffers and host copies: vk_memory.c), a device and compute queue made
 * on the device vk_device.c picks, and a graph recorded into one command
 * buffer per compute (one dispatch a node: vk_record.c; fused ops expanded
 * by vk_fused.c), replayed while the graph stays the same. What it cannot
 * run is refused at prepare with ERR_UNSUPPORTED naming the node, before
 * anything runs (vk_graph.c). Every entry point takes the backend's lock
 * (several sessions on several threads share one backend); the loader's
 * entry points and one instance are set up once per process. */
#include "compute/vulkan/vk_be.h"
#include "util/error.h"
#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cmf_status upload_one(void *ctx, const cmf__qmat *w)
{
    cmf__buffer *buf;
    return cmf__vk_weight_buf(ctx, w, &buf, NULL);
}

static cmf_status vk_prepare(cmf__backend *b, const cmf__graph *g)
{
    vk_be *be = (vk_be *)b;
    cmf_status st = CMF_OK;
    pthread_mutex_lock(&be->mu);
    for (int k = 0; k < g->n && !st; k++) {
        const cmf__node *nd = &g->nodes[k];
        if (!(st = cmf__vk_node_ok(nd, k))) st = cmf__vk_each_weight(nd, upload_one, be);
    }
    pthread_mutex_unlock(&be->mu);
    return st;
}

/* ---- recording and replaying a graph ----------------------------------------------------- */
/* The graph's signature in be->sig: every node, then its descriptor's
 * bytes (a descriptor changed in place is another graph). */
static cmf_status signature(vk_be *be, const cmf__graph *g, size_t *len)
{
    size_t n = 0;
    for (int k = 0; k < g->n; k++) n += sizeof(cmf__node) + cmf__vk_ext_bytes(&g->nodes[k]);
    if (n > be->sig_cap) {
        uint8_t *ns = realloc(be->sig, n);
        if (!ns) return cmf__error(CMF_ERR_NOMEM, "vulkan: out of memory for a graph signature");
        be->sig = ns, be->sig_cap = n;
    }
    uint8_t *o = be->sig;
    for (int k = 0; k < g->n; k++) {
        const cmf__node *nd = &g->nodes[k];
        memcpy(o, nd, sizeof *nd);
        o += sizeof *nd;
        if (cmf__vk_ext_bytes(nd)) memcpy(o, nd->ext, cmf__vk_ext_bytes(nd)), o += cmf__vk_ext_bytes(nd);
    }
    *len = n;
    return CMF_OK;
}

/* Records graph g into gr (its vectors need vbytes). */
static cmf_status record_graph(vk_be *be, vk_graph *gr, const cmf__graph *g, size_t vbytes, size_t sig_len)
{
    cmf_status st = CMF_OK;
    gr->valid = false;
    gr->n_copies = 0;
    if (!gr->vec || gr->vec->size < vbytes) {
        cmf__vk_buffer_destroy(be, gr->vec); /* only this graph named it, and it is being re-recorded */
        gr->vec = NULL;
        if ((st = cmf__vk_buffer_make(be, vbytes + vbytes / 2, be->mem_type, true, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
                              "graph vectors", &gr->vec)))
            return st;
    }
    uint8_t *sig = realloc(gr->sig, sig_len ? sig_len : 1);
    if (!sig) return cmf__error(CMF_ERR_NOMEM, "vulkan: out of memory for a graph signature");
    gr->sig = sig;
    vkResetCommandBuffer(gr->cb, 0);
    VkCommandBufferBeginInfo bi = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, NULL, 0, NULL};
    VkResult vr = vkBeginCommandBuffer(gr->cb, &bi);
    if (vr != VK_SUCCESS) return cmf__vk_fail(vr, "vkBeginCommandBuffer");
    if (be->prof && !gr->qpool) {
        VkQueryPoolCreateInfo qi = {VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, NULL, 0, VK_QUERY_TYPE_TIMESTAMP, N_QUERIES, 0};
        if (!(gr->qpipe = malloc((N_QUERIES - 1) * sizeof *gr->qpipe)) ||
            vkCreateQueryPool(be->dev, &qi, NULL, &gr->qpool) != VK_SUCCESS)
            gr->qpool = VK_NULL_HANDLE; /* untimed */
    }
    gr->n_q = 0;
    if (gr->qpool) {
        vkCmdResetQueryPool(gr->cb, gr->qpool, 0, N_QUERIES);
        vkCmdWriteTimestamp(gr->cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, gr->qpool, 0);
    }
    vk_rec r = {be, gr, 0};
    for (int k = 0; k < g->n && !st; k++) st = cmf__vk_fused(&r, &g->nodes[k]);
    vr = vkEndCommandBuffer(gr->cb); /* also on failure: leaves it resettable */
    if (!st && vr != VK_SUCCESS) st = cmf__vk_fail(vr, "vkEndCommandBuffer");
    if (st) return st;
    memcpy(gr->sig, be->sig, sig_len);
    gr->sig_len = sig_len, gr->epoch = be->epoch, gr->valid = true;
    return CMF_OK;
}

/* CMF_VK_PROFILE: the step's dispatch times into the per-pipeline sums. */
static void profile_add(vk_be *be, const vk_graph *gr)
{
    uint64_t ts[N_QUERIES];
    if (vkGetQueryPoolResults(be->dev, gr->qpool, 0, (uint32_t)gr->n_q + 1, sizeof ts, ts, sizeof *ts,
                              VK_QUERY_RESULT_64_BIT) != VK_SUCCESS)
        return;
    for (int i = 0; i < gr->n_q; i++) {
        be->prof_ms[gr->qpipe[i]] += (double)(ts[i + 1] - ts[i]) * be->ts_period * 1e-6;
        be->prof_calls[gr->qpipe[i]]++;
    }
}

/* CMF_VK_PROFILE: the sums, largest first, on stderr. */
static void profile_print(const vk_be *be)
{
    double total = 0;
    for (int i = 0; i <= P_COUNT; i++) total += be->prof_ms[i];
    fprintf(stderr, "vulkan profile (GPU time per pipeline, %.1f ms in all):\n", total);
    bool done[P_COUNT + 1] = {false};
    for (;;) {
        int best = -1;
        for (int i = 0; i <= P_COUNT; i++)
            if (!done[i] && be->prof_calls[i] && (best < 0 || be->prof_ms[i] > be->prof_ms[best])) best = i;
        if (best < 0) break;
        done[best] = true;
        fprintf(stderr, "  %-14s %9llu calls %10.2f ms %5.1f%%\n", cmf__vk_pipe_name(best),
                (unsigned long long)be->prof_calls[best], be->prof_ms[best],
                total > 0 ? 100.0 * be->prof_ms[best] / total : 0.0);
    }
}

static cmf_status vk_compute(cmf__backend *bk, const cmf__graph *g)
{
    vk_be *be = (vk_be *)bk;
    cmf_status st = CMF_OK;
    pthread_mutex_lock(&be->mu);
    size_t vbytes = 256, fused = 4, sig_len = 0;
    for (int k = 0; k < g->n && !st; k++) {
        const cmf__node *nd = &g->nodes[k];
        if (!(st = cmf__vk_node_ok(nd, k))) st = cmf__vk_check_step(nd);
        vbytes += (cmf__vk_vec_bytes(nd) + 255) / 256 * 256 + 256;
        if (cmf__vk_fused_bytes(nd) > fused) fused = cmf__vk_fused_bytes(nd);
    }
    /* sized before recording: a buffer replaced while recording would leave
     * earlier commands pointing at a freed one (replacing it bumps the epoch) */
    if (!st) st = cmf__vk_ensure(be, &be->fused, fused, false, "fused-op scratch");
    if (!st) st = signature(be, g, &sig_len);
    vk_graph *gr = NULL, *lru = &be->graphs[0];
    for (int i = 0; i < N_GRAPHS && !st && !gr; i++) {
        vk_graph *c = &be->graphs[i];
        if (c->valid && c->epoch == be->epoch && c->sig_len == sig_len && !memcmp(c->sig, be->sig, sig_len)) gr = c;
        if (!c->valid || (lru->valid && c->used < lru->used)) lru = c;
    }
    if (!st && gr) { /* a replay: this step's vectors, then the same commands */
        for (int i = 0; i < gr->n_copies; i++) memcpy(gr->vec->map + gr->copies[i].off, gr->copies[i].host, gr->copies[i].bytes);
    } else if (!st) {
        gr = lru;
        st = record_graph(be, gr, g, vbytes, sig_len);
        CMF_DEBUG("vulkan: recorded a graph of %d nodes (slot %d)", g->n, (int)(gr - be->graphs));
    }
    if (!st) {
        VkResult vr;
        gr->used = ++be->tick;
        VkSubmitInfo si = {VK_STRUCTURE_TYPE_SUBMIT_INFO, NULL, 0, NULL, NULL, 1, &gr->cb, 0, NULL};
        vkResetFences(be->dev, 1, &be->fence);
        if ((vr = vkQueueSubmit(be->queue, 1, &si, be->fence)) != VK_SUCCESS ||
            (vr = vkWaitForFences(be->dev, 1, &be->fence, VK_TRUE, UINT64_MAX)) != VK_SUCCESS)
            st = cmf__vk_fail(vr, vr == VK_ERROR_DEVICE_LOST ? "the device was lost:" : "queue submit");
        if (!st && gr->qpool && gr->n_q) profile_add(be, gr);
    }
    pthread_mutex_unlock(&be->mu);
    return st;
}

/* ---- lifetime ------------------------------------------------------------------------ */
void cmf__vk_free(cmf__backend *b)
{
    vk_be *be = (vk_be *)b;
    if (be->dev) {
        vkDeviceWaitIdle(be->dev);
        for (int i = 0; i < be->n_w; i++) cmf__vk_buffer_destroy(be, be->w[i].buf);
        if (be->prof) profile_print(be);
        for (int i = 0; i < N_GRAPHS; i++) {
            cmf__vk_buffer_destroy(be, be->graphs[i].vec);
            free(be->graphs[i].sig);
            free(be->graphs[i].copies);
            free(be->graphs[i].qpipe);
            if (be->graphs[i].qpool) vkDestroyQueryPool(be->dev, be->graphs[i].qpool, NULL);
        }
        cmf__vk_buffer_destroy(be, be->fused);
        cmf__vk_buffer_destroy(be, be->dummy);
        cmf__vk_buffer_destroy(be, be->staging);
        for (int i = 0; i < P_COUNT; i++)
            if (be->pipe[i]) vkDestroyPipeline(be->dev, be->pipe[i], NULL);
        for (int i = 0; i < N_MV_DT; i++)
            for (int n = 0; n < N_MV_NT; n++)
                if (be->mv[i][n]) vkDestroyPipeline(be->dev, be->mv[i][n], NULL);
        if (be->layout) vkDestroyPipelineLayout(be->dev, be->layout, NULL);
        if (be->dsl) vkDestroyDescriptorSetLayout(be->dev, be->dsl, NULL);
        if (be->fence) vkDestroyFence(be->dev, be->fence, NULL);
        if (be->upload_fence) vkDestroyFence(be->dev, be->upload_fence, NULL);
        if (be->cpool) vkDestroyCommandPool(be->dev, be->cpool, NULL);
        vkDestroyDevice(be->dev, NULL);
    }
    /* be->inst is the process's (vk_device.c): it outlives every backend */
    pthread_mutex_destroy(&be->mu);
    free(be->sig);
    free(be->w);
    free(be);
}

static const char *vk_device(const cmf__backend *b) { return ((const vk_be *)b)->name; }

uint64_t cmf__vk_backend_memory(const cmf__backend *b) { return ((const vk_be *)b)->local_bytes; }

bool cmf__vk_backend_coop(const cmf__backend *b) { return ((const vk_be *)b)->coop; }

static const cmf__backend_ops vk_ops = {
    .name = "vulkan",
    .free = cmf__vk_free,
    .device = vk_device,
    .buffer_new = cmf__vk_buffer_new,
    .buffer_free = cmf__vk_buffer_free,
    .set = cmf__vk_set,
    .get = cmf__vk_get,
    .clear = cmf__vk_clear,
    .prepare = vk_prepare,
    .compute = vk_compute,
};

static cmf__backend *backend_new(void);

cmf__backend *cmf__vk_backend_new(void)
{
    LSAN_PAUSE();
    cmf__backend *be = backend_new();
    LSAN_RESUME();
    return be;
}

static cmf__backend *backend_new(void)
{
    vk_be *be = cmf__vk_open();
    if (!be) return NULL;
    be->base.ops = &vk_ops;
    cmf_status st = CMF_OK;
    VkResult r;
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qi = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, NULL, 0, be->qfam, 1, &prio};
    const char *exts[] = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME};
    VkPhysicalDeviceCooperativeMatrixFeaturesNV cm = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV, NULL,
                                                      VK_TRUE, VK_FALSE};
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, .pNext = &cm,
                                            .shaderFloat16 = VK_TRUE, .vulkanMemoryModel = VK_TRUE};
    VkDeviceCreateInfo di = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, be->coop ? &f12 : NULL, 0, 1, &qi, 0, NULL,
                             be->coop ? 2 : 1, exts, NULL};
    if ((r = vkCreateDevice(be->pd, &di, NULL, &be->dev)) != VK_SUCCESS) {
        st = cmf__vk_fail(r, "vkCreateDevice");
        goto fail;
    }
    vkGetDeviceQueue(be->dev, be->qfam, 0, &be->queue);
    VkCommandPoolCreateInfo cp = {VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, NULL,
                                  VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, be->qfam};
    VkFenceCreateInfo fi = {VK_STRUCTURE_TYPE_FENCE_CREATE_INFO, NULL, 0};
    if ((r = vkCreateCommandPool(be->dev, &cp, NULL, &be->cpool)) != VK_SUCCESS ||
        (r = vkCreateFence(be->dev, &fi, NULL, &be->fence)) != VK_SUCCESS ||
        (r = vkCreateFence(be->dev, &fi, NULL, &be->upload_fence)) != VK_SUCCESS) {
        st = cmf__vk_fail(r, "command pool");
        goto fail;
    }
    VkCommandBufferAllocateInfo ca = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, NULL, be->cpool,
                                      VK_COMMAND_BUFFER_LEVEL_PRIMARY, 1};
    for (int i = 0; i < N_GRAPHS && r == VK_SUCCESS; i++) r = vkAllocateCommandBuffers(be->dev, &ca, &be->graphs[i].cb);
    if (r != VK_SUCCESS || (r = vkAllocateCommandBuffers(be->dev, &ca, &be->upload_cb)) != VK_SUCCESS) {
        st = cmf__vk_fail(r, "command buffer");
        goto fail;
    }
    if ((st = cmf__vk_make_pipelines(be)) || (st = cmf__vk_buffer_new_locked(be, 256, 0, "vulkan: unused binding", &be->dummy)))
        goto fail;
    return &be->base;
fail:
    (void)st;
    cmf__vk_free(&be->base);
    return NULL;
}


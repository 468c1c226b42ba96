/* vk_internal.h — what the Vulkan backend's files share (vk_record.c
 * records primitive dispatches; vk_fused.c expands the fused ops — MoE,
 * gated DeltaNet, Gemma-4 per-layer inputs and tail — into them; the rest
 * is in vk_be.h). Nothing here names a Vulkan type: the expansion only
 * builds nodes. */
#ifndef CMF_COMPUTE_VULKAN_VK_INTERNAL_H
#define CMF_COMPUTE_VULKAN_VK_INTERNAL_H

#include "compute/backend.h"
#include <stddef.h>
#include <stdint.h>

/* Dispatches with no op of their own in the backend table, recorded for
 * the fused ops' steps (cmf__node.op holds them; ext is the fused op's). */
#define CMF__VK_ZERO ((cmf__op)(CMF__OP_COUNT + 0))      /* dst = 0 */
#define CMF__VK_MOE_ROUTE ((cmf__op)(CMF__OP_COUNT + 1)) /* dst [n][2E] = weights, selection marks of logits a; ext = cmf__moe_layer, bits */
#define CMF__VK_MOE_ACC ((cmf__op)(CMF__OP_COUNT + 2))   /* dst += w * a: i[0] mode (moe_acc.comp), b = weights column, c = marks column */
#define CMF__VK_GDN_CONV ((cmf__op)(CMF__OP_COUNT + 3))  /* dst [n][C] = conv of the qkvz rows a; b = seq; ext = cmf__gdn_op */
#define CMF__VK_GDN_REC ((cmf__op)(CMF__OP_COUNT + 4))   /* dst [n][nv*dv] = recurrence of conv rows a with qkvz|ba rows c; b = seq */
#define CMF__VK_PLE_MIX ((cmf__op)(CMF__OP_COUNT + 5))   /* in place on dst (the projection): ids a; ext = cmf__gemma4_ple */

typedef struct vk_rec vk_rec; /* one recording (vk_be.h) */

/* node's v is a model array that stays in place (uploaded once, not copied each step) */
#define CMF__VK_V_RESIDENT 1u

/* Records one primitive node (a backend-table op or one of the above). */
cmf_status cmf__vk_record(vk_rec *r, const cmf__node *nd, unsigned flags);
/* The device scratch the fused ops' steps use (sized by cmf__vk_fused_bytes before recording). */
cmf__buffer *cmf__vk_fused_scratch(vk_rec *r);

/* The host mapping of a buffer (host-visible ones), else NULL. */
const uint8_t *cmf__vk_buffer_map(const cmf__buffer *buf);

/* vk_graph.c */
#define CMF__VK_MAX_EXPERTS 8192 /* routing runs in one invocation per token */
/* ERR_UNSUPPORTED naming node k when the backend has no shader for it. */
cmf_status cmf__vk_node_ok(const cmf__node *nd, int k);
/* This step's ids, positions and slots against what they index:
 * ERR_BOUNDS as the CPU says it; ERR_UNSUPPORTED when they are not in a
 * host-visible (CMF__BUF_HOST) buffer. */
cmf_status cmf__vk_check_step(const cmf__node *nd);
/* Bytes of the host vectors a node's dispatch copies each step. */
size_t cmf__vk_vec_bytes(const cmf__node *nd);
/* Bytes of a node's descriptor (ext) a recording depends on. */
size_t cmf__vk_ext_bytes(const cmf__node *nd);
/* Values per scale of a q8 KV view (its group, else its columns). */
int64_t cmf__vk_kv_group(const cmf__ten *t);

/* vk_fused.c */
/* Bytes of fused scratch node nd needs (0 for primitive ops). */
size_t cmf__vk_fused_bytes(const cmf__node *nd);
/* Calls fn on every weight matrix node nd reads (w and the fused op's); stops at the first error. */
cmf_status cmf__vk_each_weight(const cmf__node *nd, cmf_status (*fn)(void *ctx, const cmf__qmat *w), void *ctx);
/* Records a fused node as its steps. */
cmf_status cmf__vk_fused(vk_rec *r, const cmf__node *nd);

#endif

/* pc.h — the push constants of every cmf shader, slot by slot: PC_N_U
 * words (u) and PC_N_F floats (f), filled by vk_record.c (k.u[PC_...])
 * and read by the shaders (p.u[PC_...], the block in common.glsl), so the
 * two sides name each slot once. Plain #defines, read by C and by glslc.
 * Offsets (_OFF) and row pitches (_NB) are in 4-byte words from the start
 * of their binding. A slot means what its op's family below says; the
 * first eight words and two floats are every op's unless its family names
 * them otherwise. Numbers stay put: a change here is a change of both. */
#ifndef CMF_COMPUTE_VULKAN_SHADERS_PC_H
#define CMF_COMPUTE_VULKAN_SHADERS_PC_H

#define PC_N_U 24 /* words: 96 bytes */
#define PC_N_F 8  /* floats after them: 128 bytes in all */

/* every op: the views of dst, a and b, and dst's shape */
#define PC_DST_OFF 0
#define PC_DST_NB 1
#define PC_A_OFF 2
#define PC_A_NB 3
#define PC_B_OFF 4
#define PC_B_NB 5
#define PC_ROWS 6
#define PC_COLS 7
#define PC_N_TOK 6 /* PC_ROWS's slot: the tokens of the ops over a's (matmul, KV, attn, MoE, DeltaNet, PLE) */
/* floats: the node's f[0] and f[1] (add: b's factor; scale: the factor; softcap: factor, then cap) */
#define PC_F_NODE0 0
#define PC_F_NODE1 1

/* glu: the activation (0 silu, 1 gelu_tanh, 2 gelu_erf, 3 gpt-oss swiglu) */
#define PC_GLU_ACT 8
#define PC_GLU_ALPHA 0 /* f: swiglu's alpha (the node's f[0]) */
#define PC_GLU_LIMIT 1 /* f: swiglu's clamp (the node's f[1]) */
/* mask: the columns one bit covers */
#define PC_MASK_WIDTH 8
/* get_rows: the table (w) read as rows of PC_COLS */
#define PC_GET_DTYPE 8
#define PC_GET_W_ROWS 9
#define PC_GET_SCALE 0 /* f: the node's f[0] */
/* rmsnorm: a norm per group of columns, times w (v) when it has one */
#define PC_NORM_GROUP 8
#define PC_NORM_PLUS_ONE 9 /* weights stored as w - 1 */
#define PC_NORM_HAS_W 10
#define PC_NORM_EPS 0 /* f: the node's f[0] */
/* rope: in place on dst, positions in b, inv_freq in v */
#define PC_ROPE_N_HEAD 8
#define PC_ROPE_HEAD_DIM 9 /* words from one head to the next */
#define PC_ROPE_ROT_DIMS 10
#define PC_ROPE_FACTOR 0 /* f: the table's attn_factor */

/* matmul, matmul_sg, matmul_tiled, matmul_coop*, matvec_*: dst = a W^T
 * (+ v); PC_N_TOK tokens. With a selection (matmul only) only the tokens
 * whose word c[SEL_OFF + t * SEL_NB] is nonzero are computed. */
#define PC_MM_DTYPE 8 /* as the device holds W (CMF_DTYPE_*) */
#define PC_MM_W_ROWS 9
#define PC_MM_W_COLS 10
#define PC_MM_HAS_BIAS 11
#define PC_MM_HAS_SEL 12
#define PC_MM_SEL_OFF 13
#define PC_MM_SEL_NB 14

/* kv_write, kv_write_q8: PC_N_TOK rows of a (PC_COLS values) into the
 * cache rows of (sequence in c, position in b); a paged cache's block
 * table is in c's buffer too */
#define PC_KVW_SEQ_OFF 5 /* in place of b's pitch */
#define PC_KVW_TYPE 8    /* kv_write: 0 f32, 2 f16 */
#define PC_KVW_GROUP 8   /* kv_write_q8: values a scale */
#define PC_KVW_CAP 9
#define PC_KVW_BLOCK 10 /* 0: not paged */
#define PC_KVW_TAB_OFF 11
#define PC_KVW_TAB_COLS 12 /* table entries a sequence */

/* attn: queries a (PC_N_TOK), positions b, sequences c; K in w, V in v,
 * sinks in x2 */
#define PC_ATTN_SEQ_OFF 5 /* in place of b's pitch */
#define PC_ATTN_N_HEAD 7
#define PC_ATTN_N_HEAD_KV 8
#define PC_ATTN_HEAD_DIM 9
#define PC_ATTN_WINDOW 10 /* 0: none */
#define PC_ATTN_CAP 11
#define PC_ATTN_K_OFF 12
#define PC_ATTN_K_NB 13
#define PC_ATTN_V_OFF 14
#define PC_ATTN_V_NB 15
#define PC_ATTN_KV_TYPE 16 /* 0 f32, 1 q8, 2 f16 */
#define PC_ATTN_HAS_SINKS 17
#define PC_ATTN_BLOCK 18 /* 0: not paged */
#define PC_ATTN_KV_COLS 19
#define PC_ATTN_KV_GROUP 20 /* q8: values a scale */
#define PC_ATTN_TAB_OFF 21 /* in c */
#define PC_ATTN_TAB_COLS 22 /* table entries a sequence */
#define PC_ATTN_SCALE 0 /* f */
#define PC_ATTN_SOFTCAP 1 /* f: 0 none */

/* moe_route: router logits a (PC_N_TOK); expert_bias in v, routable bits in x2 */
#define PC_ROUTE_N_EXPERT 7
#define PC_ROUTE_TOP_K 8
#define PC_ROUTE_NORM_TOPK 9
#define PC_ROUTE_SIGMOID 10
#define PC_ROUTE_HAS_BIAS 11
#define PC_ROUTE_HAS_MASK 12
#define PC_ROUTE_SCALING 0 /* f: routed_scaling */
/* moe_acc: dst += w_t a, w_t from b by mode (0 b, marked tokens of c only; 1 sigmoid(b); 2 one) */
#define PC_ACC_MODE 8
#define PC_ACC_C_OFF 9
#define PC_ACC_C_NB 10

/* gdn_conv: qkvz rows a, sequences b (PC_N_TOK), conv weights w, state x1 */
#define PC_CONV_CH 7 /* channels */
#define PC_CONV_K 8
#define PC_CONV_STATE_OFF 9
#define PC_CONV_STATE_NB 10
#define PC_CONV_DK 12
#define PC_CONV_RDV 13 /* value heads a key head x dv */
#define PC_CONV_GROUP 14 /* a key head's qkvz: 2 dk + 2 r dv */
#define PC_CONV_NKDK 15
/* gdn_rec: conv rows a, sequences b (PC_N_TOK), qkvz|ba rows c; A_log w, dt_bias v, state x1, norm_w x2 */
#define PC_REC_C_OFF 5 /* in place of b's pitch */
#define PC_REC_N_V_HEADS 8
#define PC_REC_DK 9
#define PC_REC_DV 10
#define PC_REC_R 11 /* value heads a key head */
#define PC_REC_GROUP 12
#define PC_REC_C_NB 13
#define PC_REC_BA_OFF 14 /* in a row of c */
#define PC_REC_STATE_OFF 16
#define PC_REC_STATE_NB 17
#define PC_REC_CONV_FLOATS 18 /* the conv window before the recurrent state in a state row */
#define PC_REC_NKDK 19
#define PC_REC_EPS 0 /* f */

/* ple_mix: in place on dst, ids a (PC_N_TOK); the per-layer embedding w, the norm v */
#define PC_PLE_N_LAYERS 7
#define PC_PLE_PER_LAYER 8
#define PC_PLE_DTYPE 9
#define PC_PLE_W_ROWS 10
#define PC_PLE_W_COLS 11
#define PC_PLE_PLUS_ONE 12
#define PC_PLE_EPS 0    /* f */
#define PC_PLE_PSCALE 1 /* f: 1 / sqrt(hidden) */
#define PC_PLE_ESCALE 2 /* f: sqrt(per_layer) */
#define PC_PLE_MIX 3    /* f: 1 / sqrt(2) */

#endif

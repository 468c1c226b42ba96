#version 450
// attn.comp — one workgroup per (query t, head h), one pass over the keys
// of the query's own sequence at positions lo..pos (window), from their
// cache rows (kv_row: a ring or a paged cache; K in w, V in v), 64 keys at a time with an
// online softmax: each invocation scores one key of the block, the block's
// max and sum rescale the running sum and the output (invocation i holds
// dims i, i + 64, ... of the head). A sink (x2) starts the sum as one more
// logit. head_dim <= 256. No scratch, nothing that depends on the step
// outside the buffers: the recorded dispatch serves every position.
// Push constants: PC_ATTN_* (pc.h); queries in a, positions in b.
// A q8 row: cols int8 values padded to a word, then one f32 scale per group.
// f16 caches with an even head_dim take a word (two values) per load:
// each invocation scores its key a word at a time and accumulates the two
// dims of words tid and tid + 64 of V.
#include "common.glsl"
layout(local_size_x = 64) in;
shared float qs[256], ps[64], red[64];
shared uint rows_[64]; /* the cache row of each key of the block */
float kv_at(bool is_v, uint row, uint col)
{
    uint off = is_v ? p.u[PC_ATTN_V_OFF] : p.u[PC_ATTN_K_OFF], nb = is_v ? p.u[PC_ATTN_V_NB] : p.u[PC_ATTN_K_NB];
    if (p.u[PC_ATTN_KV_TYPE] == 1u) {
        uint r0 = off + row * nb, wd = is_v ? v[r0 + col / 4u] : w[r0 + col / 4u];
        uint sc = is_v ? v[r0 + (p.u[PC_ATTN_KV_COLS] + 3u) / 4u + col / p.u[PC_ATTN_KV_GROUP]]
                       : w[r0 + (p.u[PC_ATTN_KV_COLS] + 3u) / 4u + col / p.u[PC_ATTN_KV_GROUP]];
        return float(int(wd << (24u - 8u * (col & 3u))) >> 24) * uintBitsToFloat(sc);
    }
    if (p.u[PC_ATTN_KV_TYPE] == 2u) {
        uint word = is_v ? v[off + row * nb + col / 2u] : w[off + row * nb + col / 2u];
        return unpackHalf2x16(word)[col & 1u];
    }
    return uintBitsToFloat(is_v ? v[off + row * nb + col] : w[off + row * nb + col]);
}
float reduce(float x, bool is_max)
{
    uint tid = gl_LocalInvocationID.x;
    red[tid] = x;
    barrier();
    for (uint k = 32u; k > 0u; k >>= 1) {
        if (tid < k) red[tid] = is_max ? max(red[tid], red[tid + k]) : red[tid] + red[tid + k];
        barrier();
    }
    float r = red[0];
    barrier();
    return r;
}
void main()
{
    uint t = group_index() / p.u[PC_ATTN_N_HEAD], h = group_index() % p.u[PC_ATTN_N_HEAD], tid = gl_LocalInvocationID.x;
    if (t >= p.u[PC_N_TOK]) return; /* past the last query: the whole workgroup */
    uint hd = p.u[PC_ATTN_HEAD_DIM], kvh = h / (p.u[PC_ATTN_N_HEAD] / p.u[PC_ATTN_N_HEAD_KV]);
    int pos = int(b[p.u[PC_B_OFF] + t]);
    uint sq = c[p.u[PC_ATTN_SEQ_OFF] + t];
    int lo = p.u[PC_ATTN_WINDOW] > 0u ? max(0, pos - int(p.u[PC_ATTN_WINDOW]) + 1) : 0;
    uint n_keys = uint(pos - lo + 1), q0 = p.u[PC_A_OFF] + t * p.u[PC_A_NB] + h * hd;
    for (uint i = tid; i < hd; i += 64u) qs[i] = uintBitsToFloat(a[q0 + i]);
    barrier();
    float m = p.u[PC_ATTN_HAS_SINKS] != 0u ? uintBitsToFloat(x2[h]) : -3.0e38, l = p.u[PC_ATTN_HAS_SINKS] != 0u ? 1.0 : 0.0;
    float acc[4] = float[4](0.0, 0.0, 0.0, 0.0);
    const bool half2 = p.u[PC_ATTN_KV_TYPE] == 2u && (hd & 1u) == 0u; /* word loads: kvh * hd is even too */
    /* f16: the head's first word */
    const uint kw = p.u[PC_ATTN_K_OFF] + (kvh * hd) / 2u, vw = p.u[PC_ATTN_V_OFF] + (kvh * hd) / 2u;
    for (uint s0 = 0u; s0 < n_keys; s0 += 64u) {
        uint s = s0 + tid, cnt = min(64u, n_keys - s0);
        float sc = -3.0e38;
        if (s < n_keys) {
            uint row = kv_row(sq, uint(lo + int(s)), p.u[PC_ATTN_CAP], p.u[PC_ATTN_BLOCK], p.u[PC_ATTN_TAB_OFF],
                              p.u[PC_ATTN_TAB_COLS]);
            rows_[tid] = row;
            float dot_ = 0.0;
            if (half2) {
                uint k0 = kw + row * p.u[PC_ATTN_K_NB];
                for (uint i = 0u; i < hd; i += 2u) {
                    vec2 kk = unpackHalf2x16(w[k0 + i / 2u]);
                    dot_ += qs[i] * kk.x + qs[i + 1u] * kk.y;
                }
            } else {
                for (uint i = 0u; i < hd; i++) dot_ += qs[i] * kv_at(false, row, kvh * hd + i);
            }
            sc = dot_ * p.f[PC_ATTN_SCALE];
            if (p.f[PC_ATTN_SOFTCAP] > 0.0) sc = p.f[PC_ATTN_SOFTCAP] * tanh(sc / p.f[PC_ATTN_SOFTCAP]);
        }
        float m_new = max(m, reduce(sc, true));
        float e = s < n_keys ? exp(sc - m_new) : 0.0;
        ps[tid] = e;
        float alpha = exp(m - m_new);
        l = l * alpha + reduce(e, false); /* its barriers also publish ps and rows_ */
        if (half2) {
            [[unroll]] for (uint r = 0u; r < 2u; r++) {
                uint wi = tid + 64u * r;
                if (2u * wi >= hd) break;
                vec2 o = vec2(acc[2u * r], acc[2u * r + 1u]) * alpha;
                for (uint j = 0u; j < cnt; j++) o += ps[j] * unpackHalf2x16(v[vw + rows_[j] * p.u[PC_ATTN_V_NB] + wi]);
                acc[2u * r] = o.x, acc[2u * r + 1u] = o.y;
            }
        } else {
            [[unroll]] for (uint r = 0u; r < 4u; r++) {
                uint i = tid + 64u * r;
                if (i >= hd) break;
                float o = acc[r] * alpha;
                for (uint j = 0u; j < cnt; j++) o += ps[j] * kv_at(true, rows_[j], kvh * hd + i);
                acc[r] = o;
            }
        }
        m = m_new;
        barrier(); /* ps and rows_ are rewritten by the next block */
    }
    float inv = 1.0 / l;
    [[unroll]] for (uint r = 0u; r < 4u; r++) {
        uint i = half2 ? 2u * (tid + 64u * (r / 2u)) + r % 2u : tid + 64u * r; /* the dims acc[r] holds */
        if (i < hd) d[p.u[PC_DST_OFF] + t * p.u[PC_DST_NB] + h * hd + i] = floatBitsToUint(acc[r] * inv);
    }
}

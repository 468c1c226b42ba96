#version 450
// attn.comp — one workgroup per (query t, head h), one pass over the keys
// of the query's own sequence at positions lo..pos (window), from their
// cache rows (kv_row: a ring or a paged cache; K in w, V in v), 64 keys at a time with an
// online softmax: each invocation scores one key of the block, the block's
// max and sum rescale the running sum and the output (invocation i holds
// dims i, i + 64, ... of the head). A sink (x2) starts the sum as one more
// logit. head_dim <= 256. No scratch, nothing that depends on the step
// outside the buffers: the recorded dispatch serves every position.
// u: 0 d_off, 1 d_nb, 2 a_off (q), 3 a_nb, 4 b_off (pos), 5 c_off (seq),
// 6 n_tok, 7 n_head, 8 n_head_kv, 9 head_dim, 10 window, 11 cap,
// 12 k_off, 13 k_nb, 14 v_off, 15 v_nb (words), 16 kv type (0 f32, 1 q8,
// 2 f16), 17 has_sinks, 18 block (0: not paged), 19 kv cols, 20 q8 group,
// 21 table off (in c), 22 table entries a sequence; f0 scale, f1 softcap.
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
    uint off = is_v ? p.u[14] : p.u[12], nb = is_v ? p.u[15] : p.u[13];
    if (p.u[16] == 1u) {
        uint r0 = off + row * nb, wd = is_v ? v[r0 + col / 4u] : w[r0 + col / 4u];
        uint sc = is_v ? v[r0 + (p.u[19] + 3u) / 4u + col / p.u[20]] : w[r0 + (p.u[19] + 3u) / 4u + col / p.u[20]];
        return float(int(wd << (24u - 8u * (col & 3u))) >> 24) * uintBitsToFloat(sc);
    }
    if (p.u[16] == 2u) {
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
    uint t = group_index() / p.u[7], h = group_index() % p.u[7], tid = gl_LocalInvocationID.x;
    if (t >= p.u[6]) return; /* past the last query: the whole workgroup */
    uint hd = p.u[9], kvh = h / (p.u[7] / p.u[8]);
    int pos = int(b[p.u[4] + t]);
    uint sq = c[p.u[5] + t];
    int lo = p.u[10] > 0u ? max(0, pos - int(p.u[10]) + 1) : 0;
    uint n_keys = uint(pos - lo + 1), q0 = p.u[2] + t * p.u[3] + h * hd;
    for (uint i = tid; i < hd; i += 64u) qs[i] = uintBitsToFloat(a[q0 + i]);
    barrier();
    float m = p.u[17] != 0u ? uintBitsToFloat(x2[h]) : -3.0e38, l = p.u[17] != 0u ? 1.0 : 0.0;
    float acc[4] = float[4](0.0, 0.0, 0.0, 0.0);
    const bool half2 = p.u[16] == 2u && (hd & 1u) == 0u; /* word loads: kvh * hd is even too */
    const uint kw = p.u[12] + (kvh * hd) / 2u, vw = p.u[14] + (kvh * hd) / 2u; /* f16: the head's first word */
    for (uint s0 = 0u; s0 < n_keys; s0 += 64u) {
        uint s = s0 + tid, cnt = min(64u, n_keys - s0);
        float sc = -3.0e38;
        if (s < n_keys) {
            uint row = kv_row(sq, uint(lo + int(s)), p.u[11], p.u[18], p.u[21], p.u[22]);
            rows_[tid] = row;
            float dot_ = 0.0;
            if (half2) {
                uint k0 = kw + row * p.u[13];
                for (uint i = 0u; i < hd; i += 2u) {
                    vec2 kk = unpackHalf2x16(w[k0 + i / 2u]);
                    dot_ += qs[i] * kk.x + qs[i + 1u] * kk.y;
                }
            } else {
                for (uint i = 0u; i < hd; i++) dot_ += qs[i] * kv_at(false, row, kvh * hd + i);
            }
            sc = dot_ * p.f[0];
            if (p.f[1] > 0.0) sc = p.f[1] * tanh(sc / p.f[1]);
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
                for (uint j = 0u; j < cnt; j++) o += ps[j] * unpackHalf2x16(v[vw + rows_[j] * p.u[15] + wi]);
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
        if (i < hd) d[p.u[0] + t * p.u[1] + h * hd + i] = floatBitsToUint(acc[r] * inv);
    }
}

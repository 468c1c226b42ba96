#version 450
// attn.comp — one workgroup per (query t, head h). Keys of the query's own
// sequence at positions lo..pos (window), from cache rows seq*cap + p % cap
// (K in w, V in v; f32 or f16 rows). Scores go to the scratch x1 at
// (t*n_head + h)*span: pass 1 scores and max, pass 2 exp and sum (+ sink
// from x2), pass 3 one thread per output dim.
// u: 0 d_off, 1 d_nb, 2 a_off (q), 3 a_nb, 4 b_off (pos), 5 c_off (seq),
// 6 n_tok, 7 n_head, 8 n_head_kv, 9 head_dim, 10 window, 11 cap,
// 12 k_off, 13 k_nb, 14 v_off, 15 v_nb (words), 16 kv type (0 f32, 1 q8,
// 2 f16), 17 has_sinks, 18 span, 19 kv cols, 20 q8 group; f0 scale, f1 softcap.
// A q8 row: cols int8 values padded to a word, then one f32 scale per group.
#include "common.glsl"
layout(local_size_x = 64) in;
shared float red[64];
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
void main()
{
    uint t = gl_WorkGroupID.x / p.u[7], h = gl_WorkGroupID.x % p.u[7], tid = gl_LocalInvocationID.x;
    uint hd = p.u[9], kvh = h / (p.u[7] / p.u[8]);
    int pos = int(b[p.u[4] + t]);
    uint base = c[p.u[5] + t] * p.u[11];
    int lo = p.u[10] > 0u ? max(0, pos - int(p.u[10]) + 1) : 0;
    uint n_keys = uint(pos - lo + 1), sc = (t * p.u[7] + h) * p.u[18];
    uint q0 = p.u[2] + t * p.u[3] + h * hd;
    float mx = -3.0e38;
    for (uint s = tid; s < n_keys; s += 64u) {
        uint row = base + uint(lo + int(s)) % p.u[11];
        float acc = 0.0;
        for (uint i = 0u; i < hd; i++) acc += uintBitsToFloat(a[q0 + i]) * kv_at(false, row, kvh * hd + i);
        acc *= p.f[0];
        if (p.f[1] > 0.0) acc = p.f[1] * tanh(acc / p.f[1]);
        x1[sc + s] = floatBitsToUint(acc);
        mx = max(mx, acc);
    }
    red[tid] = mx;
    barrier();
    for (uint k = 32u; k > 0u; k >>= 1) {
        if (tid < k) red[tid] = max(red[tid], red[tid + k]);
        barrier();
    }
    float sink = p.u[17] != 0u ? uintBitsToFloat(x2[h]) : -3.0e38;
    mx = max(red[0], sink);
    barrier();
    float sum = 0.0;
    for (uint s = tid; s < n_keys; s += 64u) {
        float e = exp(uintBitsToFloat(x1[sc + s]) - mx);
        x1[sc + s] = floatBitsToUint(e);
        sum += e;
    }
    red[tid] = sum;
    memoryBarrierBuffer();
    barrier();
    for (uint k = 32u; k > 0u; k >>= 1) {
        if (tid < k) red[tid] += red[tid + k];
        barrier();
    }
    float inv = 1.0 / (red[0] + (p.u[17] != 0u ? exp(sink - mx) : 0.0));
    for (uint i = tid; i < hd; i += 64u) {
        float o = 0.0;
        for (uint s = 0u; s < n_keys; s++)
            o += uintBitsToFloat(x1[sc + s]) * kv_at(true, base + uint(lo + int(s)) % p.u[11], kvh * hd + i);
        d[p.u[0] + t * p.u[1] + h * hd + i] = floatBitsToUint(o * inv);
    }
}

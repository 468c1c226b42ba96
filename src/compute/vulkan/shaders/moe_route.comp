#version 450
// moe_route.comp — MoE routing, one invocation per token, as
// cmf__moe_route: softmax (max-shifted) or sigmoid scores over the
// routable experts (bits in x2 when has_routable), top-k by score +
// expert_bias (v, selection only; ties to the lower index), optional
// renormalisation and routed scaling. Row t of dst holds the weights [E]
// (0 where not selected) then the selection marks [E] (rank + 1, 0 = no).
// Push constants: PC_ROUTE_* (pc.h); router logits in a.
#include "common.glsl"
layout(local_size_x = 64) in;
bool routable(uint e) { return p.u[PC_ROUTE_HAS_MASK] == 0u || ((x2[e >> 5] >> (e & 31u)) & 1u) != 0u; }
float D(uint i) { return uintBitsToFloat(d[i]); }
void main()
{
    uint t = gl_GlobalInvocationID.x;
    if (t >= p.u[PC_N_TOK]) return;
    uint E = p.u[PC_ROUTE_N_EXPERT], lg = p.u[PC_A_OFF] + t * p.u[PC_A_NB], o = p.u[PC_DST_OFF] + t * p.u[PC_DST_NB];
    float mx = -3.4e38;
    uint n_ok = 0u;
    for (uint e = 0u; e < E; e++) {
        d[o + E + e] = 0u;
        if (!routable(e)) continue;
        n_ok++;
        mx = max(mx, uintBitsToFloat(a[lg + e]));
    }
    float sum = 0.0;
    for (uint e = 0u; e < E; e++) {
        float l = uintBitsToFloat(a[lg + e]), s = 0.0;
        if (routable(e)) s = p.u[PC_ROUTE_SIGMOID] != 0u ? 1.0 / (1.0 + exp(-l)) : exp(l - mx);
        if (routable(e) && p.u[PC_ROUTE_SIGMOID] == 0u) sum += s;
        d[o + e] = floatBitsToUint(s);
    }
    if (p.u[PC_ROUTE_SIGMOID] == 0u && n_ok > 0u)
        for (uint e = 0u; e < E; e++) d[o + e] = floatBitsToUint(D(o + e) / sum);
    uint k = min(p.u[PC_ROUTE_TOP_K], n_ok);
    float wsum = 0.0;
    for (uint j = 0u; j < k; j++) {
        int best = -1;
        float best_key = 0.0;
        for (uint e = 0u; e < E; e++) {
            if (!routable(e) || d[o + E + e] != 0u) continue;
            float key = D(o + e) + (p.u[PC_ROUTE_HAS_BIAS] != 0u ? uintBitsToFloat(v[e]) : 0.0);
            if (best < 0 || key > best_key) best = int(e), best_key = key;
        }
        d[o + E + uint(best)] = j + 1u;
        wsum += D(o + uint(best));
    }
    float rs = p.f[PC_ROUTE_SCALING];
    for (uint e = 0u; e < E; e++) {
        float w = 0.0;
        if (d[o + E + e] != 0u) {
            w = D(o + e);
            if (p.u[PC_ROUTE_NORM_TOPK] != 0u && wsum > 0.0) w = w / wsum;
            if (rs != 0.0 && rs != 1.0) w *= rs;
        }
        d[o + e] = floatBitsToUint(w);
    }
}

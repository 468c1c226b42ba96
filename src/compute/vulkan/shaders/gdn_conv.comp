#version 450
// gdn_conv.comp — gated DeltaNet: the causal depthwise conv1d + SiLU, one
// invocation per channel, tokens in order (each token's sequence has its
// own conv window in the state rows, x1). The channel's input is read from
// the grouped in_proj_qkvz row (per key head: q[dk] k[dk] v[r*dv] z[r*dv]).
// w: conv weights [C][K]. u: 0 d_off, 1 d_nb, 2 a_off (qkvz), 3 a_nb,
// 4 b_off (seq), 6 n_tok, 7 C, 8 K, 9 state_off, 10 state_nb, 12 dk,
// 13 r*dv, 14 group (2dk + 2r*dv), 15 nk*dk
#include "common.glsl"
layout(local_size_x = 256) in;
void main()
{
    uint ch = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65535u * 256u;
    uint C = p.u[7], K = p.u[8], dk = p.u[12], rdv = p.u[13], grp = p.u[14], nkdk = p.u[15];
    if (ch >= C) return;
    uint src;
    if (ch < nkdk) {
        src = (ch / dk) * grp + ch % dk;
    } else if (ch < 2u * nkdk) {
        uint cc = ch - nkdk;
        src = (cc / dk) * grp + dk + cc % dk;
    } else {
        uint cc = ch - 2u * nkdk;
        src = (cc / rdv) * grp + 2u * dk + cc % rdv;
    }
    for (uint t = 0u; t < p.u[6]; t++) {
        uint st = p.u[9] + uint(int(b[p.u[4] + t])) * p.u[10];
        float x = uintBitsToFloat(a[p.u[2] + t * p.u[3] + src]), acc = 0.0;
        for (uint i = 0u; i + 1u < K; i++) acc += uintBitsToFloat(x1[st + i * C + ch]) * wf(ch * K + i);
        acc += x * wf(ch * K + K - 1u);
        d[p.u[0] + t * p.u[1] + ch] = floatBitsToUint(acc / (1.0 + exp(-acc)));
        if (K > 1u) {
            for (uint i = 0u; i + 2u < K; i++) x1[st + i * C + ch] = x1[st + (i + 1u) * C + ch];
            x1[st + (K - 2u) * C + ch] = floatBitsToUint(x);
        }
    }
}

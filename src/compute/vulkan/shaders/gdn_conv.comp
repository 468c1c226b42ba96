#version 450
// gdn_conv.comp — gated DeltaNet: the causal depthwise conv1d + SiLU, one
// invocation per channel, tokens in order (each token's sequence has its
// own conv window in the state rows, x1). The channel's input is read from
// the grouped in_proj_qkvz row (per key head: q[dk] k[dk] v[r*dv] z[r*dv]).
// w: conv weights [C][K]. Push constants: PC_CONV_* (pc.h); qkvz rows in
// a, each token's sequence in b.
#include "common.glsl"
layout(local_size_x = 256) in;
void main()
{
    uint ch = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65535u * 256u;
    uint C = p.u[PC_CONV_CH], K = p.u[PC_CONV_K], dk = p.u[PC_CONV_DK], rdv = p.u[PC_CONV_RDV],
         grp = p.u[PC_CONV_GROUP], nkdk = p.u[PC_CONV_NKDK];
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
    for (uint t = 0u; t < p.u[PC_N_TOK]; t++) {
        uint st = p.u[PC_CONV_STATE_OFF] + uint(int(b[p.u[PC_B_OFF] + t])) * p.u[PC_CONV_STATE_NB];
        float x = uintBitsToFloat(a[p.u[PC_A_OFF] + t * p.u[PC_A_NB] + src]), acc = 0.0;
        for (uint i = 0u; i + 1u < K; i++) acc += uintBitsToFloat(x1[st + i * C + ch]) * wf(ch * K + i);
        acc += x * wf(ch * K + K - 1u);
        d[p.u[PC_DST_OFF] + t * p.u[PC_DST_NB] + ch] = floatBitsToUint(acc / (1.0 + exp(-acc)));
        if (K > 1u) {
            for (uint i = 0u; i + 2u < K; i++) x1[st + i * C + ch] = x1[st + (i + 1u) * C + ch];
            x1[st + (K - 2u) * C + ch] = floatBitsToUint(x);
        }
    }
}

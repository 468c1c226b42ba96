// eltwise.glsl — element-wise ops over rows x cols: dst[r][i] = OP(a, b).
// The shared push constants (pc.h); the op's own: PC_F_NODE0 and
// PC_F_NODE1, glu's PC_GLU_*. Include common.glsl first, then define OP.

layout(local_size_x = 256) in;
float A(uint r, uint i) { return uintBitsToFloat(a[p.u[PC_A_OFF] + r * p.u[PC_A_NB] + i]); }
float B(uint r, uint i) { return uintBitsToFloat(b[p.u[PC_B_OFF] + r * p.u[PC_B_NB] + i]); }
void main()
{
    uint k = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65535u * 256u;
    if (k >= p.u[PC_ROWS] * p.u[PC_COLS]) return;
    uint r = k / p.u[PC_COLS], i = k % p.u[PC_COLS];
    d[p.u[PC_DST_OFF] + r * p.u[PC_DST_NB] + i] = floatBitsToUint(OP(r, i));
}

// eltwise.glsl — element-wise ops over rows x cols: dst[r][i] = OP(a, b).
// u: 0 d_off, 1 d_nb, 2 a_off, 3 a_nb, 4 b_off, 5 b_nb, 6 rows, 7 cols, 8 act
// f: 0, 1 the op's constants. Include common.glsl first, then define OP.

layout(local_size_x = 256) in;
float A(uint r, uint i) { return uintBitsToFloat(a[p.u[2] + r * p.u[3] + i]); }
float B(uint r, uint i) { return uintBitsToFloat(b[p.u[4] + r * p.u[5] + i]); }
void main()
{
    uint k = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65535u * 256u;
    if (k >= p.u[6] * p.u[7]) return;
    uint r = k / p.u[7], i = k % p.u[7];
    d[p.u[0] + r * p.u[1] + i] = floatBitsToUint(OP(r, i));
}

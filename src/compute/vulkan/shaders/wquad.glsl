// wquad.glsl — w_quad: four consecutive weights of one row in one or two
// loads, for the tiled GEMMs (matmul_tiled.comp, matmul_coop.comp).
// Include after common.glsl.
layout(std430, binding = 4) readonly buffer BW2 { uvec2 w2[]; };
layout(std430, binding = 4) readonly buffer BW4 { vec4 w4f[]; };
// Values col..col+3 of weight row o (col % 4 == 0, cols % 4 == 0, in bounds).
vec4 w_quad(uint dt, uint o, uint col, uint nr, uint nc)
{
    uint k = o * nc + col;
    if (dt == 0u) return w4f[k / 4u];
    if (dt == 1u) {
        uvec2 q = w2[k / 4u];
        return vec4(unpackHalf2x16(q.x), unpackHalf2x16(q.y));
    }
    if (dt == 2u) {
        uvec2 q = w2[k / 4u];
        return vec4(uintBitsToFloat(q.x << 16), uintBitsToFloat(q.x & 0xffff0000u), uintBitsToFloat(q.y << 16),
                    uintBitsToFloat(q.y & 0xffff0000u));
    }
    if (dt == 4u) { /* 4 nibbles in 2 bytes of one group (k % 4 == 0) */
        uint g = k / 32u, q = w16e(16u * g + (k % 32u) / 2u);
        return (vec4(q & 15u, (q >> 4) & 15u, (q >> 8) & 15u, q >> 12) - 8.0) * half_at(16u * ((nr * nc + 31u) / 32u) + 2u * g);
    }
    int x = int(w[k / 4u]);
    vec4 r = vec4(bitfieldExtract(x, 0, 8), bitfieldExtract(x, 8, 8), bitfieldExtract(x, 16, 8), bitfieldExtract(x, 24, 8)) *
             half_at(nr * nc + 2u * o);
    if (dt == 9u) { /* and the column scales */
        uint c = nr * nc + 2u * nr + 2u * col;
        r *= vec4(half_at(c), half_at(c + 2u), half_at(c + 4u), half_at(c + 6u));
    }
    return r;
}

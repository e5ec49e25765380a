// q4gsw's rounding, the GLSL twin of quantize.wgsl (included by requant.comp and requant_groups.comp): the sign of
// 2x - m s (m = 2q +- 1) found exactly without an fma, which a driver may split; quantize.wgsl says why it is exact,
// and why most quotients take the guess r = x (1 / s) instead, as here.

int twice_past(float x, float s, float m) {
  const float s_hi = uintBitsToFloat(floatBitsToUint(s) & 0xffffffe0u);
  const float d = 2.0 * x - m * s_hi;
  const float b = m * (s - s_hi);
  return d > b ? 1 : (d < b ? -1 : 0);
}

uint quantize_exact(float x_in, float s_in) {
  if (s_in == 0.0) return 8u;
  float x = x_in, s = s_in;
  if (s < 0.0) {
    x = -x;
    s = -s;
  }
  // s into [2^-64, 2^64], exactly (quantize.wgsl says why: overflow, and differences a GPU flushes to zero).
  if (s < 5.421010862427522e-20) {
    x *= 1.8446744073709552e19;
    s *= 1.8446744073709552e19;
  } else if (s > 1.8446744073709552e19) {
    x *= 5.421010862427522e-20;
    s *= 5.421010862427522e-20;
  }
  float q = clamp(round(x / s), -9.0, 8.0);
  const bool odd = (int(q) & 1) != 0;
  const int above = twice_past(x, s, 2.0 * q + 1.0);
  if (above > 0 || (above == 0 && odd)) {
    q += 1.0;
  } else {
    const int below = twice_past(x, s, 2.0 * q - 1.0);
    if (below < 0 || (below == 0 && odd)) q -= 1.0;
  }
  return uint(int(clamp(q, -8.0, 7.0)) + 8);
}

uint quantize(float x, float s) {
  const float r = x * (1.0 / s);
  const float f = floor(r + 0.5);
  const float a = abs(s);
  // 2^-100, 2^100 and 1/2 - 2^-10 (GLSL has no hexadecimal floats).
  if (a >= 7.888609052210118e-31 && a <= 1.2676506002282294e30 &&
      (abs(r - f) < 0.4990234375 || (abs(r) > 16.0 && abs(r) < 1.2676506002282294e30)))
    return uint(int(clamp(f, -8.0, 7.0)) + 8);
  return quantize_exact(x, s);
}

// The codes of four weights of one scale in nibbles 0..3 (padding comes in as zeros): quantize4 of quantize.wgsl,
// which says why.
uint quantize4(vec4 x, float s) {
  const vec4 r = x * (1.0 / s);
  const vec4 f = floor(r + 0.5);
  const float a = abs(s);
  const bvec4 near = lessThan(abs(r - f), vec4(0.4990234375));
  const uvec4 past = uvec4(greaterThan(abs(r), vec4(16.0))) & uvec4(lessThan(abs(r), vec4(1.2676506002282294e30)));
  uvec4 c;
  if (a >= 7.888609052210118e-31 && a <= 1.2676506002282294e30 && all(bvec4(uvec4(near) | past)))
    c = uvec4(ivec4(clamp(f, -8.0, 7.0)) + 8);
  else
    c = uvec4(quantize_exact(x.x, s), quantize_exact(x.y, s), quantize_exact(x.z, s), quantize_exact(x.w, s));
  return c.x | (c.y << 4u) | (c.z << 8u) | (c.w << 12u);
}

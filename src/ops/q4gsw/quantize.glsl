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

// quantize.wgsl's guess4 and quantize8: the guesses of four lanes (codes in nibbles 0..3, need: lanes the guess
// cannot decide), and the word of eight weights of one scale with the exact test only for the flagged lanes.
uvec2 guess4(vec4 x, float s) {
  const vec4 r = x * (1.0 / s);
  const vec4 f = floor(r + 0.5);
  const float a = abs(s);
  const uvec4 near = uvec4(lessThan(abs(r - f), vec4(0.4990234375)));
  const uvec4 past = uvec4(greaterThan(abs(r), vec4(16.0))) & uvec4(lessThan(abs(r), vec4(1.2676506002282294e30)));
  const uint scale_ok = uint(a >= 7.888609052210118e-31 && a <= 1.2676506002282294e30);
  const uvec4 guessed = (near | past) & uvec4(scale_ok);
  const uvec4 c = uvec4(ivec4(clamp(f, -8.0, 7.0)) + 8);
  const uvec4 need = (uvec4(1u) - guessed) * uvec4(1u, 2u, 4u, 8u);
  return uvec2(c.x | (c.y << 4u) | (c.z << 8u) | (c.w << 12u), need.x | need.y | need.z | need.w);
}

uint quantize8(vec4 lo, vec4 hi, float s) {
  const uvec2 g0 = guess4(lo, s), g1 = guess4(hi, s);
  uint word = g0.x | (g1.x << 16u);
  uint need = g0.y | (g1.y << 4u);
  for (uint k = 0u; k < 8u && need != 0u; ++k) {
    const int i = findLSB(need);
    const float x = i >= 4 ? hi[i & 3] : lo[i & 3];
    word = (word & ~(0xfu << (4 * i))) | (quantize_exact(x, s) << (4 * i));
    need &= need - 1u;
  }
  return word;
}

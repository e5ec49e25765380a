// q4gsw's rounding, the GLSL twin of quantize.wgsl (included by requant.comp and requant_groups.comp): the sign of
// 2x - m s (m = 2q +- 1) found exactly without an fma, which a driver may split; quantize.wgsl says why it is exact.

int twice_past(float x, float s, float m) {
  const float s_hi = uintBitsToFloat(floatBitsToUint(s) & 0xffffffe0u);
  const float d = 2.0 * x - m * s_hi;
  const float b = m * (s - s_hi);
  return d > b ? 1 : (d < b ? -1 : 0);
}

uint quantize(float x_in, float s_in) {
  if (s_in == 0.0) return 8u;
  float x = x_in, s = s_in;
  if (s < 0.0) {
    x = -x;
    s = -s;
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

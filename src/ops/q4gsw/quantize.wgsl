// q4gsw's rounding (included as q4gsw/quantize by requant.wgsl and requant_groups.wgsl; quantize.glsl is its GLSL
// twin): code = clamp(round_half_even(x / s), -8, 7) + 8, code 8 where s == 0. The quotient is only a guess; the
// rounding is decided by the sign of 2x - m s with m = 2q +- 1, computed exactly without an fma. (An fma would give
// it with one rounding, but WGSL and SPIR-V let a driver split it into a product and a sum, and Mesa's llvmpipe and
// lavapipe do: near-ties then went the wrong way, test Q4Requant.NearTiesRoundAsTheExactQuotient.)
// Exactly: |m| <= 19 has at most 5 significant bits, so with s = s_hi + s_lo (s_hi: s without its 5 lowest
// mantissa bits) both m s_hi and m s_lo are exact floats. Where 2x is within a factor 2 of m s_hi (any near-tie),
// d = 2x - m s_hi is exact (Sterbenz) and d - m s_lo is the sign's exact witness; elsewhere |d| is far above
// |m s_lo| (2^-18 of it), so the comparison still reads the true sign.

// -1, 0 or 1: the sign of 2x - m s.
fn twice_past(x: f32, s: f32, m: f32) -> i32 {
  let s_hi = bitcast<f32>(bitcast<u32>(s) & 0xffffffe0u);
  let d = 2.0 * x - m * s_hi;
  let b = m * (s - s_hi);
  return select(select(0, -1, d < b), 1, d > b);
}

fn quantize(x_in: f32, s_in: f32) -> u32 {
  if (s_in == 0.0) {
    return 8u;
  }
  // x / s == (-x) / (-s): work with s > 0 so that the comparisons below read one way.
  var x = x_in;
  var s = s_in;
  if (s < 0.0) {
    x = -x;
    s = -s;
  }
  var q = clamp(round(x / s), -9.0, 8.0);
  let odd = (i32(q) & 1) != 0;
  let above = twice_past(x, s, 2.0 * q + 1.0);  // > 0: x / s is past q + 1/2
  if (above > 0 || (above == 0 && odd)) {
    q = q + 1.0;
  } else {
    let below = twice_past(x, s, 2.0 * q - 1.0);  // < 0: x / s is before q - 1/2
    if (below < 0 || (below == 0 && odd)) {
      q = q - 1.0;
    }
  }
  return u32(i32(clamp(q, -8.0, 7.0)) + 8);
}

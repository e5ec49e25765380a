// q4gsw's rounding (included as q4gsw/quantize by requant.wgsl and requant_groups.wgsl; quantize.glsl is its GLSL
// twin): code = clamp(round_half_even(x / s), -8, 7) + 8, code 8 where s == 0. quantize takes one weight, quantize8
// eight that share a scale; both leave what the guess below cannot decide to quantize_exact. There the quotient is
// only a guess; the rounding is decided by the sign of 2x - m s with m = 2q +- 1, computed exactly without an fma.
// (An fma would give it with one rounding, but WGSL and SPIR-V let a driver split it into a product and a sum, and
// Mesa's llvmpipe and lavapipe do: near-ties then went the wrong way, test Q4Requant.NearTiesRoundAsTheExactQuotient.)
// Exactly: |m| <= 19 has at most 5 significant bits, so with s = s_hi + s_lo (s_hi: s without its 5 lowest
// mantissa bits) both m s_hi and m s_lo are exact floats. Where 2x is within a factor 2 of m s_hi (any near-tie),
// d = 2x - m s_hi is exact (Sterbenz) and d - m s_lo is the sign's exact witness; elsewhere |d| is far above
// |m s_lo| (2^-18 of it), so the comparison still reads the true sign.

// Most quotients are nowhere near a tie, and for them the exact test is wasted work (about 30 operations an
// element in this source where the guess takes under 10, in a kernel meant to be bound by memory). So quantize
// first takes r = x (1 / s): within 3 ulp of x / s (1 / s within WGSL's 2.5, the product 0.5), so less than 2^-17
// from it at |r| <= 16, where |s| is in [2^-100, 2^100] (1 / s is then normal, and an x small enough to be flushed
// to zero gives code 8 either way). It keeps floor(r + 1/2), the nearest integer, where r is more than 2^-10 from a
// tie, or past 16 (the clamp decides there). Only the rest, NaN and infinity included, take the exact test. The
// codes are the same bit for bit.

// -1, 0 or 1: the sign of 2x - m s.
fn twice_past(x: f32, s: f32, m: f32) -> i32 {
  let s_hi = bitcast<f32>(bitcast<u32>(s) & 0xffffffe0u);
  let d = 2.0 * x - m * s_hi;
  let b = m * (s - s_hi);
  return select(select(0, -1, d < b), 1, d > b);
}

fn quantize_exact(x_in: f32, s_in: f32) -> u32 {
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
  // Bring s within [2^-64, 2^64] by a power of two (exact for normal x and s; an x pushed past the float range keeps
  // its sign, and its code clamps either way). Far out, m s can overflow, and 2x - m s can be below the smallest
  // normal float, which a GPU may flush to zero (NVIDIA's do): a near-tie then reads as a tie.
  if (s < 0x1p-64f) {
    x = x * 0x1p64f;
    s = s * 0x1p64f;
  } else if (s > 0x1p64f) {
    x = x * 0x1p-64f;
    s = s * 0x1p-64f;
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

fn quantize(x: f32, s: f32) -> u32 {
  let r = x * (1.0 / s);
  let f = floor(r + 0.5);
  let a = abs(s);
  if (a >= 0x1p-100f && a <= 0x1p100f && (abs(r - f) < 0.5 - 0x1p-10f || (abs(r) > 16.0 && abs(r) < 0x1p100f))) {
    return u32(i32(clamp(f, -8.0, 7.0)) + 8);
  }
  return quantize_exact(x, s);
}

// The guessed codes of four weights of one scale (nibbles 0..3 of codes) and the lanes the guess cannot decide (bit
// i of need: a near-tie, an extreme scale, s == 0, NaN). The guess as quantize's, for four at once with one
// reciprocal and no branch. (Padding past K comes in as zeros: code 8 for any scale but NaN, whose group
// dequantises to NaN whatever its codes.)
struct Guess4 {
  codes: u32,
  need: u32,
}
fn guess4(x: vec4<f32>, s: f32) -> Guess4 {
  let r = x * (1.0 / s);
  let f = floor(r + 0.5);
  let a = abs(s);
  let guessed = ((abs(r - f) < vec4<f32>(0.5 - 0x1p-10f)) |
                 ((abs(r) > vec4<f32>(16.0)) & (abs(r) < vec4<f32>(0x1p100f)))) &
                vec4<bool>(a >= 0x1p-100f && a <= 0x1p100f);
  let c = vec4<u32>(vec4<i32>(clamp(f, vec4<f32>(-8.0), vec4<f32>(7.0))) + vec4<i32>(8));
  let need = select(vec4<u32>(1u, 2u, 4u, 8u), vec4<u32>(0u), guessed);
  return Guess4(c.x | (c.y << 4u) | (c.z << 8u) | (c.w << 12u), need.x | need.y | need.z | need.w);
}

// The code word of eight weights of one scale (lo in nibbles 0..3, hi in 4..7): the guesses, then the exact test
// for the lanes that need it only, one at a time. Few lanes need it (about 0.2% of weights), but a warp often has
// one: a warp then spends one exact test for each lane its busiest thread flagged, usually one. (Run z8 on the
// H200: with all four lanes of a flagged vec4 through the exact test, as before, requant ran at 63% of the copy
// rate, 75% with the guess alone.) Vectors indexed by a variable stay in registers, unlike an array in a loop.
fn quantize8(lo: vec4<f32>, hi: vec4<f32>, s: f32) -> u32 {
  let g0 = guess4(lo, s);
  let g1 = guess4(hi, s);
  var word = g0.codes | (g1.codes << 16u);
  var need = g0.need | (g1.need << 4u);
  for (var k = 0u; k < 8u && need != 0u; k = k + 1u) {
    let i = firstTrailingBit(need);
    let x = select(lo[i & 3u], hi[i & 3u], i >= 4u);
    word = (word & ~(0xfu << (4u * i))) | (quantize_exact(x, s) << (4u * i));
    need = need & (need - 1u);
  }
  return word;
}

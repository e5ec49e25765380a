// q4gsw re-quantisation: one thread per code word (8 weights of a row).
// code = clamp(round_half_even(x / s), -8, 7) + 8; code 8 where s == 0 and for padding (k >= K).
// The quotient is only a guess; the rounding is decided exactly by the sign of x - (q +- 1/2) s, which fma gives
// with one rounding (a fused fma never turns a non-zero value into 0 or flips its sign), so ties go to even and
// near-ties go the right way whatever the division's last bits are.

const WG: u32 = 256u;

struct Params {
  rows: u32,        // N
  k: u32,           // K
  words: u32,       // words per row
  group_size: u32,
  latent_off: u32,
  _pad0: u32,
  _pad1: u32,
  _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> latent: array<f32>;
@group(0) @binding(2) var<storage, read> scales: array<f32>;
@group(0) @binding(3) var<storage, read_write> codes: array<u32>;

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
  let above = fma(-(q + 0.5), s, x);  // > 0: x / s is past q + 1/2
  if (above > 0.0 || (above == 0.0 && (i32(q) & 1) != 0)) {
    q = q + 1.0;
  } else {
    let below = fma(-(q - 0.5), s, x);  // < 0: x / s is before q - 1/2
    if (below < 0.0 || (below == 0.0 && (i32(q) & 1) != 0)) {
      q = q - 1.0;
    }
  }
  return u32(i32(clamp(q, -8.0, 7.0)) + 8);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.rows * p.words) {
    return;
  }
  let n = i / p.words;
  let w = i % p.words;
  var word = 0u;
  for (var j = 0u; j < 8u; j = j + 1u) {
    let k = w * 8u + j;
    var code = 8u;
    if (k < p.k) {
      code = quantize(latent[p.latent_off + n * p.k + k], scales[(k / p.group_size) * p.rows + n]);
    }
    word = word | (code << (4u * j));
  }
  codes[i] = word;
}

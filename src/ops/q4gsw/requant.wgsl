// q4gsw re-quantisation: one thread per code word (8 weights of a row).
// code = clamp(round_half_even(x / s), -8, 7) + 8; code 8 where s == 0 and for padding (k >= K).
// The rounding: q4gsw/quantize (exact, ties to even, with no fma a driver could split).

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

{{>q4gsw/quantize}}

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

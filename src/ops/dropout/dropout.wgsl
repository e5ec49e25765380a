// Inverted dropout with a counter-based random stream: element i (the row-major index) is kept when the top 24 bits
// of hash(key, stream, i) are >= threshold (round(p * 2^24)), and a kept element is scaled by 1 / (1 - p). The key
// (seed low, seed high, counter low, counter high) is read from a buffer, not a uniform, so a recorded dispatch
// replays with the counter the host wrote before the replay; the same key, stream and index always give the same
// decision, on any device (u32 arithmetic only). With mask_only the multiplier itself (0 or the scale) is written, and
// x (bound to any buffer) is not read.

const WG: u32 = 256u;

struct Params {
  n: u32,
  x_off: u32,
  stream: u32,
  threshold: u32,  // round(p * 2^24)
  scale: f32,      // f32(1 / (1 - p))
  mask_only: u32,
  key_off: u32,
  _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> key: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

// Chris Wellons' lowbias32: a bijection of u32 with strong avalanche.
fn mix32(v: u32) -> u32 {
  var h = v;
  h ^= h >> 16u;
  h *= 0x7feb352du;
  h ^= h >> 15u;
  h *= 0x846ca68bu;
  h ^= h >> 16u;
  return h;
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.n) {
    return;
  }
  // The key words absorbed one at a time, then the element index, twice mixed with the state re-injected.
  let state = mix32(key[p.key_off] ^ mix32(key[p.key_off + 1u] ^ mix32(key[p.key_off + 2u] ^
    mix32(key[p.key_off + 3u] ^ mix32(p.stream ^ 0x9e3779b9u)))));
  let h = mix32(mix32(i ^ state) + state);
  var m = 0.0;
  if ((h >> 8u) >= p.threshold) {
    m = p.scale;
  }
  if (p.mask_only != 0u) {
    y[i] = m;
  } else {
    y[i] = x[p.x_off + i] * m;
  }
}

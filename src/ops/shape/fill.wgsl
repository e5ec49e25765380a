// Fills a contiguous range with one 32-bit word (the value's bits in its dtype).

const WG: u32 = 256u;

struct Params {
  n: u32,
  off: u32,
  word: u32,
  _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i < p.n) {
    dst[p.off + i] = p.word;
  }
}

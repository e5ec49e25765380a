// The largest magnitude of each whole row of a view x[batch, rows, len] whose len stride is 1, for gemm_sm.wgsl's
// power-of-two scaling: 32 neighbouring threads a row, 8 rows a workgroup, each row's maximum written once as its f32
// bit pattern into maxima[out_off + batch * rows + row] (no atomics, so no zeroed buffer first: sm_absmax.wgsl's way
// for views along which a row is strided, where one workgroup cannot cover a row).
//
// @variant V4 {true|false} rows, offset and len multiples of 4: x bound and read as vec4s
// @variant X_TYPE {vec4<f32>|f32} the element type x is bound as: vec4<f32> exactly when V4

const V4: bool = {{V4}};

struct Params {
  rows: u32,
  len: u32,
  off: u32,
  sb: u32,
  sr: u32,
  _sl: u32,
  out_off: u32,
  _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<{{X_TYPE}}>;
@group(0) @binding(2) var<storage, read_write> maxima: array<u32>;

var<workgroup> part: array<f32, 256>;

{{#V4}}
fn absmax_from(base: u32, lane: u32) -> f32 {
  // base, len and the row stride are multiples of 4 (V4): whole vec4s.
  var m = vec4<f32>();
  for (var l = lane * 4u; l < p.len; l = l + 128u) {
    m = max(m, abs(x[(base + l) / 4u]));
  }
  return max(max(m.x, m.y), max(m.z, m.w));
}
{{/V4}}
{{^V4}}
fn absmax_from(base: u32, lane: u32) -> f32 {
  var m = 0.0;
  for (var l = lane; l < p.len; l = l + 32u) {
    m = max(m, abs(f32(x[base + l])));
  }
  return m;
}
{{/V4}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_index) li: u32) {
  let r = (wid.y * nwg.x + wid.x) * 8u + li / 32u;  // a 2-D grid where the rows need more than one dimension
  var m = 0.0;
  if (r < p.rows) {
    m = absmax_from(p.off + wid.z * p.sb + r * p.sr, li % 32u);
  }
  part[li] = m;
  workgroupBarrier();
  if (li % 32u == 0u && r < p.rows) {
    for (var i = 1u; i < 32u; i = i + 1u) {
      m = max(m, part[li + i]);
    }
    // Bits above infinity's (a NaN, should max have kept one) are taken as infinity: the row stays unscaled. Whether
    // max keeps a NaN is up to the GPU; the GEMM's products carry the NaN either way.
    maxima[p.out_off + wid.z * p.rows + r] = min(bitcast<u32>(m), 0x7f800000u);
  }
}

// The gradient of RMSNorm (rms_norm.wgsl) for rows of `dim`, given dy, x, weight and the forward's rstd:
//   dx = rstd * dy * w - x * rstd^3 / dim * sum_j(dy_j w_j x_j)
//   dw_part = sum over the segment's rows of dy * x * rstd   (the handler sums the parts)
// Rows are taken by segments of SEG threads, as in the forward, `per_seg` consecutive rows a segment, so that the
// weight's gradient leaves as one partial row a segment, not one a row (each thread adds into its own entries of
// its segment's part, which stay in cache). With ADD, dx also takes `addend` (the residual stream's gradient from
// its other consumer), so that joining the two costs no pass of its own.
//
// With V4 every row and offset but rstd's is in vec4s, as in the forward.
//
// @variant SEG {1|2|4|8|16|32|64|128|256} threads a row (ops/common.cpp: row_segment)
// @variant ADD {true|false} dx = addend + the norm's gradient
// @variant V4 {true|false} elems and the offsets multiples of 4: all but rstd bound as vec4s
// @variant T {vec4<f32>|f32} the element type of all but rstd: vec4<f32> exactly when V4

const WG: u32 = 256u;
const SEG: u32 = {{SEG}}u;

{{>common/segments}}

// dim and the offsets in elements of T, but r_off (rstd's, floats).
struct Params {
  rows: u32,
  dim: u32,
  dy_off: u32,
  x_off: u32,
  w_off: u32,
  r_off: u32,
  add_off: u32,
  per_seg: u32,
  elems: u32,  // a row's length in floats
  _pad0: u32,
  _pad1: u32,
  _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dy: array<{{T}}>;
@group(0) @binding(2) var<storage, read> x: array<{{T}}>;
@group(0) @binding(3) var<storage, read> weight: array<{{T}}>;
@group(0) @binding(4) var<storage, read> rstd: array<f32>;
@group(0) @binding(5) var<storage, read_write> dx: array<{{T}}>;
@group(0) @binding(6) var<storage, read_write> dw_part: array<{{T}}>;
{{#ADD}}
@group(0) @binding(7) var<storage, read> addend: array<{{T}}>;
{{/ADD}}

{{>common/wgsum}}

fn total(v: {{T}}) -> f32 {
{{#V4}}
  return v.x + v.y + v.z + v.w;
{{/V4}}
{{^V4}}
  return v;
{{/V4}}
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u,
        @builtin(num_workgroups) nwg: vec3u) {
  let seg = segment_index(wid, nwg, lid);
  let t = lid.x % SEG;
  let part = seg * p.dim;
  // Every segment of the workgroup runs per_seg rounds (workgroup_sum needs them all); past the last row, none.
  for (var i = 0u; i < p.per_seg; i = i + 1u) {
    let row = seg * p.per_seg + i;
    let valid = row < p.rows;
    let len = select(0u, p.dim, valid);
    let base = row * p.dim;
    var dot = 0.0;
    for (var j = t; j < len; j = j + SEG) {
      dot = dot + total(dy[p.dy_off + base + j] * weight[p.w_off + j] * x[p.x_off + base + j]);
    }
    let sum = workgroup_sum(lid.x, dot);
    if (valid) {
      let r = rstd[p.r_off + row];
      let k = r * r * r / f32(p.elems) * sum;
      for (var j = t; j < len; j = j + SEG) {
        let g = dy[p.dy_off + base + j];
        let xv = x[p.x_off + base + j];
        var d = r * g * weight[p.w_off + j] - xv * k;
{{#ADD}}
        d = d + addend[p.add_off + base + j];
{{/ADD}}
        dx[base + j] = d;
        if (i == 0u) {
          dw_part[part + j] = g * xv * r;
        } else {
          dw_part[part + j] = dw_part[part + j] + g * xv * r;
        }
      }
    }
  }
}

// SwiGLU, the gated MLP activation of Llama-family models, forward and backward in one pass each:
//   forward   out = silu(gate) * up,                      silu(g) = g * sigmoid(g)
//   backward  d_up = d_out * silu(gate)
//             d_gate = d_out * up * s * (1 + gate * (1 - s)),   s = sigmoid(gate)
// Fusing them keeps silu(gate) out of memory (the composite path stores it for the product's gradient) and reads
// each operand once. Operands are contiguous; with vec4 every offset and the length are multiples of 4.
//
// With MAXIMA the operands are a matrix [rows, cols] (cols a multiple of 4) and a workgroup takes a tile of 64 rows
// x 128 columns of it (matmul/tile_maxima): the same values, and the largest magnitudes of each output's rows and
// columns combined into `maxima`, for the mixed GEMMs that read the outputs next (the down projection's input; the
// gate and up projections' output gradients), whose absmax passes then have nothing to do. flags 0: the values
// alone, by the same code (a forward's output made again for the backward, bit for bit).
//
// @variant T {f32|vec4<f32>} the element each thread takes (vec4 where the operands are 16-byte aligned)
// @variant BACKWARD {true|false} the gradients (d_out, gate, up -> d_gate, d_up) instead of the forward
// @variant MAXIMA {true|false} tiles of a matrix, with the outputs' row and column maxima (T vec4 only)

const WG: u32 = 256u;

struct Params {
  n: u32,         // elements of T
  gate_off: u32,  // in elements of T
  up_off: u32,
  grad_off: u32,  // backward
  rows: u32,      // MAXIMA: the matrix's rows and columns (floats)
  cols: u32,
  flags: u32,     // MAXIMA: 3 (rows and columns) or 0 (the values alone)
  _pad: u32,
  max_r0: u32,    // MAXIMA: where the first output's row maxima go in `maxima`, and its column maxima
  max_c0: u32,
  max_r1: u32,    // the second output's (backward: d_up; d_gate is the first)
  max_c1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> gate: array<{{T}}>;
@group(0) @binding(2) var<storage, read> up: array<{{T}}>;
{{#BACKWARD}}
@group(0) @binding(3) var<storage, read> grad: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> d_gate: array<{{T}}>;
@group(0) @binding(5) var<storage, read_write> d_up: array<{{T}}>;
{{/BACKWARD}}
{{^BACKWARD}}
@group(0) @binding(3) var<storage, read_write> out: array<{{T}}>;
{{/BACKWARD}}
{{#MAXIMA}}
{{#BACKWARD}}
@group(0) @binding(6) var<storage, read_write> maxima: array<atomic<u32>>;
{{/BACKWARD}}
{{^BACKWARD}}
@group(0) @binding(4) var<storage, read_write> maxima: array<atomic<u32>>;
{{/BACKWARD}}

{{>matmul/tile_maxima}}

fn rowmax(a: vec4<f32>) -> f32 {
  return max(max(a.x, a.y), max(a.z, a.w));
}
{{/MAXIMA}}

// exp(-|g|) never overflows; the two branches are the same function.
fn sig(g: {{T}}) -> {{T}} {
  let z = exp(-abs(g));
  let one = {{T}}(1.0);
  return select(z / (one + z), one / (one + z), g >= {{T}}(0.0));
}

{{#MAXIMA}}
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  let j = li % 32u;
  let r0 = wid.y * TM_ROWS;
  let c = wid.x * TM_COLS + 4u * j;
  var rm0: array<f32, 8>;
  var cm0 = vec4<f32>();
{{#BACKWARD}}
  var rm1: array<f32, 8>;
  var cm1 = vec4<f32>();
{{/BACKWARD}}
  // The tile's loads first, all in flight together (a thread's 8 rows), then the values. Interleaved with the
  // stores, the tiled form ran at about three quarters of the plain form's rate (H200, run z3); loads first gained
  // 6% on the forward and 1% on the backward (H100, run z4).
  var gs: array<{{T}}, 8>;
  var us: array<{{T}}, 8>;
{{#BACKWARD}}
  var ds: array<{{T}}, 8>;
{{/BACKWARD}}
  for (var k = 0u; k < 8u; k = k + 1u) {
    let r = r0 + li / 32u + 8u * k;
    if (r < p.rows && c < p.cols) {
      let i = (r * p.cols + c) / 4u;
      gs[k] = gate[p.gate_off + i];
      us[k] = up[p.up_off + i];
{{#BACKWARD}}
      ds[k] = grad[p.grad_off + i];
{{/BACKWARD}}
    }
  }
  for (var k = 0u; k < 8u; k = k + 1u) {
    let r = r0 + li / 32u + 8u * k;
    if (r < p.rows && c < p.cols) {
      let i = (r * p.cols + c) / 4u;
      let g = gs[k];
      let u = us[k];
      let s = sig(g);
{{#BACKWARD}}
      let d = ds[k];
      let dg = d * u * s * ({{T}}(1.0) + g * ({{T}}(1.0) - s));
      let du = d * g * s;
      d_gate[i] = dg;
      d_up[i] = du;
      rm0[k] = rowmax(abs(dg));
      cm0 = max(cm0, abs(dg));
      rm1[k] = rowmax(abs(du));
      cm1 = max(cm1, abs(du));
{{/BACKWARD}}
{{^BACKWARD}}
      let o = g * s * u;
      out[i] = o;
      rm0[k] = rowmax(abs(o));
      cm0 = max(cm0, abs(o));
{{/BACKWARD}}
    }
  }
  tile_maxima(li, rm0, cm0, r0, c, p.rows, p.cols, p.max_r0, p.max_c0, p.flags);
{{#BACKWARD}}
  tile_maxima(li, rm1, cm1, r0, c, p.rows, p.cols, p.max_r1, p.max_c1, p.flags);
{{/BACKWARD}}
}
{{/MAXIMA}}
{{^MAXIMA}}
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.n) {
    return;
  }
  let g = gate[p.gate_off + i];
  let u = up[p.up_off + i];
  let s = sig(g);
{{#BACKWARD}}
  let d = grad[p.grad_off + i];
  d_gate[i] = d * u * s * ({{T}}(1.0) + g * ({{T}}(1.0) - s));
  d_up[i] = d * g * s;
{{/BACKWARD}}
{{^BACKWARD}}
  out[i] = g * s * u;
{{/BACKWARD}}
}
{{/MAXIMA}}

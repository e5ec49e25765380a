// SwiGLU, the gated MLP activation of Llama-family models, forward and backward in one pass each:
//   forward   out = silu(gate) * up,                      silu(g) = g * sigmoid(g)
//   backward  d_up = d_out * silu(gate)
//             d_gate = d_out * up * s * (1 + gate * (1 - s)),   s = sigmoid(gate)
// Fusing them keeps silu(gate) out of memory (the composite path stores it for the product's gradient) and reads
// each operand once. Operands are contiguous; with vec4 every offset and the length are multiples of 4.
//
// @variant T {f32|vec4<f32>} the element each thread takes (vec4 where the operands are 16-byte aligned)
// @variant BACKWARD {true|false} the gradients (d_out, gate, up -> d_gate, d_up) instead of the forward

const WG: u32 = 256u;

struct Params {
  n: u32,         // elements of T
  gate_off: u32,  // in elements of T
  up_off: u32,
  grad_off: u32,  // backward
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

// exp(-|g|) never overflows; the two branches are the same function.
fn sig(g: {{T}}) -> {{T}} {
  let z = exp(-abs(g));
  let one = {{T}}(1.0);
  return select(z / (one + z), one / (one + z), g >= {{T}}(0.0));
}

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

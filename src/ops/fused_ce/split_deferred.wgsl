// fused_ce, after split.wgsl: writes the parts it deferred (a workgroup whose wait for another's part ran out
// writes nothing and marks its parts on the board; split.wgsl says why). One workgroup a part of the grid, most of
// which find their part not deferred and leave. By now every part of a counted row is published, so the row's
// statistics are merged from the board in part order and the dlogits computed as split.wgsl computes them: the
// same bits whoever writes a part. A deferred part's elements are untouched logits, read here by the thread that
// writes them.
//
// Variants (fused_ce.cpp fills them in; `wgtrain kernels` lists them):
// @variant VEC4 {true|false} T = vec4<f32> (p.vocab and the offsets count vec4s)
// @variant IN_PLACE {true|false} dlogits over the logits (binding 1 read-write, no binding 6)

const WG: u32 = 256u;
const SEG: u32 = WG;

{{>common/rowstats}}

struct Params {
  rows: u32,
  vocab: u32,
  logits_off: u32,
  labels_off: u32,
  out_off: u32,
  parts: u32,  // split.wgsl's parts a row
  span: u32,   // split.wgsl's elements (of T) a part
  _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;

{{>fused_ce/elements}}

{{#IN_PLACE}}
@group(0) @binding(1) var<storage, read_write> logits: array<T>;
fn store_d(i: u32, v: T) { logits[i] = v; }
{{/IN_PLACE}}
{{^IN_PLACE}}
@group(0) @binding(1) var<storage, read> logits: array<T>;
@group(0) @binding(6) var<storage, read_write> dlogits: array<T>;
fn store_d(i: u32, v: T) { dlogits[i] = v; }
{{/IN_PLACE}}
@group(0) @binding(2) var<storage, read> labels: array<i32>;
@group(0) @binding(3) var<storage, read> stats: array<f32>;
@group(0) @binding(4) var<storage, read_write> row_loss: array<f32>;
@group(0) @binding(5) var<storage, read_write> board: array<atomic<u32>>;

var<workgroup> wg_deferred: u32;

fn dec(w: u32) -> f32 { return bitcast<f32>(w - 2u); }

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u,
        @builtin(num_workgroups) nwg: vec3u) {
  let gi = wid.x + wid.y * nwg.x;  // row * parts + part
  if (gi >= p.rows * p.parts) {
    return;
  }
  let t = lid.x;
  if (t == 0u) {
    wg_deferred = atomicLoad(&board[1u + 4u * gi + 3u]);
  }
  if (workgroupUniformLoad(&wg_deferred) == 0u) {
    return;
  }
  let row = gi / p.parts;
  let part = gi % p.parts;
  let slot = 1u + 4u * row * p.parts;
  var row_max = dec(atomicLoad(&board[slot]));
  var row_sum = dec(atomicLoad(&board[slot + 1u]));
  for (var i = 1u; i < p.parts; i = i + 1u) {
    let r = merge_stats(row_max, row_sum, dec(atomicLoad(&board[slot + 4u * i])),
                        dec(atomicLoad(&board[slot + 4u * i + 1u])));
    row_max = r.x;
    row_sum = r.y;
  }
  let inv_n = select(0.0, 1.0 / stats[0], stats[0] > 0.0);
  let scale = inv_n / row_sum;
  let lab = u32(labels[p.labels_off + row]);  // >= 0: only counted rows defer
  let base = p.logits_off + row * p.vocab;
  let out_base = p.out_off + row * p.vocab;
  let has_label = (lab / LANES) / p.span == part;
  var x_label = 0.0;
  if (has_label) { x_label = lane(logits[base + lab / LANES], lab % LANES); }
  workgroupBarrier();  // x_label read everywhere before it is written over
  let lo = part * p.span;
  for (var j = lo + t; j < min(lo + p.span, p.vocab); j = j + WG) {
    store_d(out_base + j, d_of(logits[base + j], j, row_max, scale, lab, inv_n));
  }
  if (has_label && t == 0u) {
    row_loss[row] = log(row_sum) + row_max - x_label;
  }
}

// fused_ce, step 2: one workgroup per row of logits [R, V].
// Pass 1 keeps a running (max, sum of exp(x - max)) per thread and merges them; pass 2 writes
//   dlogits = (exp(x - max) / sum - onehot(label)) / n_valid
// (0 for an ignored row, label < 0, and everywhere when n_valid is 0), and the row's loss log(sum) + max - x[label]. Probabilities are never stored.
// Every exponent is <= 0, so logits of any magnitude are safe. Variants: dlogits over the logits buffer (each
// element is read, then written, by the same thread), and T = vec4<f32> when V and the offsets are multiples of 4
// (then p.vocab and the offsets count vec4s, and VEC_HELPERS reduce across the 4 lanes). PASS1 and PASS2 either
// stream the row from memory twice, or, where the row fits in a few registers per thread, keep it there so that
// the logits are read once (fused_ce.cpp writes both forms).

const WG: u32 = {{WG}}u;  // 1024 where the device allows: fewer rows in flight keep each row in cache for pass 2
const SEG: u32 = WG;       // one row per workgroup

{{>common/rowstats}}

struct Params {
  rows: u32,
  vocab: u32,
  logits_off: u32,
  labels_off: u32,
  out_off: u32,
  index_bit: u32,   // bit to set in index_error for a label >= vocab
  _pad0: u32,
  _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
alias T = {{T}};

@group(0) @binding(1) var<storage, {{LOGITS_ACCESS}}> logits: array<T>;
@group(0) @binding(2) var<storage, read> labels: array<i32>;
@group(0) @binding(3) var<storage, read> stats: array<f32>;
@group(0) @binding(4) var<storage, read_write> row_loss: array<f32>;
@group(0) @binding(5) var<storage, read_write> index_error: array<atomic<u32>>;
{{DLOGITS_DECL}}
{{VEC_HELPERS}}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u,
        @builtin(num_workgroups) nwg: vec3u) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.rows) {
    return;
  }
  let t = lid.x;
  let base = p.logits_off + row * p.vocab;
  let out_base = p.out_off + row * p.vocab;
  let label = labels[p.labels_off + row];
  let bad_label = label >= i32(p.vocab * LANES);
  if (bad_label && t == 0u) {
    atomicOr(&index_error[0], p.index_bit);
  }
  if (label < 0 || bad_label) {
    // Ignored (or refused) row: no loss, zero gradient.
    for (var j = t; j < p.vocab; j = j + WG) {
      store_d(out_base + j, T());
    }
    if (t == 0u) {
      row_loss[row] = 0.0;
    }
    return;
  }

{{PASS1}}
  let stats_row = row_stats(t, m, s);
  let row_max = stats_row.x;
  let row_sum = stats_row.y;
  let inv_n = select(0.0, 1.0 / stats[0], stats[0] > 0.0);  // n_valid 0: nothing counts
  let scale = inv_n / row_sum;
  let x_label = lane(logits[base + u32(label) / LANES], u32(label) % LANES);
  workgroupBarrier();  // everyone has read x_label before it is overwritten in place
{{PASS2}}
  if (t == 0u) {
    row_loss[row] = log(row_sum) + row_max - x_label;
  }
}

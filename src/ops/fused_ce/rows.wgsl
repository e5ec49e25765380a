// fused_ce, step 2: one workgroup per row of logits [R, V].
// Pass 1 keeps a running (max, sum of exp(x - max)) per thread and merges them; pass 2 writes
//   dlogits = (exp(x - max) / sum - onehot(label)) / n_valid
// (0 for an ignored row, label < 0, and everywhere when n_valid is 0), and the row's loss log(sum) + max - x[label].
// Probabilities are never stored. Every exponent is <= 0, so logits of any magnitude are safe.
// A row is read in two parts. The first CHUNKS * WG elements (of T) are held: each thread keeps its CHUNKS of them in
// a private array between the passes (loops of the constant trip count CHUNKS, which the GPU compiler unrolls, so
// the array stays in registers), so they are read once; a row that fits there (CHUNKS = ceil(V / WG) <= 8) is read
// once in all. The rest streams: read in pass 1 and again in pass 2, UNROLL loads a thread issued back to back (the
// streamed kernel with one load in flight a thread ran V = 128256 at 25-28% of the copy bandwidth on the H200), in
// blocks of UNROLL * WG elements and a tail. With p.reverse, pass 2 walks the blocks backwards, so that what pass 1 read last, which
// is likeliest still in L2, is read again first.
//
// Variants (fused_ce.cpp fills them in; `wgtrain kernels` lists them):
// @variant WG {256|1024} threads a row: 1024 where the device allows (fewer rows in flight: each stays in cache)
// @variant VEC4 {true|false} T = vec4<f32> where V and the offsets are multiples of 4 (then p.vocab counts vec4s)
// @variant IN_PLACE {true|false} dlogits over the logits buffer (each element read, then written, by the same thread)
// @variant CHUNKS {0|1|2|3|4|5|6|7|8} elements (of T) each thread holds in registers between the passes
// @variant UNROLL {1|2|4} loads a thread issues at once in the streamed part of the row

const WG: u32 = {{WG}}u;
const SEG: u32 = WG;       // one row per workgroup
const CHUNKS: u32 = {{CHUNKS}}u;
const UNROLL: u32 = {{UNROLL}}u;

{{>common/rowstats}}

struct Params {
  rows: u32,
  vocab: u32,
  logits_off: u32,
  labels_off: u32,
  out_off: u32,
  index_bit: u32,   // bit to set in index_error for a label >= vocab
  reverse: u32,     // 1: pass 2 walks the streamed blocks backwards
  _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;

// The element type, and the reductions across its lanes.
{{>fused_ce/elements}}

{{#IN_PLACE}}
@group(0) @binding(1) var<storage, read_write> logits: array<T>;
{{/IN_PLACE}}
{{^IN_PLACE}}
@group(0) @binding(1) var<storage, read> logits: array<T>;
{{/IN_PLACE}}
@group(0) @binding(2) var<storage, read> labels: array<i32>;
@group(0) @binding(3) var<storage, read> stats: array<f32>;
@group(0) @binding(4) var<storage, read_write> row_loss: array<f32>;
@group(0) @binding(5) var<storage, read_write> index_error: array<atomic<u32>>;
{{#IN_PLACE}}
fn store_d(i: u32, v: T) { logits[i] = v; }
{{/IN_PLACE}}
{{^IN_PLACE}}
@group(0) @binding(6) var<storage, read_write> dlogits: array<T>;
fn store_d(i: u32, v: T) { dlogits[i] = v; }
{{/IN_PLACE}}

// A streamed block's UNROLL loads at i, i + WG, ... (those past UNROLL are not made: x1..x3 stay zero), issued
// together. Named fields, not an array indexed in a loop: they stay in registers whether or not the GPU compiler
// unrolls Tint's loops.
struct Block {
  x0: T,
  x1: T,
  x2: T,
  x3: T,
}
fn load_block(i: u32) -> Block {
  var k = Block(logits[i], T(), T(), T());
  if (UNROLL >= 2u) { k.x1 = logits[i + WG]; }
  if (UNROLL == 4u) {
    k.x2 = logits[i + 2u * WG];
    k.x3 = logits[i + 3u * WG];
  }
  return k;
}

// dlogits at element j (of T) of a counted row.
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

  // Pass 1: this thread's (max, sum of exp(x - max)) over elements t, t + WG, t + 2 WG, ...
  var m = LOWEST;
  var s = 0.0;
  var xs: array<T, max(CHUNKS, 1u)>;  // the held elements (unused when CHUNKS is 0)
  if (CHUNKS > 0u) {
    for (var c = 0u; c < CHUNKS; c = c + 1u) {
      let j = t + c * WG;
      xs[c] = T(LOWEST);
      if (j < p.vocab) { xs[c] = logits[base + j]; }
      m = max(m, hmax(xs[c]));
    }
    for (var c = 0u; c < CHUNKS; c = c + 1u) {
      if (t + c * WG < p.vocab) { s = s + hsum(exp(xs[c] - m)); }
    }
  }
  // The streamed part: [s0, s0 + blocks * UNROLL * WG) in whole blocks, then the tail up to V.
  let s0 = CHUNKS * WG;
  let span = select(0u, p.vocab - s0, p.vocab > s0);
  let blocks = span / (UNROLL * WG);
  let tail0 = s0 + blocks * UNROLL * WG;
  for (var b = 0u; b < blocks; b = b + 1u) {
    let x = load_block(base + s0 + b * (UNROLL * WG) + t);
    var bm = max(m, hmax(x.x0));
    if (UNROLL >= 2u) { bm = max(bm, hmax(x.x1)); }
    if (UNROLL == 4u) { bm = max(max(bm, hmax(x.x2)), hmax(x.x3)); }
    var bs = hsum(exp(x.x0 - bm));
    if (UNROLL >= 2u) { bs = bs + hsum(exp(x.x1 - bm)); }
    if (UNROLL == 4u) { bs = (bs + hsum(exp(x.x2 - bm))) + hsum(exp(x.x3 - bm)); }
    s = s * exp(m - bm) + bs;
    m = bm;
  }
  for (var j = tail0 + t; j < p.vocab; j = j + WG) {
    let x = logits[base + j];
    let mx = max(m, hmax(x));
    s = s * exp(m - mx) + hsum(exp(x - mx));
    m = mx;
  }
  let stats_row = row_stats(t, m, s);
  let row_max = stats_row.x;
  let row_sum = stats_row.y;
  let inv_n = select(0.0, 1.0 / stats[0], stats[0] > 0.0);  // n_valid 0: nothing counts
  let scale = inv_n / row_sum;
  let x_label = lane(logits[base + u32(label) / LANES], u32(label) % LANES);
  workgroupBarrier();  // everyone has read x_label before it is overwritten in place
  // Pass 2: dlogits; the held part from registers, the streamed part read again (tail first).
  if (CHUNKS > 0u) {
    for (var c = 0u; c < CHUNKS; c = c + 1u) {
      let j = t + c * WG;
      if (j < p.vocab) { store_d(out_base + j, d_of(xs[c], j, row_max, scale, u32(label), inv_n)); }
    }
  }
  for (var j = tail0 + t; j < p.vocab; j = j + WG) {
    let x = logits[base + j];
    store_d(out_base + j, d_of(x, j, row_max, scale, u32(label), inv_n));
  }
  for (var i = 0u; i < blocks; i = i + 1u) {
    let b = select(i, blocks - 1u - i, p.reverse != 0u);
    let j0 = s0 + b * (UNROLL * WG) + t;
    let x = load_block(base + j0);
    store_d(out_base + j0, d_of(x.x0, j0, row_max, scale, u32(label), inv_n));
    if (UNROLL >= 2u) { store_d(out_base + j0 + WG, d_of(x.x1, j0 + WG, row_max, scale, u32(label), inv_n)); }
    if (UNROLL == 4u) {
      store_d(out_base + j0 + 2u * WG, d_of(x.x2, j0 + 2u * WG, row_max, scale, u32(label), inv_n));
      store_d(out_base + j0 + 3u * WG, d_of(x.x3, j0 + 3u * WG, row_max, scale, u32(label), inv_n));
    }
  }
  if (t == 0u) {
    row_loss[row] = log(row_sum) + row_max - x_label;
  }
}

// fused_ce, step 2 for rows too long for one workgroup to hold (rows.wgsl streams part of such a row twice), out of
// place: each row is cut into p.parts parts of SPAN = CHUNKS * WG elements (of T), one workgroup a part, which holds
// its part in registers, so that every logit is read once and every dlogit written once.
//
// A part's workgroup computes its (max, sum of exp(x - max)), publishes it on the board, gathers the other parts'
// from the board, and merges all p.parts in part order (the same bits in every part of the row), then writes its
// dlogits and, in the part holding the label, the row's loss. WGSL promises nothing about when another workgroup
// runs, and llvmpipe ends every loop of an invocation once they have run 65535 iterations in all, so no wait is
// unbounded: a part not published within p.spin polls is read from memory by the workgroup that needs it (and
// published by it too). The logits are never written here, so that read is always safe, and it runs the held path's
// loops in the same order, so the result does not depend on who computed a part. In place, the owner of a part
// could overwrite it while another workgroup still reads it: fused_ce.cpp uses rows.wgsl there.
//
// Board words are read and written through atomics (relaxed: no ordering between words), so each word carries its
// own meaning: 0 (EMPTY) not yet written, else a value encoded as its bits + 2 (NaNs made canonical first, so that
// no value encodes as 0). Word 0 hands out tickets: parts in the order the workgroups start, so that the parts of a
// row start together whatever order the hardware starts workgroups in. Part i of row r: words 1 + 2 (r * p.parts +
// i) (max) and the next (sum, stored second and polled first). fused_ce.cpp zeroes the board before each dispatch.
//
// Variants (fused_ce.cpp fills them in; `wgtrain kernels` lists them):
// @variant WG {256|1024} threads a part
// @variant VEC4 {true|false} T = vec4<f32> where V and the offsets are multiples of 4 (then p.vocab counts vec4s)
// @variant CHUNKS {2|8} elements (of T) each thread holds: 8 on a GPU, 2 for tests that need many parts

const WG: u32 = {{WG}}u;
const SEG: u32 = WG;  // one part per workgroup
const CHUNKS: u32 = {{CHUNKS}}u;
const SPAN: u32 = CHUNKS * WG;
const MAX_PARTS: u32 = 64u;  // fused_ce.cpp uses this kernel only where p.parts <= 64
const EMPTY: u32 = 0u;

{{>common/rowstats}}

struct Params {
  rows: u32,
  vocab: u32,
  logits_off: u32,
  labels_off: u32,
  out_off: u32,
  index_bit: u32,   // bit to set in index_error for a label >= vocab
  parts: u32,       // workgroups a row
  spin: u32,        // polls of an unpublished part before reading it from memory
}

@group(0) @binding(0) var<uniform> p: Params;

{{#VEC4}}
alias T = vec4<f32>;
const LANES: u32 = 4u;
fn hmax(v: T) -> f32 { return max(max(v.x, v.y), max(v.z, v.w)); }
fn hsum(v: T) -> f32 { return (v.x + v.y) + (v.z + v.w); }
fn lane(v: T, i: u32) -> f32 { return v[i]; }
fn onehot(j: u32, label: u32) -> T {
  return select(vec4<f32>(0.0), vec4<f32>(1.0),
                vec4<u32>(4u * j) + vec4<u32>(0u, 1u, 2u, 3u) == vec4<u32>(label));
}
{{/VEC4}}
{{^VEC4}}
alias T = f32;
const LANES: u32 = 1u;
fn hmax(v: T) -> f32 { return v; }
fn hsum(v: T) -> f32 { return v; }
fn lane(v: T, i: u32) -> f32 { return v; }
fn onehot(j: u32, label: u32) -> T { return select(0.0, 1.0, j == label); }
{{/VEC4}}

@group(0) @binding(1) var<storage, read> logits: array<T>;
@group(0) @binding(2) var<storage, read> labels: array<i32>;
@group(0) @binding(3) var<storage, read> stats: array<f32>;
@group(0) @binding(4) var<storage, read_write> row_loss: array<f32>;
@group(0) @binding(5) var<storage, read_write> index_error: array<atomic<u32>>;
@group(0) @binding(6) var<storage, read_write> board: array<atomic<u32>>;
@group(0) @binding(7) var<storage, read_write> dlogits: array<T>;
fn store_d(i: u32, v: T) { dlogits[i] = v; }

var<workgroup> wg_ticket: u32;
var<workgroup> part_m: array<f32, MAX_PARTS>;
var<workgroup> part_s: array<f32, MAX_PARTS>;
var<workgroup> missing: array<u32, MAX_PARTS>;  // parts not published in time, in no particular order
var<workgroup> n_missing: atomic<u32>;
var<workgroup> wg_n_missing: u32;

fn enc(v: f32) -> u32 {  // never EMPTY
  let b = bitcast<u32>(v);
  return select(b, 0x7fc00000u, (b & 0x7fffffffu) > 0x7f800000u) + 2u;
}
fn dec(w: u32) -> f32 { return bitcast<f32>(w - 2u); }

// The element (of T) at j of the row at base, LOWEST past the row's end.
fn elem(base: u32, j: u32) -> T {
  var x = T(LOWEST);
  if (j < p.vocab) { x = logits[base + j]; }
  return x;
}

// This thread's (max, sum of exp(x - max)) over its elements of part i read from memory: the held path's loops,
// element for element, so the same bits.
fn thread_stats_read(base: u32, i: u32, t: u32) -> vec2f {
  var m = LOWEST;
  for (var c = 0u; c < CHUNKS; c = c + 1u) {
    m = max(m, hmax(elem(base, i * SPAN + t + c * WG)));
  }
  var s = 0.0;
  for (var c = 0u; c < CHUNKS; c = c + 1u) {
    let j = i * SPAN + t + c * WG;
    if (j < p.vocab) { s = s + hsum(exp(logits[base + j] - m)); }
  }
  return vec2f(m, s);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u,
        @builtin(num_workgroups) nwg: vec3u) {
  if (wid.x + wid.y * nwg.x >= p.rows * p.parts) {
    return;  // the grid's padding: takes no ticket
  }
  let t = lid.x;
  if (t == 0u) {
    wg_ticket = atomicAdd(&board[0], 1u);
    atomicStore(&n_missing, 0u);
  }
  let ticket = workgroupUniformLoad(&wg_ticket);
  let row = ticket / p.parts;
  let part = ticket % p.parts;
  let base = p.logits_off + row * p.vocab;
  let out_base = p.out_off + row * p.vocab;
  let lo = part * SPAN;
  let label = labels[p.labels_off + row];
  let bad_label = label >= i32(p.vocab * LANES);
  if (label < 0 || bad_label) {
    // Ignored (or refused) row: no loss, zero gradient; every part knows it from the label, so none publishes.
    if (part == 0u && t == 0u) {
      if (bad_label) { atomicOr(&index_error[0], p.index_bit); }
      row_loss[row] = 0.0;
    }
    for (var j = lo + t; j < min(lo + SPAN, p.vocab); j = j + WG) {
      store_d(out_base + j, T());
    }
    return;
  }

  // Pass 1 over this part, held in registers (loops of the constant trip count CHUNKS, unrolled).
  var xs: array<T, CHUNKS>;
  var m = LOWEST;
  for (var c = 0u; c < CHUNKS; c = c + 1u) {
    xs[c] = elem(base, lo + t + c * WG);
    m = max(m, hmax(xs[c]));
  }
  var s = 0.0;
  for (var c = 0u; c < CHUNKS; c = c + 1u) {
    if (lo + t + c * WG < p.vocab) { s = s + hsum(exp(xs[c] - m)); }
  }
  let own = row_stats(t, m, s);

  // Publish this part and gather the others: thread i looks after part i.
  let slot = 1u + 2u * row * p.parts;
  if (t == part) {
    part_m[t] = own.x;
    part_s[t] = own.y;
    atomicStore(&board[slot + 2u * t], enc(own.x));
    atomicStore(&board[slot + 2u * t + 1u], enc(own.y));
  } else if (t < p.parts) {
    var wm = EMPTY;
    var ws = EMPTY;
    for (var k = 0u; k <= p.spin; k = k + 1u) {
      ws = atomicLoad(&board[slot + 2u * t + 1u]);
      if (ws != EMPTY) {
        wm = atomicLoad(&board[slot + 2u * t]);
        if (wm != EMPTY) { break; }
      }
    }
    if (wm == EMPTY || ws == EMPTY) {
      missing[atomicAdd(&n_missing, 1u)] = t;
    } else {
      part_m[t] = dec(wm);
      part_s[t] = dec(ws);
    }
  }
  workgroupBarrier();
  if (t == 0u) {
    wg_n_missing = atomicLoad(&n_missing);
  }
  // The parts not published in time, read from memory here, and published for the row's other parts.
  let n = workgroupUniformLoad(&wg_n_missing);
  for (var k = 0u; k < n; k = k + 1u) {
    let i = missing[k];
    let ts = thread_stats_read(base, i, t);
    let ps = row_stats(t, ts.x, ts.y);
    if (t == 0u) {
      part_m[i] = ps.x;
      part_s[i] = ps.y;
      atomicStore(&board[slot + 2u * i], enc(ps.x));
      atomicStore(&board[slot + 2u * i + 1u], enc(ps.y));
    }
  }
  workgroupBarrier();

  // The row's statistics, merged in part order.
  var row_max = part_m[0];
  var row_sum = part_s[0];
  for (var i = 1u; i < p.parts; i = i + 1u) {
    let r = merge_stats(row_max, row_sum, part_m[i], part_s[i]);
    row_max = r.x;
    row_sum = r.y;
  }
  let inv_n = select(0.0, 1.0 / stats[0], stats[0] > 0.0);  // n_valid 0: nothing counts
  let scale = inv_n / row_sum;
  let lab = u32(label);
  let has_label = (lab / LANES) / SPAN == part;
  var x_label = 0.0;
  if (has_label) { x_label = lane(logits[base + lab / LANES], lab % LANES); }

  // Pass 2: dlogits from registers.
  for (var c = 0u; c < CHUNKS; c = c + 1u) {
    let j = lo + t + c * WG;
    if (j < p.vocab) { store_d(out_base + j, exp(xs[c] - row_max) * scale - onehot(j, lab) * inv_n); }
  }
  if (has_label && t == 0u) {
    row_loss[row] = log(row_sum) + row_max - x_label;
  }
}

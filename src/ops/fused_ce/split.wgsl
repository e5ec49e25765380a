// fused_ce, step 2 for rows too long for one workgroup to hold (rows.wgsl streams part of such a row twice): each row
// is cut into p.parts parts of SPAN = CHUNKS * WG elements (of T), one workgroup a part, which holds its part in
// registers, so that every logit is read once and every dlogit written once, out of place or over the logits.
//
// A part's workgroup computes its (max, sum of exp(x - max)), publishes it on the board, gathers the other parts'
// from the board, and merges all p.parts in part order (the same bits in every part of the row), then writes its
// dlogits and, in the part holding the label, the row's loss. WGSL promises nothing about when another workgroup
// runs, and llvmpipe ends every loop of an invocation once they have run 65535 iterations in all, so no wait is
// unbounded: a part not published within p.spin polls is read from memory by the workgroup that needs it.
//
// Who touches a part's elements: exactly one workgroup, the first to claim the part on the board (its owner at its
// start, or a workgroup that found it unpublished). The claimer alone reads the part, publishes its statistics
// and writes its dlogits; an owner that finds its part claimed leaves at once. So a part is never overwritten while
// another workgroup reads it, which makes in place safe. Every claimer reads and publishes what it claimed before
// it waits on anything, so a part claimed by another is published soon; if it is not within p.spin more polls (a
// thread of llvmpipe descheduled, say), the workgroup marks its parts deferred and writes nothing:
// split_deferred.wgsl, the next dispatch, writes them from the board. The same loops in the same order wherever a
// part is computed, so the result does not depend on who computed it or where it was written (the tests check
// that, bit for bit).
//
// Board words are read and written through atomics (relaxed: no ordering between words), so each word carries its
// own meaning. Word 0 hands out tickets: parts in the order the workgroups start, so that the parts of a row start
// together whatever order the hardware starts workgroups in. Part i of row r has the four words from
// 1 + 4 (r * p.parts + i): max and sum (0 EMPTY, else the value's bits + 2, NaNs made canonical first, so that no
// value encodes as 0; the sum stored second and polled first), the claims (the workgroup that adds 1 to 0 holds the
// part), deferred (1: split_deferred.wgsl writes the part). fused_ce.cpp zeroes the board before each dispatch.
//
// Variants (fused_ce.cpp fills them in; `wgtrain kernels` lists them):
// @variant WG {256|1024} threads a part
// @variant VEC4 {true|false} T = vec4<f32> where V and the offsets are multiples of 4 (then p.vocab counts vec4s)
// @variant CHUNKS {2|8} elements (of T) each thread holds: 8 on a GPU, 2 for tests that need many parts
// @variant IN_PLACE {true|false} dlogits over the logits (binding 1 read-write, no binding 7)

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
  spin: u32,        // polls of an unpublished part before reading it from memory (and as many again for a claimed one)
  defer: u32,       // for the tests: 1 defers every part, 2 those of odd tickets (0: only when a wait runs out)
  _pad0: u32,
  _pad1: u32,
  _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;

{{>fused_ce/elements}}

{{#IN_PLACE}}
@group(0) @binding(1) var<storage, read_write> logits: array<T>;
fn store_d(i: u32, v: T) { logits[i] = v; }
{{/IN_PLACE}}
{{^IN_PLACE}}
@group(0) @binding(1) var<storage, read> logits: array<T>;
@group(0) @binding(7) var<storage, read_write> dlogits: array<T>;
fn store_d(i: u32, v: T) { dlogits[i] = v; }
{{/IN_PLACE}}
@group(0) @binding(2) var<storage, read> labels: array<i32>;
@group(0) @binding(3) var<storage, read> stats: array<f32>;
@group(0) @binding(4) var<storage, read_write> row_loss: array<f32>;
@group(0) @binding(5) var<storage, read_write> index_error: array<atomic<u32>>;
@group(0) @binding(6) var<storage, read_write> board: array<atomic<u32>>;

var<workgroup> wg_word: u32;  // the ticket, then the claim of this workgroup's own part
var<workgroup> part_m: array<f32, MAX_PARTS>;
var<workgroup> part_s: array<f32, MAX_PARTS>;
var<workgroup> held: array<u32, MAX_PARTS>;  // other parts this workgroup claimed, in no particular order
var<workgroup> n_held: atomic<u32>;
var<workgroup> wg_n_held: u32;
var<workgroup> late: atomic<u32>;  // 1: a part claimed by another was not published in time
var<workgroup> wg_late: u32;

fn enc(v: f32) -> u32 {  // never EMPTY
  let b = bitcast<u32>(v);
  return select(b, 0x7fc00000u, (b & 0x7fffffffu) > 0x7f800000u) + 2u;
}
fn dec(w: u32) -> f32 { return bitcast<f32>(w - 2u); }

// Polls part i's statistics (first word of the part at w) up to p.spin + 1 times into part_m/part_s; false if they
// were not published by then.
fn poll(w: u32, i: u32) -> bool {
  for (var k = 0u; k <= p.spin; k = k + 1u) {
    let ws = atomicLoad(&board[w + 1u]);
    if (ws != EMPTY) {
      let wm = atomicLoad(&board[w]);
      if (wm != EMPTY) {
        part_m[i] = dec(wm);
        part_s[i] = dec(ws);
        return true;
      }
    }
  }
  return false;
}

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
    wg_word = atomicAdd(&board[0], 1u);
    atomicStore(&n_held, 0u);
    atomicStore(&late, 0u);
  }
  let ticket = workgroupUniformLoad(&wg_word);
  let row = ticket / p.parts;
  let part = ticket % p.parts;
  let base = p.logits_off + row * p.vocab;
  let out_base = p.out_off + row * p.vocab;
  let lo = part * SPAN;
  let label = labels[p.labels_off + row];
  let bad_label = label >= i32(p.vocab * LANES);
  if (label < 0 || bad_label) {
    // Ignored (or refused) row: no loss, zero gradient; every part knows it from the label, so none publishes or
    // claims, and no other workgroup reads this part.
    if (part == 0u && t == 0u) {
      if (bad_label) { atomicOr(&index_error[0], p.index_bit); }
      row_loss[row] = 0.0;
    }
    for (var j = lo + t; j < min(lo + SPAN, p.vocab); j = j + WG) {
      store_d(out_base + j, T());
    }
    return;
  }
  let slot = 1u + 4u * row * p.parts;  // part i's words from slot + 4 i
  workgroupBarrier();  // every thread has the ticket before wg_word is reused
  if (t == 0u) {
    wg_word = atomicAdd(&board[slot + 4u * part + 2u], 1u);
  }
  if (workgroupUniformLoad(&wg_word) != 0u) {
    return;  // another workgroup found this part unpublished and claimed it: it does all of this part's work
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

  // Publish this part and gather the others: thread i looks after part i. A part not published in time is claimed
  // here if no one has claimed it yet (then read below), else waited for again after that.
  var waiting = false;
  if (t == part) {
    part_m[t] = dec(enc(own.x));  // as the board has it (NaNs canonical), for split_deferred.wgsl's bits
    part_s[t] = dec(enc(own.y));
    atomicStore(&board[slot + 4u * t], enc(own.x));
    atomicStore(&board[slot + 4u * t + 1u], enc(own.y));
  } else if (t < p.parts && !poll(slot + 4u * t, t)) {
    if (atomicAdd(&board[slot + 4u * t + 2u], 1u) == 0u) {
      held[atomicAdd(&n_held, 1u)] = t;
    } else {
      waiting = true;
    }
  }
  workgroupBarrier();
  if (t == 0u) {
    wg_n_held = atomicLoad(&n_held);
  }
  // The parts claimed here, read from memory and published for the row's other parts.
  let n = workgroupUniformLoad(&wg_n_held);
  for (var k = 0u; k < n; k = k + 1u) {
    let i = held[k];
    let ts = thread_stats_read(base, i, t);
    let ps = row_stats(t, ts.x, ts.y);
    if (t == 0u) {
      part_m[i] = dec(enc(ps.x));
      part_s[i] = dec(enc(ps.y));
      atomicStore(&board[slot + 4u * i], enc(ps.x));
      atomicStore(&board[slot + 4u * i + 1u], enc(ps.y));
    }
  }
  // Everything claimed here is published, so no other workgroup waits on this one from now on.
  if (waiting && !poll(slot + 4u * t, t)) {
    atomicStore(&late, 1u);
  }
  let lab = u32(label);
  let label_part = (lab / LANES) / SPAN;
  var x_label = 0.0;  // read before any dlogit is written over it
  var has_label = label_part == part;
  for (var k = 0u; k < n; k = k + 1u) {
    has_label = has_label || held[k] == label_part;
  }
  if (has_label) { x_label = lane(logits[base + lab / LANES], lab % LANES); }
  workgroupBarrier();
  if (t == 0u) {
    let forced = p.defer == 1u || (p.defer == 2u && ticket % 2u == 1u);
    wg_late = select(atomicLoad(&late), 1u, forced);
  }
  if (workgroupUniformLoad(&wg_late) != 0u) {
    // Deferred: split_deferred.wgsl writes this part and those claimed here. Their elements are untouched.
    if (t == 0u) {
      atomicStore(&board[slot + 4u * part + 3u], 1u);
    }
    if (t < n) {
      atomicStore(&board[slot + 4u * held[t] + 3u], 1u);
    }
    return;
  }

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

  // Pass 2: dlogits, this part's from registers, the claimed parts' read again (by the thread that writes them).
  for (var c = 0u; c < CHUNKS; c = c + 1u) {
    let j = lo + t + c * WG;
    if (j < p.vocab) { store_d(out_base + j, d_of(xs[c], j, row_max, scale, lab, inv_n)); }
  }
  for (var k = 0u; k < n; k = k + 1u) {
    let i = held[k];
    for (var c = 0u; c < CHUNKS; c = c + 1u) {
      let j = i * SPAN + t + c * WG;
      if (j < p.vocab) { store_d(out_base + j, d_of(logits[base + j], j, row_max, scale, lab, inv_n)); }
    }
  }
  if (has_label && t == 0u) {
    row_loss[row] = log(row_sum) + row_max - x_label;
  }
}

// fused_ce, step 2 for long rows (the GLSL twin of split.wgsl, which says how it works, why no wait is unbounded and
// why in place is safe): each row cut into p.parts parts of SPAN = CHUNKS * WG_SIZE elements (of T), one workgroup a
// part holding it in registers, so that every logit is read once. The board: word 0 tickets; part i of row r the
// four words from 1 + 4 (r * parts + i): max, sum (0 EMPTY, else bits + 2), claims, deferred. Only the workgroup
// that claims a part first touches its elements; a part claimed by another and not published within p.spin polls
// makes this workgroup defer its parts to split_deferred.comp.
// Parameters, bindings and grid are split.wgsl's (the board the sixth binding, dlogits the seventh when not in
// place), so that fused_ce.cpp drives both. Variants (split.variants): WG_SIZE, VEC (4: vec4 rows), CHUNKS (2, 8),
// IN_PLACE.
#version 450
#extension GL_GOOGLE_include_directive : require

#ifndef WG_SIZE
#define WG_SIZE 256
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef CHUNKS
#define CHUNKS 8
#endif
#ifndef IN_PLACE
#define IN_PLACE 0
#endif
#define WG uint(WG_SIZE)
#define SPAN (uint(CHUNKS) * WG)
#define MAX_PARTS 64
#define EMPTY 0u
layout(local_size_x = WG_SIZE) in;

#include "fused_ce/elements.glsl"

layout(push_constant) uniform Params {
  uint rows;
  uint vocab;       // per row, in T units
  uint logits_off;  // in T units
  uint labels_off;
  uint out_off;     // in T units
  uint index_bit;   // bit to set in index_error for a label >= vocab
  uint parts;       // workgroups a row
  uint spin;        // polls of an unpublished part before reading it from memory
  uint defer;       // for the tests: 1 defers every part, 2 those of odd tickets
  uint pad0, pad1, pad2;
} p;  // 48 bytes: SplitParams in fused_ce.cpp

#if IN_PLACE
layout(std430, binding = 0) buffer Logits { T logits[]; };
#else
layout(std430, binding = 0) readonly buffer Logits { T logits[]; };
layout(std430, binding = 6) writeonly buffer DLogits { T dlogits[]; };
#endif
layout(std430, binding = 1) readonly buffer Labels { int labels[]; };
layout(std430, binding = 2) readonly buffer Stats { float stats[]; };
layout(std430, binding = 3) buffer RowLoss { float row_loss[]; };
layout(std430, binding = 4) buffer IndexError { uint index_error[]; };
layout(std430, binding = 5) coherent buffer Board { uint board[]; };

#include "common/reduce.glsl"

#if IN_PLACE
void store_d(uint i, T v) { logits[i] = v; }
#else
void store_d(uint i, T v) { dlogits[i] = v; }
#endif

shared uint wg_word;  // the ticket, then the claim of this workgroup's own part
shared float part_m[MAX_PARTS];
shared float part_s[MAX_PARTS];
shared uint held[MAX_PARTS];  // other parts this workgroup claimed, in no particular order
shared uint n_held;
shared uint late;  // 1: a part claimed by another was not published in time

uint enc(float v) {  // never EMPTY
  const uint b = floatBitsToUint(v);
  return ((b & 0x7fffffffu) > 0x7f800000u ? 0x7fc00000u : b) + 2u;
}
float dec(uint w) { return uintBitsToFloat(w - 2u); }
uint load_word(uint i) { return atomicOr(board[i], 0u); }

// Polls part i's statistics (first word of the part at w) up to p.spin + 1 times into part_m/part_s.
bool poll(uint w, uint i) {
  for (uint k = 0u; k <= p.spin; ++k) {
    const uint ws = load_word(w + 1u);
    if (ws != EMPTY) {
      const uint wm = load_word(w);
      if (wm != EMPTY) {
        part_m[i] = dec(wm);
        part_s[i] = dec(ws);
        return true;
      }
    }
  }
  return false;
}

T elem(uint base, uint j) { return j < p.vocab ? logits[base + j] : T(LOWEST); }

// This thread's statistics over its elements of part i, read from memory: the held path's loops, so the same bits.
vec2 thread_stats_read(uint base, uint i, uint t) {
  float m = LOWEST;
  for (uint c = 0u; c < uint(CHUNKS); ++c) m = max(m, hmax(elem(base, i * SPAN + t + c * WG)));
  float s = 0.0;
  for (uint c = 0u; c < uint(CHUNKS); ++c) {
    const uint j = i * SPAN + t + c * WG;
    if (j < p.vocab) s += hsum(exp(logits[base + j] - m));
  }
  return vec2(m, s);
}

void main() {
  if (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x >= p.rows * p.parts) return;  // grid padding
  const uint t = gl_LocalInvocationID.x;
  if (t == 0u) {
    wg_word = atomicAdd(board[0], 1u);
    n_held = 0u;
    late = 0u;
  }
  barrier();
  const uint ticket = wg_word;
  const uint row = ticket / p.parts, part = ticket % p.parts;
  const uint base = p.logits_off + row * p.vocab, out_base = p.out_off + row * p.vocab;
  const uint lo = part * SPAN;
  const int label = labels[p.labels_off + row];
  const bool bad = label >= int(p.vocab * VEC);
  if (label < 0 || bad) {  // ignored or refused row: every part knows from the label, none claims or publishes
    if (part == 0u && t == 0u) {
      if (bad) atomicOr(index_error[0], p.index_bit);
      row_loss[row] = 0.0;
    }
    for (uint j = lo + t; j < min(lo + SPAN, p.vocab); j += WG) store_d(out_base + j, T(0.0));
    return;
  }
  const uint slot = 1u + 4u * row * p.parts;  // part i's words from slot + 4 i
  barrier();  // every thread has the ticket before wg_word is reused
  if (t == 0u) wg_word = atomicAdd(board[slot + 4u * part + 2u], 1u);
  barrier();
  if (wg_word != 0u) return;  // claimed by a workgroup that found it unpublished: it does this part's work

  T xs[CHUNKS];
  float m = LOWEST;
  for (uint c = 0u; c < uint(CHUNKS); ++c) {
    xs[c] = elem(base, lo + t + c * WG);
    m = max(m, hmax(xs[c]));
  }
  float s = 0.0;
  for (uint c = 0u; c < uint(CHUNKS); ++c)
    if (lo + t + c * WG < p.vocab) s += hsum(exp(xs[c] - m));
  const vec2 own = row_stats(t, m, s);

  // Publish this part and gather the others (thread i: part i); one not published in time claimed here if free.
  bool waiting = false;
  if (t == part) {
    part_m[t] = dec(enc(own.x));  // as the board has it, for split_deferred's bits
    part_s[t] = dec(enc(own.y));
    atomicExchange(board[slot + 4u * t], enc(own.x));
    atomicExchange(board[slot + 4u * t + 1u], enc(own.y));
  } else if (t < p.parts && !poll(slot + 4u * t, t)) {
    if (atomicAdd(board[slot + 4u * t + 2u], 1u) == 0u) {
      held[atomicAdd(n_held, 1u)] = t;
    } else {
      waiting = true;
    }
  }
  barrier();
  const uint n = n_held;
  for (uint k = 0u; k < n; ++k) {  // the parts claimed here, read and published
    const uint i = held[k];
    const vec2 ts = thread_stats_read(base, i, t);
    const vec2 ps = row_stats(t, ts.x, ts.y);
    if (t == 0u) {
      part_m[i] = dec(enc(ps.x));
      part_s[i] = dec(enc(ps.y));
      atomicExchange(board[slot + 4u * i], enc(ps.x));
      atomicExchange(board[slot + 4u * i + 1u], enc(ps.y));
    }
  }
  // Everything claimed here is published: no other workgroup waits on this one from now on.
  if (waiting && !poll(slot + 4u * t, t)) atomicExchange(late, 1u);
  const uint lab = uint(label);
  const uint label_part = (lab / uint(VEC)) / SPAN;
  bool has_label = label_part == part;
  for (uint k = 0u; k < n; ++k) has_label = has_label || held[k] == label_part;
  float x_label = 0.0;  // read before any dlogit is written over it
#if VEC == 4
  if (has_label) x_label = logits[base + lab / 4u][lab % 4u];
#else
  if (has_label) x_label = logits[base + lab];
#endif
  barrier();
  const bool forced = p.defer == 1u || (p.defer == 2u && ticket % 2u == 1u);
  if (late != 0u || forced) {  // deferred to split_deferred.comp; the elements untouched
    if (t == 0u) atomicExchange(board[slot + 4u * part + 3u], 1u);
    if (t < n) atomicExchange(board[slot + 4u * held[t] + 3u], 1u);
    return;
  }

  float row_max = part_m[0], row_sum = part_s[0];
  for (uint i = 1u; i < p.parts; ++i) {
    const vec2 r = merge_stats(row_max, row_sum, part_m[i], part_s[i]);
    row_max = r.x;
    row_sum = r.y;
  }
  const float inv_n = stats[0] > 0.0 ? 1.0 / stats[0] : 0.0;  // n_valid 0: nothing counts
  const float scale = inv_n / row_sum;
  for (uint c = 0u; c < uint(CHUNKS); ++c) {
    const uint j = lo + t + c * WG;
    if (j < p.vocab) store_d(out_base + j, d_of(xs[c], j, row_max, scale, lab, inv_n));
  }
  for (uint k = 0u; k < n; ++k) {  // the claimed parts read again, each element by the thread that writes it
    const uint i = held[k];
    for (uint c = 0u; c < uint(CHUNKS); ++c) {
      const uint j = i * SPAN + t + c * WG;
      if (j < p.vocab) store_d(out_base + j, d_of(logits[base + j], j, row_max, scale, lab, inv_n));
    }
  }
  if (has_label && t == 0u) row_loss[row] = log(row_sum) + row_max - x_label;
}

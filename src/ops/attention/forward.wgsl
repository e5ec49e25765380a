// Fused causal attention, forward (flash-attention style): for one (batch, head) and a block of WG queries, one
// query per invocation, the keys and values stream through workgroup memory in tiles of BK rows shared by the
// whole block; each invocation keeps its query row and its output row in registers and folds each tile into a
// running (max m, sum l, output o) (the online softmax), so the [T, L] scores never exist in memory. Writes
// out [B, T, H, hd] (dense: the [B, T, H * hd] the output projection reads) and lse [B, H, T] = m + log(l), which
// the backward uses to recompute the probabilities. Key tiles past the block's last query are never loaded.
//
// @variant HD4 {*} vec4s per head row: ceil(head_dim / 4), 1 to 64
// @variant BK {4|8|16|32} keys per workgroup-memory tile (attention.cpp: the most that fit the device's limit)
// @variant VEC4 {true|false} q, k, v and out as vec4 arrays (head_dim and every row start multiples of 4)

const WG: u32 = 64u;
const HD4: u32 = {{HD4}}u;
const BK: u32 = {{BK}}u;

{{>attention/params}}

@group(0) @binding(1) var<storage, read> qbuf: array<E>;
@group(0) @binding(2) var<storage, read> kbuf: array<E>;
@group(0) @binding(3) var<storage, read> vbuf: array<E>;
@group(0) @binding(4) var<storage, read_write> out: array<E>;
@group(0) @binding(5) var<storage, read_write> lse: array<f32>;

fn store_out(e: u32, c: u32, x: vec4<f32>) {
{{#VEC4}}
  out[e / 4u + c] = x;
{{/VEC4}}
{{^VEC4}}
  for (var i = 0u; i < 4u; i = i + 1u) {
    if (4u * c + i < p.head_dim) { out[e + 4u * c + i] = x[i]; }
  }
{{/VEC4}}
}

var<workgroup> ks: array<vec4<f32>, BK * HD4>;
var<workgroup> vs: array<vec4<f32>, BK * HD4>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u,
        @builtin(num_workgroups) nwg: vec3u) {
  let wg = wid.x + wid.y * nwg.x;
  let bh = wg / p.blocks;
  if (bh >= p.batch * p.heads) {
    return;  // past the grid's last workgroup (uniform: the whole workgroup leaves)
  }
  // The latest query blocks see the most keys: they go first, so the short ones fill the tail.
  let block = p.blocks - 1u - wg % p.blocks;
  let b = bh / p.heads;
  let h = bh % p.heads;
  let g = h / (p.heads / p.kv_heads);
  let t0 = block * WG;
  let t = t0 + lid.x;
  let tq = min(t, p.time - 1u);  // rows past T compute a copy of the last and write nothing

  var q: array<vec4<f32>, HD4>;
  var o: array<vec4<f32>, HD4>;
  let qe = p.q_off + b * p.q_sb + tq * p.q_st + h * p.q_sh;
  for (var c = 0u; c < HD4; c = c + 1u) {
    q[c] = load_q(qe, c) * p.scale;
    o[c] = vec4<f32>(0.0);
  }
  var m = LOWEST;
  var l = 0.0;
  let last = p.offset + tq;                             // the last key this query sees
  let seen = p.offset + min(t0 + WG, p.time);           // keys any query of the block sees
  let kb = p.k_off + b * p.k_sb + g * p.k_sh;
  let vb = p.v_off + b * p.v_sb + g * p.v_sh;
  for (var k0 = 0u; k0 < seen; k0 = k0 + BK) {
    workgroupBarrier();  // the previous tile is no longer read
    for (var i = lid.x; i < BK * HD4; i = i + WG) {
      let key = k0 + i / HD4;
      var kx = vec4<f32>(0.0);
      var vx = vec4<f32>(0.0);
      if (key < p.keys) {
        kx = load_k(kb + key * p.k_st, i % HD4);
        vx = load_v(vb + key * p.v_st, i % HD4);
      }
      ks[i] = kx;
      vs[i] = vx;
    }
    workgroupBarrier();
    var s: array<f32, BK>;
    var tile_max = LOWEST;
    for (var j = 0u; j < BK; j = j + 1u) {
      var acc = vec4<f32>(0.0);
      for (var c = 0u; c < HD4; c = c + 1u) {
        acc = fma(q[c], ks[j * HD4 + c], acc);
      }
      // A masked key scores LOWEST: exp(LOWEST - m) is 0 once any key counted (key 0 always does).
      s[j] = select(LOWEST, hsum(acc), k0 + j <= last);
      tile_max = max(tile_max, s[j]);
    }
    let m_new = max(m, tile_max);
    let alpha = exp(m - m_new);
    l = l * alpha;
    for (var c = 0u; c < HD4; c = c + 1u) {
      o[c] = o[c] * alpha;
    }
    for (var j = 0u; j < BK; j = j + 1u) {
      let pj = exp(s[j] - m_new);
      l = l + pj;
      for (var c = 0u; c < HD4; c = c + 1u) {
        o[c] = fma(vec4<f32>(pj), vs[j * HD4 + c], o[c]);
      }
    }
    m = m_new;
  }
  if (t < p.time) {
    let inv = 1.0 / l;
    let oe = ((b * p.time + t) * p.heads + h) * p.head_dim;
    for (var c = 0u; c < HD4; c = c + 1u) {
      store_out(oe, c, o[c] * inv);
    }
    lse[(b * p.heads + h) * p.time + t] = m + log(l);
  }
}

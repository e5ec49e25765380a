// Fused causal attention, forward, tiled (flash-attention 2): a workgroup takes BM queries of one (batch, head);
// the queries (scaled) sit in workgroup memory, the keys and values stream through it in tiles of BN rows. The
// invocations form TY = BM / 4 row groups of TX = WG / TY: invocation (ty, tx) owns queries 4 ty .. 4 ty + 3 and,
// of each tile, the BN / TX keys tx + TX j (scores in registers), and of the output the vec4 columns tx + TX i.
// Per tile: scores, each row's max across the TX invocations (partial maxima through workgroup memory), the
// probabilities exp(s - m) into workgroup memory (the output columns need every key of a row), then the running
// output and sum rescaled and the tile's P V and row sums added (each invocation reads whole rows of P there). Every invocation of a row group keeps the
// same running (m, l), so no one owns them. Writes out [B, T, H, hd] (dense) and lse [B, H, T] = m + log(l), as
// forward.wgsl (the row kernel, used where no tiled variant fits). Key tiles past the block's last query are never
// loaded. attention.cpp's kForwardTiles lists the (WG, BM, BN) it tries, in order.
//
// @variant WG {256|128|64|32} invocations per workgroup
// @variant BM {64|32|16} queries per workgroup (4 per invocation)
// @variant BN {64|32|16|8} keys per workgroup-memory tile (a multiple of TX = WG / (BM / 4))
// @variant HD4 {*} vec4s per head row: ceil(head_dim / 4), 1 to 32
// @variant VEC4 {true|false} q, k, v and out as vec4 arrays (head_dim and every row start multiples of 4)

const WG: u32 = {{WG}}u;
const BM: u32 = {{BM}}u;
const BN: u32 = {{BN}}u;
const HD4: u32 = {{HD4}}u;
const TY: u32 = BM / 4u;
const TX: u32 = WG / TY;
const SN: u32 = BN / TX;                 // keys of a tile per invocation
const OC: u32 = (HD4 + TX - 1u) / TX;    // output vec4 columns per invocation
const KS: u32 = HD4 + 1u;                // row stride of the key/value tiles: one vec4 of padding spreads the banks

{{>attention/params}}

// An invocation's output column c, clamped into the row where TX does not divide HD4: columns past the row read
// its last vec4 and are never stored.
fn col(c: u32) -> u32 {
  return select(c, min(c, HD4 - 1u), HD4 % TX != 0u);
}

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

var<workgroup> qs: array<vec4<f32>, BM * HD4>;
var<workgroup> ks: array<vec4<f32>, BN * KS>;
var<workgroup> vs: array<vec4<f32>, BN * KS>;
var<workgroup> ps: array<vec4<f32>, BM * BN / 4u>;  // read as vec4s: a quarter of the loads
var<workgroup> red_max: array<f32, BM * TX>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u,
        @builtin(num_workgroups) nwg: vec3u) {
  let wg = wid.x + wid.y * nwg.x;
  let bh = wg / p.blocks;
  if (bh >= p.batch * p.heads) {
    return;  // past the grid's last workgroup (uniform: the whole workgroup leaves)
  }
  let block = p.blocks - 1u - wg % p.blocks;  // the latest queries (the most keys) first
  let b = bh / p.heads;
  let h = bh % p.heads;
  let g = h / (p.heads / p.kv_heads);
  let t0 = block * BM;
  let tid = lid.x;
  let ty = tid / TX;
  let tx = tid % TX;

  let qb = p.q_off + b * p.q_sb + h * p.q_sh;
  for (var i = tid; i < BM * HD4; i = i + WG) {
    let t = min(t0 + i / HD4, p.time - 1u);  // rows past T copy the last and write nothing
    qs[i] = load_q(qb + t * p.q_st, i % HD4) * p.scale;
  }
  var m: array<f32, 4>;
  var l: array<f32, 4>;
  var last: array<u32, 4>;  // the last key each row sees
  var o: array<vec4<f32>, 4 * OC>;
  for (var r = 0u; r < 4u; r = r + 1u) {
    m[r] = LOWEST;
    l[r] = 0.0;
    last[r] = p.offset + min(t0 + 4u * ty + r, p.time - 1u);
    for (var i = 0u; i < OC; i = i + 1u) {
      o[r * OC + i] = vec4<f32>(0.0);
    }
  }
  let seen = p.offset + min(t0 + BM, p.time);
  let kb = p.k_off + b * p.k_sb + g * p.k_sh;
  let vb = p.v_off + b * p.v_sb + g * p.v_sh;
  for (var k0 = 0u; k0 < seen; k0 = k0 + BN) {
    workgroupBarrier();  // the previous tile, its probabilities and partial sums are no longer read
    for (var i = tid; i < BN * HD4; i = i + WG) {
      let row = i / HD4;
      let c = i % HD4;
      let key = k0 + row;
      var kx = vec4<f32>(0.0);
      var vx = vec4<f32>(0.0);
      if (key < p.keys) {
        kx = load_k(kb + key * p.k_st, c);
        vx = load_v(vb + key * p.v_st, c);
      }
      ks[row * KS + c] = kx;
      vs[row * KS + c] = vx;
    }
    workgroupBarrier();
    var acc: array<vec4<f32>, 4 * SN>;
    for (var x = 0u; x < 4u * SN; x = x + 1u) {
      acc[x] = vec4<f32>(0.0);
    }
    for (var c = 0u; c < HD4; c = c + 1u) {
      var qv: array<vec4<f32>, 4>;
      for (var r = 0u; r < 4u; r = r + 1u) {
        qv[r] = qs[(4u * ty + r) * HD4 + c];
      }
      for (var j = 0u; j < SN; j = j + 1u) {
        let kv = ks[(tx + TX * j) * KS + c];
        for (var r = 0u; r < 4u; r = r + 1u) {
          acc[r * SN + j] = fma(qv[r], kv, acc[r * SN + j]);
        }
      }
    }
    var s: array<f32, 4 * SN>;
    for (var r = 0u; r < 4u; r = r + 1u) {
      var mx = LOWEST;
      for (var j = 0u; j < SN; j = j + 1u) {
        let v = select(LOWEST, hsum(acc[r * SN + j]), k0 + tx + TX * j <= last[r]);
        s[r * SN + j] = v;
        mx = max(mx, v);
      }
      red_max[(4u * ty + r) * TX + tx] = mx;
    }
    workgroupBarrier();
    var alpha: array<f32, 4>;
    for (var r = 0u; r < 4u; r = r + 1u) {
      var mx = m[r];
      for (var x = 0u; x < TX; x = x + 1u) {
        mx = max(mx, red_max[(4u * ty + r) * TX + x]);
      }
      alpha[r] = exp(m[r] - mx);  // key 0 is in the first tile and every row sees it: mx is finite from there on
      m[r] = mx;
      for (var j = 0u; j < SN; j = j + 1u) {
        let key = tx + TX * j;
        ps[(4u * ty + r) * (BN / 4u) + key / 4u][key % 4u] = select(0.0, exp(s[r * SN + j] - mx), k0 + key <= last[r]);
      }
    }
    workgroupBarrier();
    for (var r = 0u; r < 4u; r = r + 1u) {
      l[r] = l[r] * alpha[r];
      for (var i = 0u; i < OC; i = i + 1u) {
        o[r * OC + i] = o[r * OC + i] * alpha[r];
      }
    }
    // Each invocation of a row group reads the whole rows of P: it sums them too (the same order in each).
    for (var k4 = 0u; k4 < BN / 4u; k4 = k4 + 1u) {
      var pk: array<vec4<f32>, 4>;
      for (var r = 0u; r < 4u; r = r + 1u) {
        pk[r] = ps[(4u * ty + r) * (BN / 4u) + k4];
        l[r] = l[r] + hsum(pk[r]);
      }
      for (var kk = 0u; kk < 4u; kk = kk + 1u) {
        for (var i = 0u; i < OC; i = i + 1u) {
          let vv = vs[(4u * k4 + kk) * KS + col(tx + TX * i)];
          for (var r = 0u; r < 4u; r = r + 1u) {
            o[r * OC + i] = fma(vec4<f32>(pk[r][kk]), vv, o[r * OC + i]);
          }
        }
      }
    }
  }
  for (var r = 0u; r < 4u; r = r + 1u) {
    let t = t0 + 4u * ty + r;
    if (t < p.time) {
      let inv = 1.0 / l[r];
      let oe = ((b * p.time + t) * p.heads + h) * p.head_dim;
      for (var i = 0u; i < OC; i = i + 1u) {
        let c = tx + TX * i;
        if (c < HD4) {
          store_out(oe, c, o[r * OC + i] * inv);
        }
      }
      if (tx == 0u) {
        lse[(b * p.heads + h) * p.time + t] = m[r] + log(l[r]);
      }
    }
  }
}

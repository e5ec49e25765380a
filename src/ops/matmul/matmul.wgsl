// Batched, tiled f32 matmul over strided operands: C[b] = A[b] B[b] (+ bias), C contiguous [batch, M, N].
// One workgroup computes a 64x64 tile of C; each of its 16x16 threads owns a 4x4 sub-tile spaced 16 apart, so that
// neighbouring threads write neighbouring addresses. A and B tiles are staged in workgroup memory 16 deep in k.
// Strides make transposed views free: linear's W^T is B with (sk, sn) = (1, K). The a_kfast / b_nfast flags pick
// the tile-load order so that consecutive threads read consecutive addresses for either layout.

const BM: u32 = 64u;
const BN: u32 = 64u;
const BK: u32 = 16u;

struct Params {
  m: u32,
  n: u32,
  k: u32,
  batch0: u32,     // first batch index of this dispatch (batches beyond the grid limit take several)
  a_off: u32,
  a_sb: u32,
  a_sm: u32,
  a_sk: u32,
  b_off: u32,
  b_sb: u32,
  b_sk: u32,
  b_sn: u32,
  bias_off: u32,
  has_bias: u32,
  a_kfast: u32,    // 1 when A's k stride is 1 (row-major A)
  b_nfast: u32,    // 1 when B's n stride is 1 (row-major B)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> c: array<f32>;

var<workgroup> As: array<f32, 1024>;  // [BK][BM]
var<workgroup> Bs: array<f32, 1024>;  // [BK][BN]

@compute @workgroup_size(16, 16, 1)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let bat = wid.z + p.batch0;
  let m0 = wid.y * BM;
  let n0 = wid.x * BN;
  let tid = lid.y * 16u + lid.x;
  let a_base = p.a_off + bat * p.a_sb;
  let b_base = p.b_off + bat * p.b_sb;

  var acc: array<f32, 16>;
  for (var k0 = 0u; k0 < p.k; k0 = k0 + BK) {
    for (var l = 0u; l < 4u; l = l + 1u) {
      let e = tid + l * 256u;
      var am = e % BM;
      var ak = e / BM;
      if (p.a_kfast != 0u) {
        am = e / BK;
        ak = e % BK;
      }
      let gm = m0 + am;
      let gak = k0 + ak;
      var av = 0.0;
      if (gm < p.m && gak < p.k) {
        av = a[a_base + gm * p.a_sm + gak * p.a_sk];
      }
      As[ak * BM + am] = av;

      var bn = e / BK;
      var bk = e % BK;
      if (p.b_nfast != 0u) {
        bn = e % BN;
        bk = e / BN;
      }
      let gn = n0 + bn;
      let gbk = k0 + bk;
      var bv = 0.0;
      if (gn < p.n && gbk < p.k) {
        bv = b[b_base + gbk * p.b_sk + gn * p.b_sn];
      }
      Bs[bk * BN + bn] = bv;
    }
    workgroupBarrier();
    for (var kk = 0u; kk < BK; kk = kk + 1u) {
      var ar: array<f32, 4>;
      var br: array<f32, 4>;
      for (var i = 0u; i < 4u; i = i + 1u) {
        ar[i] = As[kk * BM + lid.y + 16u * i];
        br[i] = Bs[kk * BN + lid.x + 16u * i];
      }
      for (var i = 0u; i < 4u; i = i + 1u) {
        for (var j = 0u; j < 4u; j = j + 1u) {
          acc[i * 4u + j] = fma(ar[i], br[j], acc[i * 4u + j]);
        }
      }
    }
    workgroupBarrier();
  }

  for (var i = 0u; i < 4u; i = i + 1u) {
    let gm = m0 + lid.y + 16u * i;
    if (gm >= p.m) {
      continue;
    }
    for (var j = 0u; j < 4u; j = j + 1u) {
      let gn = n0 + lid.x + 16u * j;
      if (gn >= p.n) {
        continue;
      }
      var v = acc[i * 4u + j];
      if (p.has_bias != 0u) {
        v = v + bias[p.bias_off + gn];
      }
      c[(bat * p.m + gm) * p.n + gn] = v;
    }
  }
}

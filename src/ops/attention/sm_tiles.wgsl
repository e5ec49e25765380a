// Shared by the subgroup-matrix attention kernels (included as attention/sm_tiles): their tile geometry and the f16
// staging of rows. A workgroup is 4 subgroups of 32 lanes owning 16 of its BM = 64 own rows each (queries, or keys
// in dK/dV); tiles of BN rows of the other side stream through two f16 workgroup tiles, xs and ys ([row][d], BN *
// KS halves each, declared by the includer, as are HD and BN). A subgroup's results pass through its 16 rows of the
// f32 scratch (SS floats a row) where the lanes, two a row (lane / 2, half lane % 2), take them elementwise.

const HD4: u32 = HD / 4u;
const HF: u32 = HD / 16u;            // 16-wide fragments across a head row
const BM: u32 = 64u;                 // own rows a workgroup, 16 a subgroup
const KF: u32 = BN / 16u;            // 16-row fragments of a tile
const KS: u32 = HD + 8u;             // halves a staged row (8 of padding against bank conflicts)
const PS: u32 = BN + 8u;             // halves a row of P or dS
// Head-row columns per pass through the scratch: the whole row up to hd 64, else the largest of 64, 48, 16
// dividing it.
const OC: u32 = select(select(select(16u, 48u, HD % 48u == 0u), 64u, HD % 64u == 0u), HD, HD <= 64u);
const SS: u32 = max(BN, OC) + 4u;    // floats a scratch row
const NL: u32 = BN * HD4 / 128u;     // the vec4s of a tile a lane loads (BN HD / 4 is a multiple of 128)
const HB: u32 = BN / 2u;             // the elements of a scratch row's tile part a lane takes
const HO: u32 = OC / 2u;             // the head-row columns of a pass a lane takes

// Four elements of a staged row, as f16.
fn stage_x(s: u32, x: vec4<f32>) {
  let h = vec4<f16>(x);
  xs[s] = h.x;
  xs[s + 1u] = h.y;
  xs[s + 2u] = h.z;
  xs[s + 3u] = h.w;
}
fn stage_y(s: u32, x: vec4<f32>) {
  let h = vec4<f16>(x);
  ys[s] = h.x;
  ys[s + 1u] = h.y;
  ys[s + 2u] = h.z;
  ys[s + 3u] = h.w;
}

// The prefetch of the streamed tiles: each lane holds NL vec4s of the next tile in registers (f16) while the
// current one's products run, and stores them into xs and ys after the barrier that frees them. Without it the
// kernels wait on the loads between barriers (forward 0.41 ms against 0.27 at the step's shape on the H200).
// Lane li's vec4 n is element (li + 128 n) of the tile: row (li + 128 n) / HD4, vec4 column (li + 128 n) % HD4.
fn stage_regs(li: u32, x: ptr<function, array<vec4<f16>, NL>>, y: ptr<function, array<vec4<f16>, NL>>) {
  for (var n = 0u; n < NL; n = n + 1u) {
    let i = li + 128u * n;
    let s = (i / HD4) * KS + 4u * (i % HD4);
    let a = (*x)[n];
    let b = (*y)[n];
    xs[s] = a.x; xs[s + 1u] = a.y; xs[s + 2u] = a.z; xs[s + 3u] = a.w;
    ys[s] = b.x; ys[s + 1u] = b.y; ys[s + 2u] = b.z; ys[s + 3u] = b.w;
  }
}

// The forward's and dQ's prefetch: the BN keys and values from key k0 of the rows starting at elements kb and vb
// (attention/params's loads; keys past L as zeros).
fn fetch_kv(li: u32, k0: u32, kb: u32, vb: u32, kn: ptr<function, array<vec4<f16>, NL>>,
            vn: ptr<function, array<vec4<f16>, NL>>) {
  for (var n = 0u; n < NL; n = n + 1u) {
    let i = li + 128u * n;
    let key = k0 + i / HD4;
    var kx = vec4<f32>(0.0);
    var vx = vec4<f32>(0.0);
    if (key < p.keys) {
      kx = load_k(kb + key * p.k_st, i % HD4);
      vx = load_v(vb + key * p.v_st, i % HD4);
    }
    (*kn)[n] = vec4<f16>(kx);
    (*vn)[n] = vec4<f16>(vx);
  }
}

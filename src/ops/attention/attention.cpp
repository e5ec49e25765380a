// Fused causal attention: forward and backward (dQ and D, then dK and dV), by the tiled kernels (*_tiled.wgsl) in
// the first variant of the tables below that fits the device, else by the row kernels (forward.wgsl,
// backward_dq.wgsl, backward_dkv.wgsl for dV and for dK). Views of q, k, v and dO are read in place through their
// strides: the projections' [B, T, heads, hd] and the KV cache's [B, KV, capacity, hd] need no copy.
#include "wgtrain/attention.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>

#include "ops/attention/attention_variants.h"
#include "ops/common.h"
#include "ops/matmul/gemm.h"
#include "wgtrain/device.h"
#include "wgtrain/ops.h"

namespace wgtrain::ops {

using namespace detail;

namespace detail {

int attention_force = kTableChoice;
int attention_backward_parts = kBackwardAll;
int64_t attention_max_ds_bytes = int64_t{1} << 30;  // 168 MB at B 16, T 512, H 10
bool attention_sm_emulated = false;

namespace {

// The tiled variants each kernel tries, best first: (invocations, own rows, tile rows). The first entry that fits
// the device (invocations, workgroup storage at this head dim) runs; a head dim past 128 or no fitting entry runs
// the row kernels. The order is a guess to be settled by measurement on the H200 (bench --only attention times
// every entry): the first ones need 38 to 45 KiB of workgroup storage at hd 64 (NVIDIA's Vulkan offers 48 KiB);
// the second ones give each invocation twice the scores and output columns (fewer invocations, fewer loads per
// FMA); the last ones fit WebGPU's default 16 KiB at hd 64 with 32 invocations. The backward's entries past the
// first five (added after the H200's run m1, not yet measured) sum the scores as scalars (a quarter of their
// registers) and give 8 own rows to an invocation (half the tile loads per FMA): 128x32x32d is the first entry
// with scalar scores alone; 64x32x32r8d the same tiles with 8 rows an invocation; 32x32x32r8d (dq) and
// 32x32x16r8d twice the columns an invocation again (the last fits llvmpipe's 32 KiB at hd 64). dq lists 32x16x8
// twice so that entry i (forced together in the tests and the benchmark) is the same kind in both backward tables.
// The dK/dV entries marked `s` (the first and the four `d` entries again) write dS to a scratch buffer (up to
// attention_max_ds_bytes) for a dq that is one product instead of three: 5 products in the backward instead of 7.
constexpr AttentionTiling kForwardTiles[] = {{256, 64, 32}, {128, 64, 32}, {128, 32, 32}, {64, 16, 16}, {32, 16, 8}};
constexpr AttentionTiling kDqTiles[] = {{128, 32, 32},          {64, 32, 32},          {64, 16, 16},
                                        {32, 16, 8},            {32, 16, 8},           {128, 32, 32, 4, true},
                                        {64, 32, 32, 8, true},  {32, 32, 32, 8, true}, {32, 32, 16, 8, true}};
// First: D, then dK/dV writing dS, then dq from dS (5 products, not 7): 1.39 ms against 1.70 for the best pair
// without dS on the H200 (bench/runs/2026-12-04-h200-m3); where the scratch or the ninth storage buffer is not to
// be had, the next entries run.
constexpr AttentionTiling kDkvTiles[] = {{128, 32, 32, 4, true, true},
                                         {128, 32, 32},          {64, 32, 32},         {64, 32, 16},
                                         {64, 16, 16},           {32, 16, 8},          {128, 32, 32, 4, true},
                                         {64, 32, 32, 8, true},  {64, 32, 16, 8, true}, {32, 32, 16, 8, true},
                                         {128, 32, 32, 4, false, true},
                                         {64, 32, 32, 8, true, true},   {64, 32, 16, 8, true, true},
                                         {32, 32, 16, 8, true, true}};
constexpr int64_t kMaxTiledHd4 = 32;  // head dim 128
// backward_dq_ds.wgsl's fixed tiling (WG, BM, BN).
constexpr AttentionTiling kDqDsTiling = {128, 32, 32};


// Invocations per row of the own rows (t.r rows each): the tiling's TX, or 0 where it is malformed.
int64_t tiling_tx(const AttentionTiling& t) {
  if ((t.r != 4 && t.r != 8) || t.rows % t.r || t.wg % (t.rows / t.r)) return 0;
  const int64_t tx = t.wg / (t.rows / t.r);
  return t.tile % tx || t.tile % 4 ? 0 : tx;
}

bool fits(const wgtrain::detail::DeviceImpl& dev, AttentionKernel kernel, const AttentionTiling& t, int64_t hd4) {
  return hd4 <= kMaxTiledHd4 && tiling_tx(t) > 0 &&
         (kernel != AttentionKernel::Forward || (t.r == 4 && !t.dot)) &&
         (!t.ds || (kernel == AttentionKernel::BackwardDkv && dev.limits.max_storage_buffers_per_stage >= 9 &&
                    attention_dq_ds_storage(hd4) <= static_cast<int64_t>(dev.limits.max_workgroup_storage))) &&
         static_cast<uint32_t>(t.wg) <= dev.limits.max_invocations_per_workgroup &&
         static_cast<uint32_t>(t.wg) <= dev.limits.max_workgroup_size_x &&
         attention_tiled_storage(kernel, t, hd4) <= static_cast<int64_t>(dev.limits.max_workgroup_storage);
}

}  // namespace

int64_t attention_sm_tile(int64_t hd) { return hd <= 64 && !attention_sm_emulated ? 64 : 32; }

int64_t attention_sm_storage(AttentionKernel kernel, int64_t hd) {
  const int64_t bn = attention_sm_tile(hd), half = attention_sm_emulated ? 4 : 2;
  const int64_t oc = hd <= 64 ? hd : hd % 64 == 0 ? 64 : hd % 48 == 0 ? 48 : 16;
  // xs and ys, P (or dS), the f32 scratch (as sm_tiles.wgsl declares them), then each kernel's own.
  // (The emulation in attention_sm_test.cpp adds 2 KiB: its fragments' exchange buffer.)
  const int64_t shared = 2 * bn * (hd + 8) * half + 64 * (bn + 8) * half + 64 * (std::max(bn, oc) + 4) * 4 +
                         (attention_sm_emulated ? 2048 : 0);
  switch (kernel) {
    case AttentionKernel::Forward:
      return shared + 64 * 2 * 4;  // the halves' row maxima
    case AttentionKernel::BackwardDq:
      return shared;
    case AttentionKernel::BackwardDkv:
      break;
  }
  return shared + 2 * bn * 4;  // the tile's lse and D
}

std::string attention_sm_missing(const wgtrain::detail::DeviceImpl& dev, int64_t hd, bool vec4) {
  if (!attention_sm_emulated) {
    const std::string m = gemm_sm_missing(dev);
    if (!m.empty()) return "the device " + m;
  }
  if (hd % 16 || hd > 128) return "head dim " + std::to_string(hd) + " is not a multiple of 16 up to 128";
  if (!vec4) return "q, k, v or the output gradient is not a view of whole vec4s (hd and every row start multiples of 4)";
  for (AttentionKernel k : {AttentionKernel::Forward, AttentionKernel::BackwardDq, AttentionKernel::BackwardDkv})
    if (attention_sm_storage(k, hd) > static_cast<int64_t>(dev.limits.max_workgroup_storage))
      return "the tiles at head dim " + std::to_string(hd) + " need " + std::to_string(attention_sm_storage(k, hd)) +
             " bytes of workgroup storage, the device has " + std::to_string(dev.limits.max_workgroup_storage);
  return "";
}

std::string attention_tiling_name(const AttentionTiling& t) {
  return std::to_string(t.wg) + "x" + std::to_string(t.rows) + "x" + std::to_string(t.tile) +
         (t.r != 4 ? "r" + std::to_string(t.r) : "") + (t.dot ? "d" : "") + (t.ds ? "s" : "");
}

const AttentionTiling* attention_tilings(AttentionKernel kernel, int* count) {
  switch (kernel) {
    case AttentionKernel::Forward:
      *count = static_cast<int>(std::size(kForwardTiles));
      return kForwardTiles;
    case AttentionKernel::BackwardDq:
      *count = static_cast<int>(std::size(kDqTiles));
      return kDqTiles;
    case AttentionKernel::BackwardDkv:
      break;
  }
  *count = static_cast<int>(std::size(kDkvTiles));
  return kDkvTiles;
}

// The kernels' var<workgroup> declarations, in bytes.
int64_t attention_dq_ds_storage(int64_t hd4) {
  return kDqDsTiling.tile * (hd4 + 1) * 16 + kDqDsTiling.rows * (kDqDsTiling.tile + 1) * 4;
}

int64_t attention_tiled_storage(AttentionKernel kernel, const AttentionTiling& t, int64_t hd4) {
  const int64_t tx = std::max<int64_t>(tiling_tx(t), 1);
  const int64_t own = t.rows * hd4 * 16, streamed = 2 * t.tile * (hd4 + 1) * 16, scores = t.rows * t.tile * 4;
  switch (kernel) {
    case AttentionKernel::Forward:
      return own + streamed + scores + t.rows * tx * 4;
    case AttentionKernel::BackwardDq:
      return 2 * own + streamed + scores + t.rows * tx * 4;
    case AttentionKernel::BackwardDkv:
      break;
  }
  return 2 * own + streamed + 2 * scores + 2 * t.tile * 4;
}

const AttentionTiling* attention_choice(const wgtrain::detail::DeviceImpl& dev, AttentionKernel kernel, int64_t hd) {
  const int64_t hd4 = (hd + 3) / 4;
  int count = 0;
  const AttentionTiling* table = attention_tilings(kernel, &count);
  if (attention_force == kRowKernels || attention_force == kSubgroupMatrix) return nullptr;
  if (attention_force >= 0) {
    const AttentionTiling& t = table[std::min(attention_force, count - 1)];
    if (!fits(dev, kernel, t, hd4))
      throw UnsupportedError("attention: the forced tiled variant " + attention_tiling_name(t) +
                             " does not fit head dim " +
                             std::to_string(hd) + " on this device");
    return &t;
  }
  for (int i = 0; i < count; ++i)
    if (fits(dev, kernel, table[i], hd4)) return &table[i];
  return nullptr;
}

}  // namespace detail

namespace {

struct alignas(16) AttentionParams {
  uint32_t batch, time, keys, heads, kv_heads, head_dim, offset, blocks;
  uint32_t q[4], k[4], v[4], g[4];  // element offset, then strides of batch, time, head
  float scale;
  uint32_t pad[3];
};

constexpr int64_t kRows = 64;  // queries (keys in the dK/dV kernel) per workgroup: the kernels' WG
constexpr int64_t kMaxHeadDim = 256;

void fill_view(uint32_t dst[4], const Tensor& t) {
  dst[0] = u32(t.offset(), "offset");
  for (int d = 0; d < 3; ++d) dst[d + 1] = u32(t.strides()[d], "stride");
}

// The view itself where its head dim is dense (and no stride is negative), else a dense copy.
Tensor dense_rows(const Tensor& t) {
  for (int d = 0; d < 4; ++d)
    if (t.strides()[d] < 0) return contiguous(t);
  return t.size(3) == 1 || t.strides()[3] == 1 ? t : contiguous(t);
}

// Every row of the view starts at a multiple of 4 elements (a size-1 dim's stride never moves it).
bool vec4_view(const Tensor& t) {
  if (t.offset() % 4) return false;
  for (int d = 0; d < 3; ++d)
    if (t.size(d) > 1 && t.strides()[d] % 4) return false;
  return true;
}

// Rows of a workgroup-memory tile: the most of 32, 16, 8, 4 whose two tiles of hd4 vec4s per row (plus `extra`
// bytes a row) fit the device's workgroup storage. On a CPU rasteriser, 4 rows except at hd 32 and 64 (the
// presets', whose GPU variants the tests then run): llvmpipe's LLVM spent a minute and more on larger tiles at hd
// 48 (32 rows) and 128 (32 and 16 rows), and seconds at hd 32 and 64.
int64_t tile_rows(const DeviceImpl& dev, int64_t hd4, int64_t extra) {
  for (int64_t rows : {32, 16, 8, 4})
    if (rows * (2 * hd4 * 16 + extra) <= static_cast<int64_t>(dev.limits.max_workgroup_storage) &&
        (!dev.info.software || rows == 4 || hd4 == 8 || hd4 == 16))
      return rows;
  throw UnsupportedError("attention: a tile of 4 rows of head dim " + std::to_string(hd4 * 4) + " needs " +
                         std::to_string(4 * (2 * hd4 * 16 + extra)) + " bytes of workgroup storage, the device has " +
                         std::to_string(dev.limits.max_workgroup_storage));
}

struct Dims {
  int64_t B, T, L, H, KV, hd;
};

Dims check_qkv(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, double scale) {
  for (auto [t, name] : {std::pair<const Tensor*, const char*>{&q, "q"}, {&k, "k"}, {&v, "v"}}) {
    check_dtype(op, *t, name, {DType::F32});
    check_rank(op, *t, name, 4);
  }
  check_same_device(op, q, k);
  check_same_device(op, q, v);
  const Dims d{q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), q.size(3)};
  if (k.shape() != v.shape())
    throw ArgumentError(std::string(op) + ": k " + shape_str(k.shape()) + " and v " + shape_str(v.shape()) +
                        " must have one shape [B, L, KV, hd]");
  if (k.size(0) != d.B || k.size(3) != d.hd)
    throw ArgumentError(std::string(op) + ": q " + shape_str(q.shape()) + " is [B, T, H, hd], so k and v must be [" +
                        std::to_string(d.B) + ", L, KV, " + std::to_string(d.hd) + "], got " + shape_str(k.shape()));
  if (d.L < d.T)
    throw ArgumentError(std::string(op) + ": " + std::to_string(d.T) + " queries need at least as many keys, got " +
                        std::to_string(d.L) + " (the queries are the last T of L positions)");
  if (d.KV < 1 || d.H % d.KV)
    throw ArgumentError(std::string(op) + ": " + std::to_string(d.H) + " query heads must be a multiple of the " +
                        std::to_string(d.KV) + " key/value heads");
  if (d.hd < 1 || d.hd > kMaxHeadDim)
    throw ArgumentError(std::string(op) + ": head dim " + std::to_string(d.hd) + " is outside 1.." +
                        std::to_string(kMaxHeadDim));
  if (!std::isfinite(scale)) throw ArgumentError(std::string(op) + ": the scale must be finite");
  return d;
}

// Whether the subgroup-matrix kernels run (see attention_sm_missing); forced, an error where they cannot.
bool use_sm(const DeviceImpl& dev, int64_t hd, bool vec4) {
  if (attention_force != kSubgroupMatrix && attention_force != kTableChoice) return false;
  const std::string missing = attention_sm_missing(dev, hd, vec4);
  if (attention_force == kSubgroupMatrix && !missing.empty())
    throw UnsupportedError("attention: the subgroup-matrix kernels were forced, but " + missing);
  return missing.empty();
}

wgtrain::detail::KernelDefs sm_defs(int64_t hd) {
  return {{"BN", std::to_string(attention_sm_tile(hd))}, {"HD", std::to_string(hd)}, {"VEC4", "true"}};
}

AttentionParams params_of(const Dims& d, int64_t blocks, const Tensor& q, const Tensor& k, const Tensor& v,
                          double scale) {
  AttentionParams p{};
  p.batch = u32(d.B, "batch");
  p.time = u32(d.T, "queries");
  p.keys = u32(d.L, "keys");
  p.heads = u32(d.H, "heads");
  p.kv_heads = u32(d.KV, "kv heads");
  p.head_dim = u32(d.hd, "head dim");
  p.offset = u32(d.L - d.T, "offset");
  p.blocks = u32(blocks, "blocks");
  fill_view(p.q, q);
  fill_view(p.k, k);
  fill_view(p.v, v);
  p.scale = static_cast<float>(scale);
  u32(d.B * d.L * d.KV * d.hd, "key elements");
  u32(d.B * d.T * d.H * d.hd, "query elements");
  return p;
}

}  // namespace

Attention attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, double scale) {
  const char* op = "attention";
  const Dims d = check_qkv(op, q_in, k_in, v_in, scale);
  const Tensor q = dense_rows(q_in), k = dense_rows(k_in), v = dense_rows(v_in);
  DeviceImpl& dev = q.device_impl();
  Attention a;
  a.out = new_tensor(dev, {d.B, d.T, d.H * d.hd}, DType::F32);
  a.lse = new_tensor(dev, {d.B, d.H, d.T}, DType::F32);
  if (d.B == 0 || d.T == 0 || d.H == 0) return a;
  const bool vec4 = d.hd % 4 == 0 && vec4_view(q) && vec4_view(k) && vec4_view(v);
  const std::string vec4_s = vec4 ? "true" : "false";
  if (use_sm(dev, d.hd, vec4)) {
    const int64_t blocks = (d.T + kRows - 1) / kRows;
    AttentionParams p = params_of(d, blocks, q, k, v, scale);
    const auto [gx, gy] = dev.grid(static_cast<uint64_t>(d.B * d.H * blocks));
    dev.dispatch({op, &dev.pipeline("attention/forward_sm", sm_defs(d.hd)), &p, sizeof p,
                  {{q.storage()->buffer}, {k.storage()->buffer}, {v.storage()->buffer}, {a.out.storage()->buffer},
                   {a.lse.storage()->buffer}},
                  gx, gy, 1});
    return a;
  }
  const AttentionTiling* tiled = attention_choice(dev, AttentionKernel::Forward, d.hd);
  const int64_t hd4 = (d.hd + 3) / 4, rows = tiled ? tiled->rows : kRows, blocks = (d.T + rows - 1) / rows;
  AttentionParams p = params_of(d, blocks, q, k, v, scale);
  const auto& pipe = tiled ? dev.pipeline("attention/forward_tiled", {{"BM", std::to_string(tiled->rows)},
                                                                      {"BN", std::to_string(tiled->tile)},
                                                                      {"HD4", std::to_string(hd4)},
                                                                      {"VEC4", vec4_s},
                                                                      {"WG", std::to_string(tiled->wg)}})
                           : dev.pipeline("attention/forward", {{"BK", std::to_string(tile_rows(dev, hd4, 0))},
                                                                {"HD4", std::to_string(hd4)},
                                                                {"VEC4", vec4_s}});
  const auto [gx, gy] = dev.grid(static_cast<uint64_t>(d.B * d.H * blocks));
  dev.dispatch({op, &pipe, &p, sizeof p,
                {{q.storage()->buffer}, {k.storage()->buffer}, {v.storage()->buffer}, {a.out.storage()->buffer},
                 {a.lse.storage()->buffer}},
                gx, gy, 1});
  return a;
}

AttentionGrads attention_backward(const Tensor& dout, const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                  const Attention& forward, double scale) {
  const char* op = "attention_backward";
  const Dims d = check_qkv(op, q_in, k_in, v_in, scale);
  check_dtype(op, dout, "grad_output", {DType::F32});
  check_dtype(op, forward.out, "out", {DType::F32});
  check_dtype(op, forward.lse, "lse", {DType::F32});
  check_same_device(op, q_in, dout);
  check_same_device(op, q_in, forward.out);
  check_same_device(op, q_in, forward.lse);
  const Shape q_shape = {d.B, d.T, d.H, d.hd}, merged = {d.B, d.T, d.H * d.hd};
  for (auto [t, name] : {std::pair<const Tensor*, const char*>{&dout, "grad_output"}, {&forward.out, "out"}})
    if (t->shape() != q_shape && t->shape() != merged)
      throw ArgumentError(std::string(op) + ": '" + name + "' must be " + shape_str(merged) + " or " +
                          shape_str(q_shape) + ", got " + shape_str(t->shape()));
  if (forward.lse.shape() != Shape{d.B, d.H, d.T})
    throw ArgumentError(std::string(op) + ": 'lse' must be " + shape_str({d.B, d.H, d.T}) + ", got " +
                        shape_str(forward.lse.shape()));
  const Tensor q = dense_rows(q_in), k = dense_rows(k_in), v = dense_rows(v_in);
  // dO through its strides as [B, T, H, hd]; out and lse dense.
  const Tensor g = dense_rows(dout.rank() == 4 ? dout
                                               : (dout.is_contiguous() ? dout : contiguous(dout)).reshape(q_shape));
  const Tensor o = contiguous(forward.out), lse = contiguous(forward.lse);
  DeviceImpl& dev = q.device_impl();
  AttentionGrads r;
  r.dq = new_tensor(dev, q_shape, DType::F32);
  r.dk = new_tensor(dev, k_in.shape(), DType::F32);
  r.dv = new_tensor(dev, k_in.shape(), DType::F32);
  if (d.B == 0 || d.H == 0 || d.L == 0) return r;
  if (d.T == 0) {  // no query: nothing reaches k and v
    fill_(r.dk, 0.0);
    fill_(r.dv, 0.0);
    return r;
  }
  const int64_t hd4 = (d.hd + 3) / 4;
  const bool vec4 = d.hd % 4 == 0 && vec4_view(q) && vec4_view(k) && vec4_view(v) && vec4_view(g) &&
                    o.offset() % 4 == 0;
  const std::string hd4_s = std::to_string(hd4), vec4_s = vec4 ? "true" : "false";
  if (use_sm(dev, d.hd, vec4)) {
    // D and max |dO| (its bits in the last element, maxed atomically into a zero), then dq, then dK and dV.
    const Tensor delta = new_tensor(dev, {d.B * d.H * d.T + 1}, DType::F32);
    fill_(delta, 0.0);
    AttentionParams p = params_of(d, (d.T + kRows - 1) / kRows, q, k, v, scale);
    fill_view(p.g, g);
    const auto [dx, dy] = dev.grid(static_cast<uint64_t>((d.B * d.T * d.H + 63) / 64));
    dev.dispatch({"attention_backward (D)",
                  &dev.pipeline("attention/backward_delta", {{"AMAX", "true"}, {"HD4", hd4_s}, {"VEC4", "true"}}), &p,
                  sizeof p, {{g.storage()->buffer}, {o.storage()->buffer}, {delta.storage()->buffer}}, dx, dy, 1});
    const auto [qx, qy] = dev.grid(static_cast<uint64_t>(d.B * d.H * p.blocks));
    if (attention_backward_parts & kBackwardDq)
      dev.dispatch({"attention_backward (dq)", &dev.pipeline("attention/backward_dq_sm", sm_defs(d.hd)), &p, sizeof p,
                    {{q.storage()->buffer}, {k.storage()->buffer}, {v.storage()->buffer}, {g.storage()->buffer},
                     {lse.storage()->buffer}, {delta.storage()->buffer}, {r.dq.storage()->buffer}},
                    qx, qy, 1});
    p.blocks = u32((d.L + kRows - 1) / kRows, "blocks");
    const auto [kx, ky] = dev.grid(static_cast<uint64_t>(d.B * d.KV * p.blocks));
    if (attention_backward_parts & kBackwardDkv)
      dev.dispatch({"attention_backward (dk, dv)", &dev.pipeline("attention/backward_dkv_sm", sm_defs(d.hd)), &p,
                    sizeof p,
                    {{q.storage()->buffer}, {k.storage()->buffer}, {v.storage()->buffer}, {g.storage()->buffer},
                     {lse.storage()->buffer}, {delta.storage()->buffer}, {r.dk.storage()->buffer},
                     {r.dv.storage()->buffer}},
                    kx, ky, 1});
    return r;
  }
  const Tensor delta = new_tensor(dev, {d.B, d.H, d.T}, DType::F32);

  const AttentionTiling* dq_tiled = attention_choice(dev, AttentionKernel::BackwardDq, d.hd);
  const AttentionTiling* dkv_tiled = attention_choice(dev, AttentionKernel::BackwardDkv, d.hd);
  // The `s` entries' dS scratch, [B, H, L, T]: where it would be too large, the first entry without it.
  const int64_t ds_bytes = d.B * d.H * d.L * d.T * 4;
  const int64_t ds_limit = std::min({attention_max_ds_bytes, static_cast<int64_t>(dev.limits.max_storage_binding_size),
                                     static_cast<int64_t>(dev.limits.max_buffer_size)});
  if (dkv_tiled && dkv_tiled->ds && ds_bytes > ds_limit) {
    if (attention_force >= 0)
      throw UnsupportedError("attention: the forced variant " + attention_tiling_name(*dkv_tiled) + " writes dS, " +
                             std::to_string(ds_bytes) + " bytes here, past the " + std::to_string(ds_limit) +
                             " it may take");
    int n = 0;
    const AttentionTiling* table = attention_tilings(AttentionKernel::BackwardDkv, &n);
    dkv_tiled = nullptr;
    for (int i = 0; i < n && !dkv_tiled; ++i)
      if (!table[i].ds && fits(dev, AttentionKernel::BackwardDkv, table[i], hd4)) dkv_tiled = &table[i];
  }
  const bool ds = dkv_tiled && dkv_tiled->ds;
  const int64_t q_rows = ds ? kDqDsTiling.rows : dq_tiled ? dq_tiled->rows : kRows;
  const int64_t q_blocks = (d.T + q_rows - 1) / q_rows;
  AttentionParams p = params_of(d, q_blocks, q, k, v, scale);
  fill_view(p.g, g);
  const auto [qx, qy] = dev.grid(static_cast<uint64_t>(d.B * d.H * q_blocks));
  Tensor ds_scratch;
  if (ds) {  // D alone first (the dK/dV kernel reads it); dq after dK/dV, below
    ds_scratch = new_tensor(dev, {d.B, d.H, d.L, d.T}, DType::F32);
    const auto& pipe = dev.pipeline("attention/backward_delta", {{"AMAX", "false"}, {"HD4", hd4_s}, {"VEC4", vec4_s}});
    const auto [dx, dy] = dev.grid(static_cast<uint64_t>((d.B * d.T * d.H + 63) / 64));
    if (attention_backward_parts & kBackwardDq)
      dev.dispatch({"attention_backward (D)", &pipe, &p, sizeof p,
                    {{g.storage()->buffer}, {o.storage()->buffer}, {delta.storage()->buffer}}, dx, dy, 1});
  } else if (attention_backward_parts & kBackwardDq) {
    const auto& dq_pipe =
        dq_tiled ? dev.pipeline("attention/backward_dq_tiled", {{"BM", std::to_string(dq_tiled->rows)},
                                                                {"BN", std::to_string(dq_tiled->tile)},
                                                                {"DOT", dq_tiled->dot ? "true" : "false"},
                                                                {"HD4", hd4_s},
                                                                {"R", std::to_string(dq_tiled->r)},
                                                                {"VEC4", vec4_s},
                                                                {"WG", std::to_string(dq_tiled->wg)}})
                 : dev.pipeline("attention/backward_dq", {{"BK", std::to_string(tile_rows(dev, hd4, 0))},
                                                          {"HD4", hd4_s},
                                                          {"VEC4", vec4_s}});
    dev.dispatch({"attention_backward (dq)", &dq_pipe, &p, sizeof p,
                  {{q.storage()->buffer}, {k.storage()->buffer}, {v.storage()->buffer}, {g.storage()->buffer},
                   {o.storage()->buffer}, {lse.storage()->buffer}, {r.dq.storage()->buffer},
                   {delta.storage()->buffer}},
                  qx, qy, 1});
  }

  const int64_t k_rows = dkv_tiled ? dkv_tiled->rows : kRows, k_blocks = (d.L + k_rows - 1) / k_rows;
  p.blocks = u32(k_blocks, "blocks");
  const auto [kx, ky] = dev.grid(static_cast<uint64_t>(d.B * d.KV * k_blocks));
  if (dkv_tiled) {  // dK and dV in one pass
    if (attention_backward_parts & kBackwardDkv) {
      const auto& pipe = dev.pipeline("attention/backward_dkv_tiled", {{"BK", std::to_string(dkv_tiled->rows)},
                                                                       {"BQ", std::to_string(dkv_tiled->tile)},
                                                                       {"DOT", dkv_tiled->dot ? "true" : "false"},
                                                                       {"DS", ds ? "true" : "false"},
                                                                       {"HD4", hd4_s},
                                                                       {"R", std::to_string(dkv_tiled->r)},
                                                                       {"VEC4", vec4_s},
                                                                       {"WG", std::to_string(dkv_tiled->wg)}});
      std::vector<wgtrain::detail::Binding> buffers = {
          {q.storage()->buffer},     {k.storage()->buffer},   {v.storage()->buffer},
          {g.storage()->buffer},     {lse.storage()->buffer}, {delta.storage()->buffer},
          {r.dk.storage()->buffer},  {r.dv.storage()->buffer}};
      if (ds) buffers.push_back({ds_scratch.storage()->buffer});
      dev.dispatch({"attention_backward (dk, dv)", &pipe, &p, sizeof p, buffers, kx, ky, 1});
    }
    if (ds && (attention_backward_parts & kBackwardDq)) {  // dq = scale dS k
      p.blocks = u32(q_blocks, "blocks");
      const auto& pipe = dev.pipeline("attention/backward_dq_ds", {{"BM", std::to_string(kDqDsTiling.rows)},
                                                                   {"BN", std::to_string(kDqDsTiling.tile)},
                                                                   {"HD4", hd4_s},
                                                                   {"VEC4", vec4_s},
                                                                   {"WG", std::to_string(kDqDsTiling.wg)}});
      dev.dispatch({"attention_backward (dq from dS)", &pipe, &p, sizeof p,
                    {{k.storage()->buffer}, {ds_scratch.storage()->buffer}, {r.dq.storage()->buffer}}, qx, qy, 1});
    }
    return r;
  }
  if (!(attention_backward_parts & kBackwardDkv)) return r;
  const std::string bq = std::to_string(tile_rows(dev, hd4, 8));
  for (bool dk : {false, true}) {
    const auto& pipe = dev.pipeline("attention/backward_dkv",
                                    {{"BQ", bq}, {"DK", dk ? "true" : "false"}, {"HD4", hd4_s}, {"VEC4", vec4_s}});
    dev.dispatch({dk ? "attention_backward (dk)" : "attention_backward (dv)", &pipe, &p, sizeof p,
                  {{q.storage()->buffer}, {k.storage()->buffer}, {v.storage()->buffer}, {g.storage()->buffer},
                   {lse.storage()->buffer}, {delta.storage()->buffer},
                   {(dk ? r.dk : r.dv).storage()->buffer}},
                  kx, ky, 1});
  }
  return r;
}

namespace detail {

void register_attention_ops(Registry& r) {
  const std::string scale_help = "scores are scale * q.k (default 1 / sqrt(hd))";
  const std::vector<std::string> shapes = {
      "q [B, T, H, hd], k and v [B, L, KV, hd] with L >= T, H a multiple of KV, 1 <= hd <= 256",
      "query t is position L - T + t and sees keys 0 ..= L - T + t"};
  auto scale_of = [](const OpArgs& args, const Tensor& q) {
    return args.get_float("scale", 1.0 / std::sqrt(static_cast<double>(q.rank() == 4 ? q.size(3) : 1)));
  };
  OpSchema f;
  f.name = "attention";
  f.family = "attention";
  f.summary = "fused causal attention softmax(scale q k^T) v with grouped KV heads, and each query's logsumexp";
  f.inputs = {"q", "k", "v"};
  f.args = {{"scale", "float", "1/sqrt(hd)", scale_help}};
  f.outputs = {"out", "lse"};
  f.dtypes = {DType::F32};
  f.min_rank = 4;
  f.max_rank = 4;
  f.constraints = shapes;
  f.run = [scale_of](Device&, const OpTensors& in, const OpArgs& args) {
    const Tensor& q = input(in, "q");
    Attention a = attention(q, input(in, "k"), input(in, "v"), scale_of(args, q));
    return OpTensors{{"out", a.out}, {"lse", a.lse}};
  };
  r.add(std::move(f));

  OpSchema b;
  b.name = "attention_backward";
  b.family = "attention";
  b.summary = "the gradients dq, dk, dv of attention, the scores recomputed from its lse";
  b.inputs = {"grad_output", "q", "k", "v", "out", "lse"};
  b.args = {{"scale", "float", "1/sqrt(hd)", scale_help}};
  b.outputs = {"dq", "dk", "dv"};
  b.dtypes = {DType::F32};
  b.min_rank = 3;
  b.max_rank = 4;
  b.training_only = true;
  b.constraints = shapes;
  b.constraints.push_back("grad_output and out [B, T, H * hd], lse [B, H, T]: attention's outputs");
  b.run = [scale_of](Device&, const OpTensors& in, const OpArgs& args) {
    const Tensor& q = input(in, "q");
    AttentionGrads g = attention_backward(input(in, "grad_output"), q, input(in, "k"), input(in, "v"),
                                          {input(in, "out"), input(in, "lse")}, scale_of(args, q));
    return OpTensors{{"dq", g.dq}, {"dk", g.dk}, {"dv", g.dv}};
  };
  r.add(std::move(b));
}

}  // namespace detail
}  // namespace wgtrain::ops

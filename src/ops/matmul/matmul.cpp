// mm, bmm and linear: one tiled kernel over strided operands (gemm.wgsl).
#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "ops/matmul/gemm.h"
#include "ops/matmul/gemm_tiling.h"
#include "ops/matmul/split_k.h"
#include "wgtrain/device.h"
#include "wgtrain/ops.h"

namespace wgtrain::ops {

using namespace detail;

namespace {

struct alignas(16) GemmParams {
  uint32_t m, n, k, batch0;
  uint32_t a_off, a_sb, a_sm, a_sk;
  uint32_t b_off, b_sb, b_sk, b_sn;
  uint32_t bias_off, flags, q_words, q_rows;
  uint32_t group_size, c_off, k_chunk, pad1;
};
static_assert(sizeof(GemmParams) == 80);

// a: [batch, M, K] view, b: [batch, K, N] view (batch strides may be 0), bias: [N] or null. Returns [batch, M, N].
Tensor matmul_core(const char* op, const Tensor& a, const Tensor& b, const Tensor* bias) {
  Tensor c = new_tensor(a.device_impl(), {a.size(0), a.size(1), b.size(2)}, DType::F32);
  GemmB gb;
  gb.b = &b;
  gemm(op, a, gb, b.size(2), bias, c, false);
  return c;
}

// The variant of gemm.wgsl for these fields (its @variant lines say what each one means). The 24 variants are built
// once, each sorted by key as the pipeline cache keeps them: a call only looks its variant up.
const wgtrain::detail::KernelDefs& gemm_variant(int tm, GemmB::Mode mode, bool a_vec, bool b_vec) {
  auto index = [](int tm_, int mode_, bool a_vec_, bool b_vec_) {
    return static_cast<size_t>(((tm_ == 8 ? 3 : 0) + mode_) * 4 + (a_vec_ ? 2 : 0) + (b_vec_ ? 1 : 0));
  };
  static const auto table = [&] {
    std::array<wgtrain::detail::KernelDefs, 24> t;
    for (int tm_ : {4, 8})
      for (int mode_ : {0, 1, 2})
        for (bool av : {false, true})
          for (bool bv : {false, true})
            t[index(tm_, mode_, av, bv)] = {{"A_TYPE", av ? "vec4<f32>" : "f32"},
                                            {"A_VEC", av ? "true" : "false"},
                                            {"B_MODE", std::to_string(mode_)},
                                            {"B_TYPE", mode_ != GemmB::F32 ? "u32" : (bv ? "vec4<f32>" : "f32")},
                                            {"B_VEC", bv ? "true" : "false"},
                                            {"TM", std::to_string(tm_)}};
    return t;
  }();
  return table[index(tm, static_cast<int>(mode), a_vec, b_vec)];
}

// The variant of gemm_tiled.wgsl for a table entry and these fields, built once each (on first use: the table
// times the operand forms is large), sorted by key.
const wgtrain::detail::KernelDefs& gemm_tiled_variant(const GemmTiling& t, GemmB::Mode mode, bool a_vec, bool a_t,
                                                     bool b_vec, bool b_t) {
  static std::map<std::tuple<int, int, int, int, bool, int, bool, bool, bool, bool>, wgtrain::detail::KernelDefs>
      cache;
  static std::mutex mutex;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key =
      std::make_tuple(t.tm, t.tn, t.bk, t.stages, t.tstore, static_cast<int>(mode), a_vec, a_t, b_vec, b_t);
  auto it = cache.find(key);
  if (it == cache.end()) {
    wgtrain::detail::KernelDefs d = {{"A_TYPE", a_vec || a_t ? "vec4<f32>" : "f32"},
                                     {"A_T", a_t ? "true" : "false"},
                                     {"A_V4", a_vec || a_t ? "true" : "false"},
                                     {"A_VEC", a_vec ? "true" : "false"},
                                     {"BK", std::to_string(t.bk)},
                                     {"B_MODE", std::to_string(static_cast<int>(mode))},
                                     {"B_T", b_t ? "true" : "false"},
                                     {"B_TYPE", mode != GemmB::F32 ? "u32" : (b_vec || b_t ? "vec4<f32>" : "f32")},
                                     {"B_V4", b_vec || b_t ? "true" : "false"},
                                     {"B_VEC", b_vec ? "true" : "false"},
                                     {"STAGES", std::to_string(t.stages)},
                                     {"TM", std::to_string(t.tm)},
                                     {"TN", std::to_string(t.tn)},
                                     {"TSTORE", t.tstore ? "true" : "false"}};
    std::sort(d.begin(), d.end());
    it = cache.emplace(key, std::move(d)).first;
  }
  return it->second;
}

}  // namespace

namespace detail {

int gemm_force = kGemmTableChoice;

const std::vector<GemmTiling>& gemm_tilings() {
  // gemm.wgsl first (scripts/h200/gemm_fp32.sh times every entry; gemm_choice picks from that table), then
  // gemm_tiled.wgsl's: the same 128 x 128 in two buffers or 32 deep, wider per-thread blocks (8 x 16, 16 x 8) for
  // large outputs, and smaller tiles that give the step's 8192 x 640 outputs more workgroups; then some of them with
  // conflict-free workgroup stores (tstore). Workgroup memory: 48 KiB for the k16 wide blocks (the H200's limit;
  // llvmpipe has 32 KiB, where their k8 twins are tested).
  static const std::vector<GemmTiling> t = {
      {"gemm.wgsl 128x128|64x64 k16", 0, 0, 16, 1},
      {"128x128 k16 2buf", 8, 8, 16, 2},
      {"128x128 k32 1buf", 8, 8, 32, 1},
      {"128x128 k8 2buf", 8, 8, 8, 2},
      {"128x256 k16 2buf", 8, 16, 16, 2},
      {"256x128 k16 2buf", 16, 8, 16, 2},
      {"64x128 k16 2buf", 4, 8, 16, 2},
      {"128x64 k16 2buf", 8, 4, 16, 2},
      {"64x64 k32 2buf", 4, 4, 32, 2},
      {"128x256 k8 2buf", 8, 16, 8, 2},
      {"256x128 k8 2buf", 16, 8, 8, 2},
      {"128x128 k16 2buf tstore", 8, 8, 16, 2, true},
      {"64x128 k16 2buf tstore", 4, 8, 16, 2, true},
      {"128x64 k16 2buf tstore", 8, 4, 16, 2, true},
      {"128x256 k16 2buf tstore", 8, 16, 16, 2, true},
      {"128x256 k8 2buf tstore", 8, 16, 8, 2, true},
      {"256x128 k16 2buf tstore", 16, 8, 16, 2, true},
      {"64x128 k32 2buf tstore", 4, 8, 32, 2, true},
      {"128x64 k32 2buf tstore", 8, 4, 32, 2, true},
  };
  return t;
}

int64_t gemm_tiling_storage(const GemmTiling& t) {
  if (t.tm == 0) return 2 * 16 * 128 * 4;
  return int64_t{t.stages} * t.bk * 16 * (t.tm + t.tn) * 4;
}

const GemmTiling& gemm_choice(const DeviceImpl& dev, int64_t M, int64_t N, int64_t K, int b_mode) {
  (void)K;
  const auto& table = gemm_tilings();
  if (gemm_force == kGemmTableChoice) {
    // The first of these entries for this form of B (-1: any) that cuts the output into at least min_tiles tiles
    // (so that a large tile still fills the GPU) and fits the device's workgroup memory; else gemm.wgsl. From
    // gemm_fp32.sh's table on the H200 (bench/RESULTS.md run n): an f32 B with at least 500 of its tiles (4096^3:
    // 512, the tied head: 2048) 256 x 128 k8 two buffers (43.2 TFLOP/s at 4096^3, 0.85x cuBLAS; gemm.wgsl 33.6);
    // an f32 B below that (the weight gradients) 128 x 128 k8 two buffers (8192 x 1728 x 640: 0.579 ms, gemm.wgsl
    // 0.626); the q4 products gemm.wgsl, which no entry beat at the step's shapes (256 x 128 was slower at 896 tiles).
    struct Pick {
      size_t entry;
      int64_t min_tiles;
      int b_mode;
    };
    static constexpr Pick kPicks[] = {{10, 500, 0}, {3, 0, 0}, {0, 0, -1}};
    for (const Pick& pick : kPicks) {
      const GemmTiling& t = table[pick.entry];
      const int64_t bm = t.tm ? 16 * t.tm : 128, bn = t.tn ? 16 * t.tn : 128;
      if ((pick.b_mode < 0 || pick.b_mode == b_mode) && (M + bm - 1) / bm * ((N + bn - 1) / bn) >= pick.min_tiles &&
          gemm_tiling_storage(t) <= static_cast<int64_t>(dev.limits.max_workgroup_storage))
        return t;
    }
    return table[0];
  }
  if (gemm_force < 0 || gemm_force >= static_cast<int>(table.size()))
    throw ArgumentError("gemm: no tiling " + std::to_string(gemm_force) + " to force (WGTRAIN_FORCE_GEMM: 0 to " +
                        std::to_string(table.size() - 1) + ")");
  const GemmTiling& t = table[static_cast<size_t>(gemm_force)];
  if (gemm_tiling_storage(t) > static_cast<int64_t>(dev.limits.max_workgroup_storage))
    throw UnsupportedError("gemm: tiling " + std::to_string(gemm_force) + " (" + t.name + ") needs " +
                           std::to_string(gemm_tiling_storage(t)) + " bytes of workgroup memory; " + dev.info.name +
                           " allows " + std::to_string(dev.limits.max_workgroup_storage));
  return t;
}

void sum_split_parts(const char* op, const Tensor& part, const Tensor& c, int64_t splits, int64_t outputs,
                     bool accumulate) {
  DeviceImpl& dev = c.device_impl();
  struct alignas(16) SplitParams {
    uint32_t n, splits, c_off, pad;
  } sp{u32(outputs, "outputs"), u32(splits, "splits"), u32(c.offset(), "offset"), 0};
  static const wgtrain::detail::KernelDefs sum_variants[2] = {{{"ACCUMULATE", "false"}}, {{"ACCUMULATE", "true"}}};
  const auto& sum_pipe = dev.pipeline("matmul/split_sum", sum_variants[accumulate ? 1 : 0]);
  const auto [sx, sy] = dev.grid((static_cast<uint64_t>(outputs) + 255) / 256);
  dev.dispatch({op, &sum_pipe, &sp, sizeof sp, {{part.storage()->buffer}, {c.storage()->buffer}}, sx, sy, 1});
}

// Mixed precision where the device was opened for it and can (wgtrain/precision.h).
bool gemm_is_mixed(const DeviceImpl& dev) {
  return dev.gemm_sm_emulated || (dev.features.subgroup_matrix && gemm_sm_missing(dev).empty());
}

void gemm(const char* op, const Tensor& a, const GemmB& gb, int64_t N, const Tensor* bias, const Tensor& c,
          bool accumulate) {
  DeviceImpl& dev = a.device_impl();
  const int64_t batch = a.size(0), M = a.size(1), K = a.size(2);
  if (batch == 0 || M == 0 || N == 0) return;
  if (!c.is_contiguous() || c.numel() != batch * M * N) throw Error(std::string(op) + ": bad output tensor");
  if (gemm_is_mixed(dev)) return gemm_sm(op, a, gb, N, bias, c, accumulate);
  GemmParams p{};
  p.m = u32(M, "M");
  p.n = u32(N, "N");
  p.k = u32(K, "K");
  p.a_off = u32(a.offset(), "offset");
  p.a_sb = u32(a.strides()[0], "stride");
  p.a_sm = u32(a.strides()[1], "stride");
  p.a_sk = u32(a.strides()[2], "stride");
  p.flags = (bias ? 1u : 0u) | (accumulate ? 2u : 0u) | ((K == 1 || a.strides()[2] == 1) ? 4u : 0u);
  const Tensor& b = *gb.b;
  if (gb.mode == GemmB::F32) {
    p.b_off = u32(b.offset(), "offset");
    p.b_sb = u32(b.strides()[0], "stride");
    p.b_sk = u32(b.strides()[1], "stride");
    p.b_sn = u32(b.strides()[2], "stride");
    if (N == 1 || b.strides()[2] == 1) p.flags |= 8u;
  } else {
    p.q_words = u32(gb.q_words, "words per row");
    p.q_rows = u32(gb.q_rows, "weight rows");
    p.group_size = u32(gb.group_size, "group size");
  }
  p.bias_off = bias ? u32(bias->offset(), "offset") : 0;
  p.c_off = u32(c.offset(), "offset");
  u32(batch * M * N, "output elements");

  // The native backend's cooperative-matrix GEMM (fp16 products into fp32, 64 x 64 tiles, k staged 32 deep) where
  // the device was opened with it (DeviceOptions::cooperative_matrix).
  const bool coopmat = dev.features.cooperative_matrix;
  // Otherwise an entry of the tiling table (gemm_tiling.h) on WebGPU; the native backend has gemm.comp's alone.
  // gemm.wgsl (gemm.comp): large outputs take 128 x 128 tiles (8 x 8 per thread), small ones 64 x 64, so fewer
  // lanes idle.
  const GemmTiling& tiling = coopmat || dev.native() ? gemm_tilings()[0] : gemm_choice(dev, M, N, K, static_cast<int>(gb.mode));
  const bool tiled = tiling.tm != 0;
  const int tm = (M >= 128 && N >= 128) ? 8 : 4;
  const int64_t tile_m = coopmat ? 64 : tiled ? 16 * tiling.tm : 16 * tm;
  const int64_t tile_n = coopmat ? 64 : tiled ? 16 * tiling.tn : 16 * tm;
  const int64_t k_tile = coopmat ? 32 : tiled ? tiling.bk : 16;
  // 16-byte loads where an operand is row-major with every row and offset a multiple of 4 floats.
  const bool a_vec = K % 4 == 0 && a.strides()[2] == 1 && a.offset() % 4 == 0 && a.strides()[1] % 4 == 0 &&
                     a.strides()[0] % 4 == 0;
  // gemm_tiled.wgsl only: 16-byte loads along m where A is column-major (the weight gradient's dy^T) and aligned.
  const bool a_t = tiled && !a_vec && M % 4 == 0 && a.strides()[1] == 1 && a.strides()[2] % 4 == 0 &&
                   a.offset() % 4 == 0 && a.strides()[0] % 4 == 0;
  const bool b_vec = gb.mode == GemmB::F32 && N % 4 == 0 && b.strides()[2] == 1 && b.offset() % 4 == 0 &&
                     b.strides()[1] % 4 == 0 && b.strides()[0] % 4 == 0;
  // And along k where an f32 B has k stride 1 (W^T of a row-major weight: the tied head).
  const bool b_t = tiled && gb.mode == GemmB::F32 && !b_vec && K % 4 == 0 && b.strides()[1] == 1 &&
                   b.strides()[2] % 4 == 0 && b.offset() % 4 == 0 && b.strides()[0] % 4 == 0;
  const auto& pipe = coopmat ? dev.pipeline("matmul/gemm_coopmat", {{"B_MODE", std::to_string(static_cast<uint32_t>(gb.mode))}})
                     : tiled ? dev.pipeline("matmul/gemm_tiled", gemm_tiled_variant(tiling, gb.mode, a_vec, a_t, b_vec, b_t))
                             : dev.pipeline("matmul/gemm", gemm_variant(tm, gb.mode, a_vec, b_vec));
  const uint32_t gx = u32((N + tile_n - 1) / tile_n, "N tiles"), gy = u32((M + tile_m - 1) / tile_m, "M tiles");
  const int64_t maxz = dev.limits.max_workgroups_per_dim;
  // Unused bindings still need a buffer; any read-only one will do.
  const wgtrain::detail::BufferHandle scales = gb.scales ? gb.scales->storage()->buffer : a.storage()->buffer;
  const wgtrain::detail::BufferHandle bias_buf = bias ? bias->storage()->buffer : a.storage()->buffer;

  // Split-K (split_k.h): only for single, bias-free products, whose partial tiles split_sum.wgsl adds (to what c
  // held, when accumulating).
  const auto [splits, chunk] = batch == 1 && !bias
                                   ? plan_split_k(static_cast<int64_t>(gx) * gy, K, dev.split_k, dev.info.software, k_tile)
                                   : SplitK{1, K};
  if (splits > 1) {
    const Tensor part = new_tensor(dev, {splits, M, N}, DType::F32);
    p.k_chunk = u32(chunk, "k chunk");
    p.flags &= ~2u;
    p.c_off = 0;
    p.batch0 = 0;
    dev.dispatch({op, &pipe, &p, sizeof p,
                  {{a.storage()->buffer}, {b.storage()->buffer}, {scales}, {bias_buf}, {part.storage()->buffer}},
                  gx, gy, u32(splits, "splits")});
    sum_split_parts(op, part, c, splits, M * N, accumulate);
    return;
  }
  for (int64_t b0 = 0; b0 < batch; b0 += maxz) {
    p.batch0 = static_cast<uint32_t>(b0);
    const uint32_t gz = static_cast<uint32_t>(std::min(maxz, batch - b0));
    dev.dispatch({op, &pipe, &p, sizeof p,
                  {{a.storage()->buffer}, {b.storage()->buffer}, {scales}, {bias_buf}, {c.storage()->buffer}},
                  gx, gy, gz});
  }
}

}  // namespace detail

Tensor mm(const Tensor& a, const Tensor& b) {
  check_dtype("mm", a, "self", {DType::F32});
  check_dtype("mm", b, "mat2", {DType::F32});
  check_rank("mm", a, "self", 2);
  check_rank("mm", b, "mat2", 2);
  check_same_device("mm", a, b);
  if (a.size(1) != b.size(0))
    throw ArgumentError("mm: self " + shape_str(a.shape()) + " and mat2 " + shape_str(b.shape()) +
                        " cannot be multiplied (" + std::to_string(a.size(1)) + " != " + std::to_string(b.size(0)) +
                        ")");
  Tensor c = matmul_core("mm", a.unsqueeze(0), b.unsqueeze(0), nullptr);
  return c.reshape({a.size(0), b.size(1)});
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  check_dtype("bmm", a, "self", {DType::F32});
  check_dtype("bmm", b, "mat2", {DType::F32});
  check_rank("bmm", a, "self", 3);
  check_rank("bmm", b, "mat2", 3);
  check_same_device("bmm", a, b);
  if (a.size(0) != b.size(0) || a.size(2) != b.size(1))
    throw ArgumentError("bmm: self " + shape_str(a.shape()) + " and mat2 " + shape_str(b.shape()) +
                        " need equal batch sizes and self.size(2) == mat2.size(1)");
  return matmul_core("bmm", a, b, nullptr);
}

Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) {
  check_dtype("linear", x, "input", {DType::F32});
  check_dtype("linear", weight, "weight", {DType::F32});
  check_rank("linear", weight, "weight", 2);
  check_same_device("linear", x, weight);
  if (x.rank() < 1) throw ArgumentError("linear: input must have at least 1 dim");
  const int64_t K = x.size(-1), N = weight.size(0);
  if (weight.size(1) != K)
    throw ArgumentError("linear: input " + shape_str(x.shape()) + " has " + std::to_string(K) +
                        " features, weight " + shape_str(weight.shape()) + " expects " +
                        std::to_string(weight.size(1)));
  if (bias) {
    check_dtype("linear", *bias, "bias", {DType::F32});
    check_same_device("linear", x, *bias);
    if (bias->rank() != 1 || bias->size(0) != N)
      throw ArgumentError("linear: bias must have shape [" + std::to_string(N) + "], got " +
                          shape_str(bias->shape()));
  }
  Shape out_shape = x.shape();
  out_shape.back() = N;
  const int64_t M = numel(Shape(x.shape().begin(), x.shape().end() - 1));
  // Flatten the leading dims into M; a strided input is gathered first unless it is already 2-D.
  const Tensor x2 = x.rank() == 2 ? x : contiguous(x).reshape({M, K});
  Tensor c = matmul_core("linear", x2.unsqueeze(0), weight.transpose(0, 1).unsqueeze(0), bias ? &*bias : nullptr);
  return c.reshape(out_shape);
}

namespace detail {

void register_matmul_ops(Registry& r) {
  OpSchema mm_s;
  mm_s.name = "mm";
  mm_s.family = "matmul";
  mm_s.summary = "matrix product self[M,K] @ mat2[K,N]";
  mm_s.inputs = {"self", "mat2"};
  mm_s.outputs = {"out"};
  mm_s.dtypes = {DType::F32};
  mm_s.backends = {"webgpu", "native-vulkan"};
  mm_s.min_rank = mm_s.max_rank = 2;
  mm_s.constraints = {"self.size(1) == mat2.size(0)", "M*N < 2^32"};
  mm_s.run = [](Device&, const OpTensors& in, const OpArgs&) {
    return OpTensors{{"out", mm(input(in, "self"), input(in, "mat2"))}};
  };
  r.add(std::move(mm_s));

  OpSchema bmm_s;
  bmm_s.name = "bmm";
  bmm_s.family = "matmul";
  bmm_s.summary = "batched matrix product self[B,M,K] @ mat2[B,K,N]";
  bmm_s.inputs = {"self", "mat2"};
  bmm_s.outputs = {"out"};
  bmm_s.dtypes = {DType::F32};
  bmm_s.backends = {"webgpu", "native-vulkan"};
  bmm_s.min_rank = bmm_s.max_rank = 3;
  bmm_s.constraints = {"equal batch sizes", "self.size(2) == mat2.size(1)"};
  bmm_s.run = [](Device&, const OpTensors& in, const OpArgs&) {
    return OpTensors{{"out", bmm(input(in, "self"), input(in, "mat2"))}};
  };
  r.add(std::move(bmm_s));

  OpSchema lin;
  lin.name = "linear";
  lin.family = "matmul";
  lin.summary = "input[...,K] @ weight[N,K]^T + bias[N]";
  lin.inputs = {"input", "weight", "bias?"};
  lin.outputs = {"out"};
  lin.dtypes = {DType::F32};
  lin.backends = {"webgpu", "native-vulkan"};
  lin.min_rank = 1;
  lin.constraints = {"input.size(-1) == weight.size(1)", "bias, if given, has shape [weight.size(0)]"};
  lin.run = [](Device&, const OpTensors& in, const OpArgs&) {
    std::optional<Tensor> bias;
    if (auto it = in.find("bias"); it != in.end()) bias = it->second;
    return OpTensors{{"out", linear(input(in, "input"), input(in, "weight"), bias)}};
  };
  r.add(std::move(lin));
}

}  // namespace detail
}  // namespace wgtrain::ops

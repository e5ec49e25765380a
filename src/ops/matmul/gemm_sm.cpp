// The launcher of gemm_sm.wgsl (mixed precision on subgroup matrices) and of its absmax pass, sm_absmax.wgsl.
#include <algorithm>
#include <array>
#include <string>

#include "ops/matmul/gemm.h"
#include "ops/matmul/split_k.h"
#include "wgtrain/ops.h"

namespace wgtrain::ops::detail {

namespace {

struct alignas(16) SmParams {
  uint32_t m, n, k, batch0;
  uint32_t a_off, a_sb, a_sm, a_sk;
  uint32_t b_off, b_sb, b_sk, b_sn;
  uint32_t unused0, flags, q_words, q_rows;
  uint32_t group_size, c_off, k_chunk, sa_off;
  uint32_t sb_off, r_sn, r_sb, padded;
};
static_assert(sizeof(SmParams) == 96);

struct alignas(16) FinishParams {
  uint32_t total, m, n, splits, cols_p, block, c_off, bias_off, flags, sa_off, sb_off, pad;
};

struct alignas(16) AbsmaxParams {
  uint32_t rows, len, off, sb, sr, sl, out_off, pad;
};

constexpr int64_t kBlock = 128, kDepth = 32;  // gemm_sm.wgsl's BM = BN and BK

// Whether absmax_into takes whole rows (sm_row_absmax.wgsl: rows with len stride 1, written once, no zeros needed)
// rather than tiles that combine with atomicMax into zeros (sm_absmax.wgsl).
bool absmax_whole_rows(int64_t sr, int64_t sl) { return sl == 1 && sr != 1; }

// out[out_off + b * rows + r] = the bits of max_l |x[off + b sb + r sr + l sl]| (whole rows where
// absmax_whole_rows, else atomicMax: out must hold zeros first).
void absmax_into(const char* op, DeviceImpl& dev, wgtrain::detail::BufferHandle x, int64_t off, int64_t batch,
                 int64_t rows, int64_t len, int64_t sb, int64_t sr, int64_t sl, const Tensor& out, int64_t out_off) {
  if (batch == 0 || rows == 0 || len == 0) return;
  AbsmaxParams p{u32(rows, "rows"), u32(len, "length"),      u32(off, "offset"),           u32(sb, "stride"),
                 u32(sr, "stride"), u32(sl, "stride"), u32(out.offset() + out_off, "offset"), 0};
  const int64_t maxd = dev.limits.max_workgroups_per_dim;
  auto beyond = [&] {
    return Error(std::string(op) + ": --precision mixed: an operand of " + std::to_string(batch) + " x " +
                 std::to_string(rows) + " x " + std::to_string(len) + " is beyond the absmax pass's grid");
  };
  if (batch > maxd) throw beyond();
  // Names of their own, so that a profile (WGTRAIN_PROFILE=1) shows the passes apart from the GEMMs they serve.
  if (absmax_whole_rows(sr, sl)) {
    const bool v4 = off % 4 == 0 && sr % 4 == 0 && len % 4 == 0 && (batch == 1 || sb % 4 == 0);
    static const wgtrain::detail::KernelDefs row_variants[2] = {{{"V4", "false"}, {"X_TYPE", "f32"}},
                                                                {{"V4", "true"}, {"X_TYPE", "vec4<f32>"}}};
    const auto& pipe = dev.pipeline("matmul/sm_row_absmax", row_variants[v4 ? 1 : 0]);
    const int64_t groups = (rows + 7) / 8, gx = std::min(groups, maxd), gy = (groups + gx - 1) / gx;
    if (gy > maxd) throw beyond();
    dev.dispatch({"mixed absmax (rows)", &pipe, &p, sizeof p, {{x}, {out.storage()->buffer}},
                  static_cast<uint32_t>(gx), static_cast<uint32_t>(gy), static_cast<uint32_t>(batch)});
    return;
  }
  const bool v4 = sr == 1 && rows % 4 == 0 && off % 4 == 0 && sl % 4 == 0 && (batch == 1 || sb % 4 == 0);
  static const wgtrain::detail::KernelDefs tile_variants[2] = {{{"V4", "false"}, {"X_TYPE", "f32"}},
                                                               {{"V4", "true"}, {"X_TYPE", "vec4<f32>"}}};
  const auto& pipe = dev.pipeline("matmul/sm_absmax", tile_variants[v4 ? 1 : 0]);
  const int64_t gx = (len + 255) / 256, gy = (rows + 63) / 64;
  if (gx > maxd || gy > maxd) throw beyond();
  dev.dispatch({"mixed absmax (tiles)", &pipe, &p, sizeof p, {{x}, {out.storage()->buffer}},
                static_cast<uint32_t>(gx), static_cast<uint32_t>(gy), static_cast<uint32_t>(batch)});
}

}  // namespace

std::string gemm_sm_missing(const DeviceImpl& dev) {
  if (dev.native()) return "is the native Vulkan backend (mixed precision runs through WebGPU only)";
  const DeviceFeatures& f = dev.features;
  if (!f.shader_f16)
    return "offers no shader-f16 (on NVIDIA's Vulkan driver Dawn offers it only with its vulkan_enable_f16_on_nvidia "
           "toggle)";
  bool shape = false;
  for (const auto& c : f.subgroup_matrix_configs)
    shape = shape || (c.component_type == "f16" && c.result_type == "f32" && c.m == 16 && c.n == 16 && c.k == 16);
  if (f.subgroup_matrix_configs.empty() && !f.subgroup_matrix)
    return "offers no subgroup matrices (Dawn's chromium_experimental_subgroup_matrix)";
  if (!shape) return "offers no f16 x f16 -> f32 16x16x16 subgroup-matrix shape";
  if (!f.subgroup_matrix) return "was not opened with subgroup matrices (DeviceOptions::subgroup_matrix)";
  // gemm_sm.wgsl takes lane / 32 as the subgroup: it needs subgroups of exactly 32 lanes.
  if (dev.info.subgroup_min != 32 || dev.info.subgroup_max != 32)
    return "has subgroups of " + std::to_string(dev.info.subgroup_min) + ".." + std::to_string(dev.info.subgroup_max) +
           " lanes (the kernel needs 32)";
  // gemm_sm.wgsl's workgroup memory: the f16 tiles of A (128 x 40) and B (128 x 40 with B_T, else 32 x 136).
  constexpr uint32_t kWorkgroupBytes = 128 * 40 * 2 + 128 * 40 * 2;
  if (dev.limits.max_workgroup_storage < kWorkgroupBytes)
    return "allows " + std::to_string(dev.limits.max_workgroup_storage) + " bytes of workgroup memory (the kernel needs " +
           std::to_string(kWorkgroupBytes) + ")";
  return {};
}

// The 27 variants (3 forms of B; A and an f32 B each element-wise (0), vec4s along the stride-1 dimension that
// gemm.wgsl's vec4s take (1: A_VEC, B_VEC) or along the other one (2: A_T, B_T); the q4 forms use B form 0 only), at
// mode * 9 + a_form * 3 + b_form, built once.
const std::vector<wgtrain::detail::KernelDefs>& gemm_sm_variants() {
  static const auto variants = [] {
    std::vector<wgtrain::detail::KernelDefs> t(27);
    for (int mode = 0; mode < 3; ++mode)
      for (int am = 0; am < 3; ++am)
        for (int bm = 0; bm < 3; ++bm)
          t[mode * 9 + am * 3 + bm] = {{"A_T", am == 2 ? "true" : "false"},
                                       {"A_TYPE", am != 0 ? "vec4<f32>" : "f32"},
                                       {"A_V4", am != 0 ? "true" : "false"},
                                       {"A_VEC", am == 1 ? "true" : "false"},
                                       {"B_MODE", std::to_string(mode)},
                                       {"B_T", bm == 2 ? "true" : "false"},
                                       {"B_TYPE", mode != 0 ? "u32" : (bm != 0 ? "vec4<f32>" : "f32")},
                                       {"B_V4", bm != 0 ? "true" : "false"},
                                       {"B_VEC", bm == 1 ? "true" : "false"}};
    return t;
  }();
  return variants;
}

Tensor row_absmax(const Tensor& x) {
  check_dtype("row_absmax", x, "input", {DType::F32});
  check_rank("row_absmax", x, "input", 3);
  DeviceImpl& dev = x.device_impl();
  const Tensor out = new_tensor(dev, {x.size(0) * x.size(1)}, DType::F32);
  if (!absmax_whole_rows(x.strides()[1], x.strides()[2])) ops::fill_(out, 0.0);
  absmax_into("row_absmax", dev, x.storage()->buffer, x.offset(), x.size(0), x.size(1), x.size(2), x.strides()[0],
              x.strides()[1], x.strides()[2], out, 0);
  return out.reshape({x.size(0), x.size(1)});
}

void gemm_sm(const char* op, const Tensor& a, const GemmB& gb, int64_t N, const Tensor* bias, const Tensor& c,
             bool accumulate) {
  DeviceImpl& dev = a.device_impl();
  const int64_t batch = a.size(0), M = a.size(1), K = a.size(2);
  if (batch == 0 || M == 0 || N == 0) return;
  if (!c.is_contiguous() || c.numel() != batch * M * N) throw Error(std::string(op) + ": bad output tensor");
  const Tensor& b = *gb.b;
  const bool f32_b = gb.mode == GemmB::F32;
  SmParams p{};
  p.m = u32(M, "M");
  p.n = u32(N, "N");
  p.k = u32(K, "K");
  p.a_off = u32(a.offset(), "offset");
  p.a_sb = u32(a.strides()[0], "stride");
  p.a_sm = u32(a.strides()[1], "stride");
  p.a_sk = u32(a.strides()[2], "stride");
  p.flags = ((K == 1 || a.strides()[2] == 1) ? 4u : 0u) | 16u;
  if (f32_b) {
    p.b_off = u32(b.offset(), "offset");
    p.b_sb = u32(b.strides()[0], "stride");
    p.b_sk = u32(b.strides()[1], "stride");
    p.b_sn = u32(b.strides()[2], "stride");
    if (N == 1 || b.strides()[2] == 1) p.flags |= 8u;
    p.flags |= 32u;
  } else {
    p.q_words = u32(gb.q_words, "words per row");
    p.q_rows = u32(gb.q_rows, "weight rows");
    p.group_size = u32(gb.group_size, "group size");
  }
  p.c_off = u32(c.offset(), "offset");
  u32(batch * M * N, "output elements");

  // The range remedy: the largest magnitude of every row of A (over k) and, for an f32 B, of every column of B.
  // q4 weights are left as they are: codes in -8..7 times their group's scale are well inside f16's range.
  const int64_t a_rows = batch * M, b_cols = f32_b ? batch * N : 0;
  const Tensor amax = new_tensor(dev, {a_rows + b_cols}, DType::F32);
  // Zeros first only for the atomic tiles: whole rows are written once.
  if (!absmax_whole_rows(a.strides()[1], a.strides()[2]) ||
      (f32_b && !absmax_whole_rows(b.strides()[2], b.strides()[1])))
    ops::fill_(amax, 0.0);
  absmax_into(op, dev, a.storage()->buffer, a.offset(), batch, M, K, a.strides()[0], a.strides()[1], a.strides()[2],
              amax, 0);
  if (f32_b)
    absmax_into(op, dev, b.storage()->buffer, b.offset(), batch, N, K, b.strides()[0], b.strides()[2],
                b.strides()[1], amax, a_rows);
  p.sa_off = u32(amax.offset(), "offset");
  p.sb_off = u32(amax.offset() + a_rows, "offset");

  // 16-byte loads where an operand is row-major with every row and offset a multiple of 4 floats (as gemm).
  const bool a_vec = K % 4 == 0 && a.strides()[2] == 1 && a.offset() % 4 == 0 && a.strides()[1] % 4 == 0 &&
                     a.strides()[0] % 4 == 0;
  // A column-major (m stride 1, as dy^T in the weight gradient): 16-byte loads along m, where they stay aligned.
  const bool a_t = !a_vec && M % 4 == 0 && a.strides()[1] == 1 && a.offset() % 4 == 0 && a.strides()[2] % 4 == 0 &&
                   a.strides()[0] % 4 == 0;
  const bool b_vec = f32_b && N % 4 == 0 && b.strides()[2] == 1 && b.offset() % 4 == 0 && b.strides()[1] % 4 == 0 &&
                     b.strides()[0] % 4 == 0;
  // B column-major (k stride 1: W^T of an f32 weight): 16-byte loads along k.
  const bool b_t = f32_b && !b_vec && K % 4 == 0 && b.strides()[1] == 1 && b.offset() % 4 == 0 &&
                   b.strides()[2] % 4 == 0 && b.strides()[0] % 4 == 0;
  const int a_form = a_vec ? 1 : a_t ? 2 : 0, b_form = b_vec ? 1 : b_t ? 2 : 0;
  const auto& pipe =
      dev.pipeline("matmul/gemm_sm", gemm_sm_variants()[static_cast<int>(gb.mode) * 9 + a_form * 3 + b_form]);
  const uint32_t gx = u32((N + kBlock - 1) / kBlock, "N tiles"), gy = u32((M + kBlock - 1) / kBlock, "M tiles");
  const int64_t maxz = dev.limits.max_workgroups_per_dim;
  const wgtrain::detail::BufferHandle scales = gb.scales ? gb.scales->storage()->buffer : a.storage()->buffer;
  const wgtrain::detail::BufferHandle bias_buf = bias ? bias->storage()->buffer : a.storage()->buffer;
  const wgtrain::detail::BufferHandle amax_buf = amax.storage()->buffer;

  // Split-K as in gemm (split_k.h), in chunks that are multiples of the kernel's 32-deep k step.
  const auto [splits, chunk] = batch == 1 && !bias
                                   ? plan_split_k(static_cast<int64_t>(gx) * gy, K, dev.split_k, dev.info.software,
                                                  kDepth)
                                   : SplitK{1, K};
  // The kernel stores whole 16 x 16 fragments, still scaled: straight into c where none straddles an edge and c's
  // offset keeps them 16-byte aligned, nothing is accumulated and there is one chunk; else into a padded buffer of
  // whole blocks. sm_finish.wgsl then finishes c (scales, bias, chunks, accumulation).
  const bool direct = splits == 1 && !accumulate && M % 16 == 0 && N % 16 == 0 && c.offset() % 4 == 0;
  FinishParams fp{u32(batch * M * N, "output elements"), p.m, p.n, u32(splits, "splits"), 0, 0,
                  u32(c.offset(), "offset"), bias ? u32(bias->offset(), "offset") : 0,
                  (bias ? 1u : 0u) | (accumulate ? 2u : 0u) | (p.flags & 48u), p.sa_off, p.sb_off, 0};
  // 4 outputs a thread where they are whole vec4s of c (and of the padded buffer, whose rows are multiples of 128).
  const bool fv4 = N % 4 == 0 && c.offset() % 4 == 0;
  const auto [fx, fy] = dev.grid((static_cast<uint64_t>(batch * M * N) / (fv4 ? 4 : 1) + 255) / 256);
  static const wgtrain::detail::KernelDefs finish_variants[4] = {
      {{"IN_PLACE", "false"}, {"T", "f32"}, {"V4", "false"}},
      {{"IN_PLACE", "true"}, {"T", "f32"}, {"V4", "false"}},
      {{"IN_PLACE", "false"}, {"T", "vec4<f32>"}, {"V4", "true"}},
      {{"IN_PLACE", "true"}, {"T", "vec4<f32>"}, {"V4", "true"}}};
  const auto& finish = [&](bool in_place) -> const auto& {
    return dev.pipeline("matmul/sm_finish", finish_variants[(fv4 ? 2 : 0) + (in_place ? 1 : 0)]);
  };
  if (!direct) {
    const int64_t rows_p = static_cast<int64_t>(gy) * kBlock, cols_p = static_cast<int64_t>(gx) * kBlock;
    const int64_t blocks = splits > 1 ? splits : batch;
    const Tensor padded = new_tensor(dev, {blocks, rows_p, cols_p}, DType::F32);
    p.k_chunk = splits > 1 ? u32(chunk, "k chunk") : 0;
    p.c_off = u32(padded.offset(), "offset");
    p.r_sn = u32(cols_p, "padded columns");
    p.r_sb = u32(rows_p * cols_p, "padded block");
    p.padded = 1;
    for (int64_t z0 = 0; z0 < blocks; z0 += maxz) {
      p.batch0 = static_cast<uint32_t>(z0);
      dev.dispatch({op, &pipe, &p, sizeof p,
                    {{a.storage()->buffer}, {b.storage()->buffer}, {scales}, {padded.storage()->buffer}, {amax_buf}},
                    gx, gy, static_cast<uint32_t>(std::min(maxz, blocks - z0))});
    }
    fp.cols_p = p.r_sn;
    fp.block = p.r_sb;
    dev.dispatch({op, &finish(false), &fp, sizeof fp,
                  {{c.storage()->buffer}, {amax_buf}, {bias_buf}, {padded.storage()->buffer}}, fx, fy, 1});
    return;
  }
  p.r_sn = p.n;
  p.r_sb = u32(M * N, "output elements");
  for (int64_t b0 = 0; b0 < batch; b0 += maxz) {
    p.batch0 = static_cast<uint32_t>(b0);
    const uint32_t gz = static_cast<uint32_t>(std::min(maxz, batch - b0));
    dev.dispatch({op, &pipe, &p, sizeof p,
                  {{a.storage()->buffer}, {b.storage()->buffer}, {scales}, {c.storage()->buffer}, {amax_buf}}, gx, gy,
                  gz});
  }
  dev.dispatch({op, &finish(true), &fp, sizeof fp,
                {{c.storage()->buffer}, {amax_buf}, {bias_buf}}, fx, fy, 1});
}

}  // namespace wgtrain::ops::detail

// The launcher of gemm_sm.wgsl (mixed precision on subgroup matrices) and of its absmax passes (sm_absmax.wgsl,
// sm_row_absmax.wgsl).
#include <algorithm>
#include <array>
#include <map>
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
  uint32_t total, m, n, splits, cols_p, block, c_off, bias_off, flags, sa_off, sb_off, add_off;
};

struct alignas(16) RowAbsmaxParams {  // sm_row_absmax.wgsl's
  uint32_t rows, len, off, sb, sr, sl, out_off, pad;
};

struct alignas(16) TileAbsmaxParams {  // sm_absmax.wgsl's
  uint32_t rows, cols, off, sb, sr, sc, out_r, out_c, flags, pad0, pad1, pad2;
};

constexpr int64_t kBlock = 128, kDepth = 32;  // gemm_sm.wgsl's BN (and BM's default) and BK
// The bindings the kernels only read (DispatchDesc::read_only): gemm_sm's a, b, scales and both absmax arrays (c,
// binding 3, is written); sm_finish's absmax arrays, bias, raw and addend (c, binding 0, is written).
constexpr uint32_t kGemmReads = 0b110111, kFinishReads = 0b111110;

using wgtrain::detail::BufferHandle;
using wgtrain::detail::DerivedKey;
using wgtrain::detail::DerivedValue;
using wgtrain::detail::Storage;

// A view for the absmax passes: the largest magnitude of each of `rows` rows of `len` elements, in `batch` matrices
// (element (b, r, l) at off + b sb + r sr + l sl).
struct AbsmaxView {
  BufferHandle buffer;
  int64_t off, batch, rows, len, sb, sr, sl;

  // One matrix where the batch is rows of one (contiguous over batch and rows), batch stride 0 in one matrix: the
  // form under which the derived cache knows a view, whatever shape the op gave it.
  AbsmaxView canonical() const {
    AbsmaxView v = *this;
    if (v.batch > 1 && v.sb == v.rows * v.sr) {
      v.rows *= v.batch;
      v.batch = 1;
    }
    if (v.batch == 1) v.sb = 0;
    return v;
  }
  // The same elements, rows and lengths exchanged (its columns' maxima).
  AbsmaxView transposed() const { return {buffer, off, batch, len, rows, sb, sl, sr}; }
  DerivedKey key() const { return {buffer, 1, {off, batch, rows, len, sb, sr, sl}}; }
  int64_t maxima() const { return batch * rows; }
};

AbsmaxView view_of(const Tensor& t, int64_t batch, int64_t rows, int64_t len, int64_t sb, int64_t sr, int64_t sl) {
  return AbsmaxView{t.storage()->buffer, t.offset(), batch, rows, len, sb, sr, sl}.canonical();
}

Error beyond_grid(const char* op, const AbsmaxView& v) {
  return Error(std::string(op) + ": --precision mixed: an operand of " + std::to_string(v.batch) + " x " +
               std::to_string(v.rows) + " x " + std::to_string(v.len) + " is beyond the absmax pass's grid");
}

// Whole rows with len stride 1: sm_row_absmax.wgsl writes each row's maximum once (no zeros needed first).
void row_pass(const char* op, DeviceImpl& dev, const AbsmaxView& v, BufferHandle out, int64_t out_off) {
  RowAbsmaxParams p{u32(v.rows, "rows"), u32(v.len, "length"),      u32(v.off, "offset"),     u32(v.sb, "stride"),
                    u32(v.sr, "stride"), u32(v.sl, "stride"), u32(out_off, "offset"), 0};
  const bool v4 = v.off % 4 == 0 && v.sr % 4 == 0 && v.len % 4 == 0 && (v.batch == 1 || v.sb % 4 == 0);
  static const wgtrain::detail::KernelDefs variants[2] = {{{"V4", "false"}, {"X_TYPE", "f32"}},
                                                          {{"V4", "true"}, {"X_TYPE", "vec4<f32>"}}};
  const int64_t maxd = dev.limits.max_workgroups_per_dim;
  const int64_t groups = (v.rows + 7) / 8, gx = std::min(groups, maxd), gy = (groups + gx - 1) / gx;
  if (gy > maxd || v.batch > maxd) throw beyond_grid(op, v);
  // Names of their own, so that a profile (WGTRAIN_PROFILE=1) shows the passes apart from the GEMMs they serve.
  dev.dispatch({"mixed absmax (rows)", &dev.pipeline("matmul/sm_row_absmax", variants[v4 ? 1 : 0]), &p, sizeof p,
                {{v.buffer}, {out}}, static_cast<uint32_t>(gx), static_cast<uint32_t>(gy),
                static_cast<uint32_t>(v.batch), true, 1u});
}

// sm_absmax.wgsl over v's elements as a matrix whose columns run along the stride-1 dimension where there is one
// (vec4 loads): the maxima of v's rows (want_rows) and of its columns (want_cols, v.transposed()'s rows), atomically
// into zeros. Where they go: out[rows_at + ...] and out[cols_at + ...].
void tile_pass(const char* op, DeviceImpl& dev, const AbsmaxView& v, BufferHandle out, bool want_rows,
               int64_t rows_at, bool want_cols, int64_t cols_at) {
  const bool flip = v.sl != 1;  // the matrix is v transposed: its rows are v's columns
  const AbsmaxView m = flip ? v.transposed() : v;
  TileAbsmaxParams p{u32(m.rows, "rows"),
                     u32(m.len, "length"),
                     u32(m.off, "offset"),
                     u32(m.sb, "stride"),
                     u32(m.sr, "stride"),
                     u32(m.sl, "stride"),
                     u32(flip ? cols_at : rows_at, "offset"),
                     u32(flip ? rows_at : cols_at, "offset"),
                     ((flip ? want_cols : want_rows) ? 1u : 0u) | ((flip ? want_rows : want_cols) ? 2u : 0u),
                     0,
                     0,
                     0};
  const bool v4 =
      m.sl == 1 && m.len % 4 == 0 && m.off % 4 == 0 && m.sr % 4 == 0 && (m.batch == 1 || m.sb % 4 == 0);
  static const wgtrain::detail::KernelDefs variants[2] = {{{"V4", "false"}, {"X_TYPE", "f32"}},
                                                          {{"V4", "true"}, {"X_TYPE", "vec4<f32>"}}};
  const int64_t maxd = dev.limits.max_workgroups_per_dim;
  const int64_t gx = (m.len + 127) / 128, gy = (m.rows + 63) / 64;
  if (gx > maxd || gy > maxd || m.batch > maxd) throw beyond_grid(op, v);
  dev.dispatch({want_rows && want_cols ? "mixed absmax (rows and columns)" : "mixed absmax (tiles)",
                &dev.pipeline("matmul/sm_absmax", variants[v4 ? 1 : 0]), &p, sizeof p, {{v.buffer}, {out}},
                static_cast<uint32_t>(gx), static_cast<uint32_t>(gy), static_cast<uint32_t>(m.batch), true, 1u});
}

// The absmax bits of v's rows alone, in a new tensor [batch * rows]: whole rows where len's stride is 1 (no zeros
// needed), else tiles into zeros.
Tensor rows_absmax(const char* op, DeviceImpl& dev, const AbsmaxView& v) {
  const Tensor bits = new_tensor(dev, {v.maxima()}, DType::F32);
  if (v.sl == 1 && v.sr != 1) {
    row_pass(op, dev, v, bits.storage()->buffer, bits.offset());
  } else {
    ops::fill_(bits, 0.0);
    tile_pass(op, dev, v, bits.storage()->buffer, true, bits.offset(), false, 0);
  }
  return bits;
}

// The absmax bits of v's rows, where gemm_sm.wgsl reads them. Bits the derived cache still holds (the same view of an
// unchanged buffer: the normed input that q, k and v share, an operand whose columns an earlier GEMM's pass reduced)
// are not computed again. Otherwise a single matrix is read once for the maxima of its rows and of its columns, and
// both are remembered: a GEMM operand's transpose is the weight gradient's (dy for dx = dy W, dy^T for dW = dy^T x;
// x for the forward, x in dW), so in a training step each operand is read once.
DerivedValue operand_absmax(const char* op, DeviceImpl& dev, const AbsmaxView& v) {
  if (auto hit = dev.derived(v.key())) return *hit;
  if (v.batch == 1) {
    const DerivedValue rows = operand_maxima_scratch(dev, v.rows + v.len);
    const DerivedValue cols{rows.storage, rows.offset + v.rows};
    tile_pass(op, dev, v, rows.storage->buffer, true, rows.offset, true, cols.offset);
    dev.remember_derived(v.transposed().key(), cols);
    dev.remember_derived(v.key(), rows);
    return rows;
  }
  const Tensor bits = rows_absmax(op, dev, v);
  const DerivedValue rows{bits.storage(), bits.offset()};
  dev.remember_derived(v.key(), rows);
  return rows;
}

// "<op> (finish)": sm_finish's dispatches under a name of their own, so that a profile (WGTRAIN_PROFILE=1) times the
// finishing passes apart from the products. Interned: a dispatch's name must outlive it.
std::string_view finish_name(const char* op) {
  static std::map<std::string, std::string, std::less<>> names;
  auto it = names.find(std::string_view(op));
  if (it == names.end()) it = names.emplace(op, std::string(op) + " (finish)").first;
  return it->second;
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

// The 54 variants (blocks of 128 or 64 rows; 3 forms of B; A and an f32 B each element-wise (0), vec4s along the
// stride-1 dimension that gemm.wgsl's vec4s take (1: A_VEC, B_VEC) or along the other one (2: A_T, B_T); the q4
// forms use B form 0 only), at (BM == 64) * 27 + mode * 9 + a_form * 3 + b_form, built once.
const std::vector<wgtrain::detail::KernelDefs>& gemm_sm_variants() {
  static const auto variants = [] {
    std::vector<wgtrain::detail::KernelDefs> t(54);
    for (int rows = 0; rows < 2; ++rows)
      for (int mode = 0; mode < 3; ++mode)
        for (int am = 0; am < 3; ++am)
          for (int bm = 0; bm < 3; ++bm)
            t[rows * 27 + mode * 9 + am * 3 + bm] = {{"A_T", am == 2 ? "true" : "false"},
                                                     {"A_TYPE", am != 0 ? "vec4<f32>" : "f32"},
                                                     {"A_V4", am != 0 ? "true" : "false"},
                                                     {"A_VEC", am == 1 ? "true" : "false"},
                                                     {"BM", rows ? "64" : "128"},
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
  const AbsmaxView v{x.storage()->buffer, x.offset(), x.size(0),     x.size(1),
                     x.size(2),           x.strides()[0], x.strides()[1], x.strides()[2]};
  return rows_absmax("row_absmax", dev, v).reshape({x.size(0), x.size(1)});
}

// Zeros from the device's scratch arena: one fill serves a step's operands (a fill each cost 1.2 ms a step).
DerivedValue operand_maxima_scratch(DeviceImpl& dev, int64_t floats) {
  return dev.zeroed_scratch(floats, [](const std::shared_ptr<Storage>& s) {
    ops::fill_(Tensor(s, {static_cast<int64_t>(s->bytes / 4)}, {1}, 0, DType::F32), 0.0);
  });
}

void remember_operand_maxima(const Tensor& x, int64_t rows, int64_t cols, const DerivedValue& at) {
  if (!x.is_contiguous() || x.numel() != rows * cols)
    throw Error("remember_operand_maxima: the maxima are of a contiguous matrix of " + std::to_string(rows) + " x " +
                std::to_string(cols) + " elements");
  const AbsmaxView v = view_of(x, 1, rows, cols, 0, cols, 1);
  x.device_impl().remember_derived(v.transposed().key(), DerivedValue{at.storage, at.offset + rows});
  x.device_impl().remember_derived(v.key(), at);
}

void row_and_column_absmax_(const Tensor& x, const Tensor& out) {
  check_dtype("row_and_column_absmax", x, "input", {DType::F32});
  check_rank("row_and_column_absmax", x, "input", 2);
  check_dtype("row_and_column_absmax", out, "out", {DType::F32});
  if (!out.is_contiguous() || out.numel() != x.size(0) + x.size(1))
    throw ArgumentError("row_and_column_absmax: out must be contiguous with rows + columns (" +
                         std::to_string(x.size(0) + x.size(1)) + ") elements, got " + std::to_string(out.numel()));
  DeviceImpl& dev = x.device_impl();
  const AbsmaxView v{x.storage()->buffer, x.offset(), 1, x.size(0), x.size(1), 0, x.strides()[0], x.strides()[1]};
  tile_pass("row_and_column_absmax", dev, v, out.storage()->buffer, true, out.offset(), true, out.offset() + v.rows);
}

Tensor row_and_column_absmax(const Tensor& x) {
  check_rank("row_and_column_absmax", x, "input", 2);
  const Tensor out = new_tensor(x.device_impl(), {x.size(0) + x.size(1)}, DType::F32);
  ops::fill_(out, 0.0);
  row_and_column_absmax_(x, out);
  return out;
}

// gemm_sm.wgsl's BM: what the device's gemm_sm_rows forces, else 64 for a product of fewer than 512 blocks of 128
// x 128 that is not split along k, 128 otherwise. Run z5 (H100), the step's products, 128 -> 64 rows: those of 320
// blocks 0.102 -> 0.087 ms (q/o forward), 0.094 -> 0.083 (q/o input gradient), 0.230 -> 0.194 (down forward); those
// of 896 blocks slower (gate/up forward 0.216 -> 0.232, down input gradient 0.213 -> 0.222), as the split weight
// gradients (0.083 -> 0.093, 0.169 -> 0.214) and the head's 4096 blocks (0.905 -> 1.084). Run z6 (H100): the
// mixed step 48.95 and 48.99 ms with 128 rows everywhere, 47.50 and 47.38 with this choice.
static int64_t gemm_sm_rows(const DeviceImpl& dev, int64_t blocks, int64_t splits) {
  if (dev.gemm_sm_rows == 0) return blocks < 512 && splits == 1 ? 64 : kBlock;
  if (dev.gemm_sm_rows != 64 && dev.gemm_sm_rows != 128)
    throw Error("gemm_sm: no block of " + std::to_string(dev.gemm_sm_rows) + " rows (64 or 128)");
  return dev.gemm_sm_rows;
}

void gemm_sm(const char* op, const Tensor& a, const GemmB& gb, int64_t N, const Tensor* bias, const Tensor& c,
             bool accumulate, const Tensor* addend) {
  DeviceImpl& dev = a.device_impl();
  const int64_t batch = a.size(0), M = a.size(1), K = a.size(2);
  if (batch == 0 || M == 0 || N == 0) return;
  if (!c.is_contiguous() || c.numel() != batch * M * N) throw Error(std::string(op) + ": bad output tensor");
  if (addend && (!addend->is_contiguous() || addend->numel() != c.numel() || addend->storage() == c.storage()))
    throw Error(std::string(op) + ": bad addend");
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
  const DerivedValue a_bits =
      operand_absmax(op, dev, view_of(a, batch, M, K, a.strides()[0], a.strides()[1], a.strides()[2]));
  const DerivedValue b_bits =
      f32_b ? operand_absmax(op, dev, view_of(b, batch, N, K, b.strides()[0], b.strides()[2], b.strides()[1]))
            : a_bits;
  p.sa_off = u32(a_bits.offset, "offset");
  p.sb_off = u32(b_bits.offset, "offset");

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
  const int64_t maxz = dev.limits.max_workgroups_per_dim;
  const wgtrain::detail::BufferHandle scales = gb.scales ? gb.scales->storage()->buffer : a.storage()->buffer;
  const wgtrain::detail::BufferHandle bias_buf = bias ? bias->storage()->buffer : a.storage()->buffer;
  const wgtrain::detail::BufferHandle sa_buf = a_bits.storage->buffer, sb_buf = b_bits.storage->buffer;

  // Split-K as in gemm (split_k.h), in chunks that are multiples of the kernel's 32-deep k step, planned on the
  // blocks of 128 x 128; then the block's rows (gemm_sm_rows).
  const int64_t blocks128 = batch * ((N + kBlock - 1) / kBlock) * ((M + kBlock - 1) / kBlock);
  const auto [splits, chunk] = batch == 1 && !bias ? plan_split_k(blocks128, K, dev.split_k, dev.info.software,
                                                                  kDepth, dev.split_target_mixed)
                                                   : SplitK{1, K};
  const int64_t bm = gemm_sm_rows(dev, blocks128, splits);
  const auto& pipe = dev.pipeline(
      "matmul/gemm_sm", gemm_sm_variants()[(bm == 64 ? 27 : 0) + static_cast<int>(gb.mode) * 9 + a_form * 3 + b_form]);
  const uint32_t gx = u32((N + kBlock - 1) / kBlock, "N tiles"), gy = u32((M + bm - 1) / bm, "M tiles");
  // The kernel stores whole 16 x 16 fragments, still scaled: straight into c where none straddles an edge and c's
  // offset keeps them 16-byte aligned, nothing is accumulated and there is one chunk; else into a padded buffer of
  // whole blocks. sm_finish.wgsl then finishes c (scales, bias, chunks, accumulation).
  const bool direct = splits == 1 && !accumulate && M % 16 == 0 && N % 16 == 0 && c.offset() % 4 == 0;
  FinishParams fp{u32(batch * M * N, "output elements"), p.m, p.n, u32(splits, "splits"), 0, 0,
                  u32(c.offset(), "offset"), bias ? u32(bias->offset(), "offset") : 0,
                  (bias ? 1u : 0u) | (accumulate ? 2u : 0u) | (addend ? 4u : 0u) | (p.flags & 48u), p.sa_off,
                  p.sb_off, addend ? u32(addend->offset(), "offset") : 0};
  // 4 outputs a thread where they are whole vec4s of c (and of the padded buffer, whose rows are multiples of 128,
  // and of the addend).
  const bool fv4 = N % 4 == 0 && c.offset() % 4 == 0 && (!addend || addend->offset() % 4 == 0);
  // Without an addend, binding one the finish only reads (never c: a written buffer may not be bound twice).
  const wgtrain::detail::BufferHandle add_buf = addend ? addend->storage()->buffer : sa_buf;
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
    const int64_t rows_p = static_cast<int64_t>(gy) * bm, cols_p = static_cast<int64_t>(gx) * kBlock;
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
                    {{a.storage()->buffer}, {b.storage()->buffer}, {scales}, {padded.storage()->buffer}, {sa_buf},
                     {sb_buf}},
                    gx, gy, static_cast<uint32_t>(std::min(maxz, blocks - z0)), true, kGemmReads});
    }
    fp.cols_p = p.r_sn;
    fp.block = p.r_sb;
    dev.dispatch({finish_name(op), &finish(false), &fp, sizeof fp,
                  {{c.storage()->buffer}, {sa_buf}, {sb_buf}, {bias_buf}, {padded.storage()->buffer}, {add_buf}}, fx,
                  fy, 1, true, kFinishReads});
    return;
  }
  p.r_sn = p.n;
  p.r_sb = u32(M * N, "output elements");
  for (int64_t b0 = 0; b0 < batch; b0 += maxz) {
    p.batch0 = static_cast<uint32_t>(b0);
    const uint32_t gz = static_cast<uint32_t>(std::min(maxz, batch - b0));
    dev.dispatch({op, &pipe, &p, sizeof p,
                  {{a.storage()->buffer}, {b.storage()->buffer}, {scales}, {c.storage()->buffer}, {sa_buf}, {sb_buf}},
                  gx, gy, gz, true, kGemmReads});
  }
  dev.dispatch({finish_name(op), &finish(true), &fp, sizeof fp,
                {{c.storage()->buffer}, {sa_buf}, {sb_buf}, {bias_buf}, {add_buf}}, fx, fy, 1, true, kFinishReads});
}

}  // namespace wgtrain::ops::detail

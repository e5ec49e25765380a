// fused_ce on the native Vulkan backend (count.comp, rows.comp, finish.comp): the twin of fused_ce.cpp.
#include <string>

#include "ops/common.h"
#include "vulkan/context.h"
#include "wgtrain/error.h"
#include "wgtrain/vulkan.h"

namespace wgtrain::vk::ops {

using wgtrain::ops::detail::u32;

CrossEntropy fused_ce(const Tensor& logits, const Tensor& labels, std::optional<int64_t> n_valid, bool in_place) {
  if (!logits.defined() || logits.dtype() != DType::F32 || logits.rank() != 2)
    throw ArgumentError("fused_ce: logits must be float32 [R, V]");
  if (!labels.defined() || labels.dtype() != DType::I32 || labels.rank() != 1)
    throw ArgumentError("fused_ce: labels must be int32 [R]");
  if (&logits.ctx() != &labels.ctx()) throw ArgumentError("fused_ce: inputs live on different devices");
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  if (labels.size(0) != rows)
    throw ArgumentError("fused_ce: " + std::to_string(labels.size(0)) + " labels for " + std::to_string(rows) +
                        " rows of logits");
  if (vocab == 0) throw ArgumentError("fused_ce: logits have no classes");
  if (n_valid && *n_valid < 0)
    throw ArgumentError("fused_ce: n_valid must not be negative, got " + std::to_string(*n_valid));
  detail::Context& ctx = logits.ctx();
  CrossEntropy out;
  out.loss = Tensor(ctx.allocate(4, "fused_ce loss"), {}, DType::F32);
  out.dlogits = in_place ? logits
                         : Tensor(ctx.allocate(static_cast<uint64_t>(rows * vocab) * 4, "dlogits"), {rows, vocab},
                                  DType::F32);
  if (rows == 0) {
    ctx.fill(*out.loss.buffer(), 0, 4, 0u);  // nothing counts: loss 0 (float 0 is all zero bits)
    return out;
  }
  u32(rows * vocab, "logits elements");
  const auto stats = ctx.allocate(16, "fused_ce count");
  const auto row_loss = ctx.allocate(static_cast<uint64_t>(rows) * 4, "fused_ce row losses");
  struct {
    uint32_t rows, labels_off, host_count;
    float host_n_valid;
  } cp{u32(rows, "rows"), u32(labels.offset(), "offset"), n_valid ? 1u : 0u,
       n_valid ? static_cast<float>(*n_valid) : 0.0f};
  ctx.dispatch(ctx.kernel("fused_ce/count", {}, 2, sizeof cp), &cp, {labels.buffer().get(), stats.get()}, 1);
  const auto [gx, gy] = ctx.grid(static_cast<uint64_t>(rows));
  // vec4 rows where every row starts 16-byte aligned; 1024 threads a row where the device allows.
  const bool vec4 = vocab % 4 == 0 && logits.offset() % 4 == 0 && out.dlogits.offset() % 4 == 0;
  const uint32_t unit = vec4 ? 4 : 1;
  const bool wide = ctx.limits.maxComputeWorkGroupInvocations >= 1024 && ctx.limits.maxComputeWorkGroupSize[0] >= 1024;
  struct {
    uint32_t rows, vocab, logits_off, labels_off, out_off, index_bit, row_stride;
  } rp{u32(rows, "rows"),
       u32(vocab / unit, "vocab"),
       u32(logits.offset() / unit, "offset"),
       u32(labels.offset(), "offset"),
       u32(out.dlogits.offset() / unit, "offset"),
       ctx.index_check_bit("fused_ce"),
       gx};
  const std::string variant = std::string("fused_ce/rows_wg") + (wide ? "1024" : "256") + (vec4 ? "_vec4" : "_vec1");
  ctx.dispatch(ctx.kernel(variant, {in_place ? 1u : 0u}, 6, sizeof rp), &rp,
               {logits.buffer().get(), labels.buffer().get(), stats.get(), row_loss.get(), &ctx.index_error_buffer(),
                out.dlogits.buffer().get()},
               gx, gy);
  struct {
    uint32_t rows, loss_off;
  } fp{u32(rows, "rows"), 0};
  ctx.dispatch(ctx.kernel("fused_ce/finish", {}, 3, sizeof fp), &fp,
               {row_loss.get(), stats.get(), out.loss.buffer().get()}, 1);
  return out;
}

}  // namespace wgtrain::vk::ops

// fused_ce: mean cross-entropy over rows whose label is >= 0, and its gradient, in three dispatches (count.wgsl,
// rows.wgsl or split.wgsl, finish.wgsl; split.wgsl's deferred parts in a fourth before finish) that never write the
// probabilities.
#include "wgtrain/fused_ce.h"

#include <array>
#include <string>
#include <utility>

#include "ops/common.h"
#include "ops/fused_ce/fused_ce_force.h"
#include "wgtrain/device.h"
#include "wgtrain/ops.h"

namespace wgtrain::ops {

namespace detail {
int fused_ce_force = kFusedCeChoice;
int fused_ce_force_wg = 0;
uint32_t fused_ce_spin = kFusedCeSpin;
uint32_t fused_ce_defer = 0;
}  // namespace detail

using namespace detail;

namespace {

constexpr int64_t kMaxSplitParts = 64;  // split.wgsl's MAX_PARTS

struct alignas(16) CountParams {
  uint32_t rows, labels_off, host_count;
  float host_n_valid;
};
struct alignas(16) RowParams {
  uint32_t rows, vocab, logits_off, labels_off, out_off, index_bit, reverse, pad1;
};
struct alignas(16) SplitParams {
  uint32_t rows, vocab, logits_off, labels_off, out_off, index_bit, parts, spin, defer, pad0, pad1, pad2;
};
struct alignas(16) DeferredParams {
  uint32_t rows, vocab, logits_off, labels_off, out_off, parts, span, pad0;
};
struct alignas(16) FinishParams {
  uint32_t rows, loss_off, pad0, pad1;
};

// The variant of rows.wgsl for these fields (its @variant lines say what each one means). The table is built once,
// each entry sorted by key as the pipeline cache keeps them: a call only looks its variant up.
const wgtrain::detail::KernelDefs& rows_variant(int64_t wg, bool vec4, bool in_place, int chunks, int unroll) {
  constexpr int kMaxChunks = 8;
  // UNROLL 1, 2, 4 as 0, 1, 2.
  auto index = [](bool wide, bool vec4_, bool in_place_, int chunks_, int unroll_log2) {
    return static_cast<size_t>(
        (((wide ? 4 : 0) + (vec4_ ? 2 : 0) + (in_place_ ? 1 : 0)) * (kMaxChunks + 1) + chunks_) * 3 + unroll_log2);
  };
  static const auto table = [&] {
    std::array<wgtrain::detail::KernelDefs, 8 * (kMaxChunks + 1) * 3> t;
    for (bool wide : {false, true})
      for (bool v : {false, true})
        for (bool ip : {false, true})
          for (int c = 0; c <= kMaxChunks; ++c)
            for (int u = 0; u < 3; ++u)
              t[index(wide, v, ip, c, u)] = {{"CHUNKS", std::to_string(c)},
                                             {"IN_PLACE", ip ? "true" : "false"},
                                             {"UNROLL", std::to_string(1 << u)},
                                             {"VEC4", v ? "true" : "false"},
                                             {"WG", wide ? "1024" : "256"}};
    return t;
  }();
  if (chunks < 0 || chunks > kMaxChunks)
    throw Error("fused_ce: no variant keeps " + std::to_string(chunks) + " chunks in registers");
  if (unroll != 1 && unroll != 2 && unroll != 4)
    throw Error("fused_ce: no variant issues " + std::to_string(unroll) + " loads at once");
  return table[index(wg == 1024, vec4, in_place, chunks, unroll == 4 ? 2 : unroll == 2 ? 1 : 0)];
}

// How a row of n elements (of T) is read with wg threads a workgroup (fused_ce_force.h): by rows.wgsl, the held
// elements a thread (0, 1, 2, 4 or 8), the loads at once in the streamed rest (1, 4; 2 with 8 held) and whether pass
// 2 walks it backwards (the combinations rows.variants compiles for the native backend); or by split.wgsl, `chunks`
// held a thread in each of the row's workgroups.
struct RowSplit {
  int chunks, unroll;
  bool reverse;
  bool split = false;  // split.wgsl: the row over several workgroups, each holding `chunks` a thread
};
// The choice for a row that does not fit in one workgroup: out of place split.wgsl, 8 held a thread (V = 128256 at
// 1024 threads: run z7, H100, WebGPU 82.2% of the copy rate against 72.0% for rows.wgsl holding 8, native Vulkan
// 2821 against 2209 GB/s; run z8, H200, 68.8% against 65.1%, native 3217 against 2860 GB/s); in place rows.wgsl
// holding 8 (z8, H200: 73.0% against 65.5% for split.wgsl in place, native 3133 against 3052 GB/s). Beyond 64
// parts a row, rows.wgsl holding 8.
RowSplit row_split(int64_t n, int64_t wg) {
  const int64_t per_thread = (n + wg - 1) / wg;
  const int fit = per_thread <= 1 ? 1 : per_thread <= 2 ? 2 : per_thread <= 4 ? 4 : per_thread <= 8 ? 8 : 0;
  switch (fused_ce_force) {
    case kFusedCeOld: return {fit, 1, false};
    case kFusedCeStream: return {0, 4, false};
    case kFusedCeStreamReverse: return {0, 4, true};
    case kFusedCeHold8: return fit ? RowSplit{fit, 1, false} : RowSplit{8, 4, true};
    case kFusedCeHold8Unroll2: return fit ? RowSplit{fit, 1, false} : RowSplit{8, 2, true};
    case kFusedCeChoice:
    case kFusedCeSplit: return fit ? RowSplit{fit, 1, false} : RowSplit{8, 1, false, true};
    case kFusedCeSplit2: return n <= 2 * wg ? RowSplit{fit, 1, false} : RowSplit{2, 1, false, true};
    default: throw Error("fused_ce: no rows kernel form " + std::to_string(fused_ce_force));
  }
}

}  // namespace

CrossEntropy fused_ce(const Tensor& logits, const Tensor& labels, std::optional<int64_t> n_valid, bool in_place) {
  check_dtype("fused_ce", logits, "logits", {DType::F32});
  check_dtype("fused_ce", labels, "labels", {DType::I32});
  check_rank("fused_ce", logits, "logits", 2);
  check_rank("fused_ce", labels, "labels", 1);
  check_same_device("fused_ce", logits, labels);
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  if (labels.size(0) != rows)
    throw ArgumentError("fused_ce: " + std::to_string(labels.size(0)) + " labels for " + std::to_string(rows) +
                        " rows of logits");
  if (vocab == 0) throw ArgumentError("fused_ce: logits have no classes");
  if (n_valid && *n_valid < 0)
    throw ArgumentError("fused_ce: n_valid must not be negative, got " + std::to_string(*n_valid));
  // Labels the host wrote are checked here; others by the kernel (a label >= V is reported at the next read-back).
  if (const auto range = host_known_range(labels); range && range->second >= vocab)
    throw ArgumentError("fused_ce: label " + std::to_string(range->second) + " is out of range for " +
                        std::to_string(vocab) + " classes (labels must be < " + std::to_string(vocab) +
                        ", or negative to ignore the row)");
  if (in_place && !logits.is_contiguous())
    throw ArgumentError("fused_ce: in-place gradients need contiguous logits");

  const Tensor x = in_place ? logits : contiguous(logits);
  const Tensor y = contiguous(labels);
  DeviceImpl& dev = x.device_impl();
  CrossEntropy out;
  out.loss = new_tensor(dev, {}, DType::F32);
  out.dlogits = in_place ? x : new_tensor(dev, {rows, vocab}, DType::F32);
  if (rows == 0) {
    out.loss = ops::fill(out.loss, 0.0);  // nothing counts: loss 0, as with every label ignored
    return out;
  }
  const Tensor stats = new_tensor(dev, {4}, DType::F32);
  const Tensor row_loss = new_tensor(dev, {rows}, DType::F32);

  CountParams cp{u32(rows, "rows"), u32(y.offset(), "offset"), n_valid ? 1u : 0u,
                 n_valid ? static_cast<float>(*n_valid) : 0.0f};
  dev.dispatch({"fused_ce (count)", &dev.pipeline("fused_ce/count", {}), &cp, sizeof cp,
                {{y.storage()->buffer}, {stats.storage()->buffer}}, 1, 1, 1});

  // vec4 rows where every row starts 16-byte aligned.
  const bool vec4 = vocab % 4 == 0 && x.offset() % 4 == 0 && out.dlogits.offset() % 4 == 0;
  const uint32_t unit = vec4 ? 4 : 1;
  RowParams rp{u32(rows, "rows"), u32(vocab / unit, "vocab"), u32(x.offset() / unit, "offset"),
               u32(y.offset(), "offset"), u32(out.dlogits.offset() / unit, "offset"), dev.index_check_bit("fused_ce"),
               0, 0};
  u32(rows * vocab, "logits elements");
  const bool wide = dev.limits.max_invocations_per_workgroup >= 1024 && dev.limits.max_workgroup_size_x >= 1024;
  if (fused_ce_force_wg != 0 && fused_ce_force_wg != 256 && (fused_ce_force_wg != 1024 || !wide))
    throw UnsupportedError("fused_ce: " + std::to_string(fused_ce_force_wg) + " threads a row is not available here");
  const int64_t wg = fused_ce_force_wg ? fused_ce_force_wg : wide ? 1024 : 256;
  RowSplit split = row_split(vocab / unit, wg);
  const int64_t parts = split.split ? (vocab / unit + split.chunks * wg - 1) / (split.chunks * wg) : 1;
  // split.wgsl gathers at most 64 parts a row (V up to 64 * 8 * 1024 * 4 at 1024 threads and vec4 rows): beyond,
  // and in place unless forced (row_split's comment), the row holds 8 a thread and streams the rest.
  if (split.split && (parts > kMaxSplitParts || (in_place && fused_ce_force == kFusedCeChoice)))
    split = RowSplit{8, 4, true};
  const auto [gx, gy] = dev.grid(static_cast<uint64_t>(rows * (split.split ? parts : 1)));
  std::vector<wgtrain::detail::Binding> bindings = {{x.storage()->buffer},       {y.storage()->buffer},
                                                    {stats.storage()->buffer},   {row_loss.storage()->buffer},
                                                    {dev.index_error_buffer()}};
  if (split.split) {
    SplitParams sp{rp.rows, rp.vocab, rp.logits_off, rp.labels_off, rp.out_off, rp.index_bit,
                   u32(parts, "parts"), fused_ce_spin, fused_ce_defer, 0, 0, 0};
    u32(rows * parts, "workgroups");
    // The board split.wgsl exchanges the parts' statistics and claims on: zeroed for every dispatch (a recorded
    // step's too).
    Tensor board = new_tensor(dev, {1 + 4 * rows * parts}, DType::I32);
    fill_(board, 0);
    bindings.push_back({board.storage()->buffer});
    if (!in_place) bindings.push_back({out.dlogits.storage()->buffer});
    const char* ip = in_place ? "true" : "false";
    const wgtrain::detail::KernelDefs defs = {{"CHUNKS", std::to_string(split.chunks)},
                                              {"IN_PLACE", ip},
                                              {"VEC4", vec4 ? "true" : "false"},
                                              {"WG", std::to_string(wg)}};
    dev.dispatch({"fused_ce (split rows)", &dev.pipeline("fused_ce/split", defs), &sp, sizeof sp, bindings, gx, gy,
                  1});
    // The parts split.wgsl deferred (none where every wait ended in time): most workgroups read one word and leave.
    DeferredParams dp{rp.rows, rp.vocab, rp.logits_off, rp.labels_off, rp.out_off, sp.parts,
                      u32(split.chunks * wg, "span"), 0};
    // split.wgsl's bindings without index_error: logits, labels, stats, row_loss, board (, dlogits).
    std::vector<wgtrain::detail::Binding> deferred = bindings;
    deferred.erase(deferred.begin() + 4);
    dev.dispatch({"fused_ce (deferred parts)",
                  &dev.pipeline("fused_ce/split_deferred", {{"IN_PLACE", ip}, {"VEC4", vec4 ? "true" : "false"}}), &dp,
                  sizeof dp, deferred, gx, gy, 1});
  } else {
    rp.reverse = split.reverse ? 1 : 0;
    const auto& rows_pipe = dev.pipeline("fused_ce/rows", rows_variant(wg, vec4, in_place, split.chunks, split.unroll));
    if (!in_place) bindings.push_back({out.dlogits.storage()->buffer});
    dev.dispatch({"fused_ce", &rows_pipe, &rp, sizeof rp, bindings, gx, gy, 1});
  }

  FinishParams fp{u32(rows, "rows"), u32(out.loss.offset(), "offset"), 0, 0};
  dev.dispatch({"fused_ce (loss)", &dev.pipeline("fused_ce/finish", {}), &fp, sizeof fp,
                {{row_loss.storage()->buffer}, {stats.storage()->buffer}, {out.loss.storage()->buffer}}, 1, 1, 1});
  return out;
}

namespace detail {

void register_fused_ce_ops(Registry& r) {
  OpSchema s;
  s.name = "fused_ce";
  s.family = "fused_ce";
  s.backends = {"webgpu", "native-vulkan"};
  s.summary = "mean cross-entropy of logits[R, V] against labels[R] (label < 0 ignored), and dlogits";
  s.inputs = {"logits", "labels"};
  s.args = {{"n_valid", "int", "", "rows to average over (default: the count of labels >= 0)"}};
  s.outputs = {"loss", "dlogits"};
  s.dtypes = {DType::F32};
  s.min_rank = 1;
  s.max_rank = 2;
  s.training_only = true;
  s.constraints = {"labels int32 [R], each < V", "dlogits = (softmax - onehot) / n_valid, 0 on ignored rows",
                   "loss 0 and dlogits 0 when n_valid is 0"};
  s.run = [](Device&, const OpTensors& in, const OpArgs& args) {
    std::optional<int64_t> n;
    if (args.has("n_valid")) n = args.get_int("n_valid", 0);
    CrossEntropy ce = fused_ce(input(in, "logits"), input(in, "labels"), n, false);
    return OpTensors{{"loss", ce.loss}, {"dlogits", ce.dlogits}};
  };
  r.add(std::move(s));
}

}  // namespace detail
}  // namespace wgtrain::ops

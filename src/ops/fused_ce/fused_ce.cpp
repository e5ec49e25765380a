// fused_ce: mean cross-entropy over rows whose label is >= 0, and its gradient, in three dispatches
// (count.wgsl, rows.wgsl, finish.wgsl) that never write the probabilities.
#include "wgtrain/fused_ce.h"

#include <string>
#include <utility>

#include "ops/common.h"
#include "wgtrain/device.h"
#include "wgtrain/ops.h"

namespace wgtrain::ops {

using namespace detail;

namespace {

struct alignas(16) CountParams {
  uint32_t rows, labels_off, host_count;
  float host_n_valid;
};
struct alignas(16) RowParams {
  uint32_t rows, vocab, logits_off, labels_off, out_off, index_bit, pad0, pad1;
};
struct alignas(16) FinishParams {
  uint32_t rows, loss_off, pad0, pad1;
};

// The two passes of rows.wgsl. Streaming: any V, the row read twice. Cached: each thread holds its `chunks` values
// (x0, x1, ...) in registers between the passes, so the logits are read once; written out in full since a private
// array indexed by a loop counter may not stay in registers.
std::pair<std::string, std::string> row_passes(int chunks) {
  if (chunks == 0)
    return {"  var m = LOWEST;\n"
            "  var s = 0.0;\n"
            "  for (var j = t; j < p.vocab; j = j + WG) {\n"
            "    let x = logits[base + j];\n"
            "    let mx = max(m, hmax(x));\n"
            "    s = s * exp(m - mx) + hsum(exp(x - mx));\n"
            "    m = mx;\n"
            "  }\n",
            "  for (var j = t; j < p.vocab; j = j + WG) {\n"
            "    let x = logits[base + j];\n"
            "    store_d(out_base + j, exp(x - row_max) * scale - onehot(j, u32(label)) * inv_n);\n"
            "  }\n"};
  std::string p1 = "  var m = LOWEST;\n  var s = 0.0;\n", p2;
  for (int c = 0; c < chunks; ++c) {
    const std::string i = std::to_string(c), j = "j" + i, x = "x" + i;
    p1 += "  let " + j + " = t + " + i + "u * WG;\n  var " + x + " = T(LOWEST);\n  if (" + j + " < p.vocab) { " + x +
          " = logits[base + " + j + "]; }\n  m = max(m, hmax(" + x + "));\n";
  }
  for (int c = 0; c < chunks; ++c) {
    const std::string i = std::to_string(c);
    p1 += "  if (j" + i + " < p.vocab) { s = s + hsum(exp(x" + i + " - m)); }\n";
    p2 += "  if (j" + i + " < p.vocab) { store_d(out_base + j" + i + ", exp(x" + i +
          " - row_max) * scale - onehot(j" + i + ", u32(label)) * inv_n); }\n";
  }
  return {p1, p2};
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
  const char* helpers =
      vec4 ? "const LANES: u32 = 4u;\n"
             "fn hmax(v: T) -> f32 { return max(max(v.x, v.y), max(v.z, v.w)); }\n"
             "fn hsum(v: T) -> f32 { return (v.x + v.y) + (v.z + v.w); }\n"
             "fn lane(v: T, i: u32) -> f32 { return v[i]; }\n"
             "fn onehot(j: u32, label: u32) -> T {\n"
             "  return select(vec4<f32>(0.0), vec4<f32>(1.0),\n"
             "                vec4<u32>(4u * j) + vec4<u32>(0u, 1u, 2u, 3u) == vec4<u32>(label));\n"
             "}\n"
           : "const LANES: u32 = 1u;\n"
             "fn hmax(v: T) -> f32 { return v; }\n"
             "fn hsum(v: T) -> f32 { return v; }\n"
             "fn lane(v: T, i: u32) -> f32 { return v; }\n"
             "fn onehot(j: u32, label: u32) -> T { return select(0.0, 1.0, j == label); }\n";
  const std::string dlogits_decl =
      in_place ? "fn store_d(i: u32, v: T) { logits[i] = v; }"
               : "@group(0) @binding(6) var<storage, read_write> dlogits: array<T>;\n"
                 "fn store_d(i: u32, v: T) { dlogits[i] = v; }";
  const bool wide = dev.limits.max_invocations_per_workgroup >= 1024 && dev.limits.max_workgroup_size_x >= 1024;
  const int64_t wg = wide ? 1024 : 256;
  const int64_t per_thread = (vocab / unit + wg - 1) / wg;
  const auto [pass1, pass2] = row_passes(per_thread <= 8 ? static_cast<int>(per_thread) : 0);
  const wgtrain::detail::KernelDefs defs = {{"LOGITS_ACCESS", in_place ? "read_write" : "read"},
                                            {"WG", std::to_string(wg)},
                                            {"PASS1", pass1},
                                            {"PASS2", pass2},
                                            {"T", vec4 ? "vec4<f32>" : "f32"},
                                            {"VEC_HELPERS", helpers},
                                            {"DLOGITS_DECL", dlogits_decl}};
  const auto& rows_pipe = dev.pipeline("fused_ce/rows", defs);
  const auto [gx, gy] = dev.grid(static_cast<uint64_t>(rows));
  std::vector<wgtrain::detail::Binding> bindings = {{x.storage()->buffer},       {y.storage()->buffer},
                                   {stats.storage()->buffer},   {row_loss.storage()->buffer},
                                   {dev.index_error_buffer()}};
  if (!in_place) bindings.push_back({out.dlogits.storage()->buffer});
  dev.dispatch({"fused_ce", &rows_pipe, &rp, sizeof rp, bindings, gx, gy, 1});

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

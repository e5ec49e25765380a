// sum and mean over any set of dims (reduce.wgsl).
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/common.h"
#include "wgtrain/device.h"
#include "wgtrain/ops.h"

namespace wgtrain::ops {

using namespace detail;

namespace {

struct alignas(16) ReduceParams {
  uint32_t n_out, count, parts, chunk;
  uint32_t x_off, kept_rank, red_rank;
  float scale;
  uint32_t out_off, accumulate, pad0, pad1;
  U32x8 kept_shape, kept_strides, red_shape, red_strides;
};
static_assert(sizeof(ReduceParams) == 176);

// Reductions no longer than this run one thread per output.
constexpr int64_t kPerThreadMax = 64;
// Elements one workgroup sums before the work is split into parts (so few outputs still fill the GPU).
constexpr int64_t kChunk = 4096;
// Sums over rows (outputs contiguous in x): threads to aim for, and the fewest rows a thread sums.
constexpr int64_t kColumnThreads = int64_t{1} << 17;
constexpr int64_t kColumnRows = 32;

// Sums `x` (kept dims, then reduced dims, as given) into a new contiguous [n_out] tensor, times scale; or, with
// `into` (contiguous, n_out elements), into that tensor, added to what it holds where `accumulate`. Only the last
// dispatch writes there: the parts before it go to a new tensor.
Tensor reduce_core(DeviceImpl& dev, const char* op, const Tensor& x, const Shape& kept_shape,
                   const Shape& kept_strides, const Shape& red_shape, const Shape& red_strides, float scale,
                   const Tensor* into = nullptr, bool accumulate = false) {
  const Coalesced k = coalesce(kept_shape, {kept_strides});
  const Coalesced r = coalesce(red_shape, {red_strides});
  const int64_t n_out = numel(kept_shape), count = numel(red_shape);
  ReduceParams p{};
  p.n_out = u32(n_out, "outputs");
  p.count = u32(count, "reduced elements");
  p.x_off = u32(x.offset(), "offset");
  p.kept_rank = static_cast<uint32_t>(k.shape.size());
  p.red_rank = static_cast<uint32_t>(r.shape.size());
  fill_u32x8(p.kept_shape, k.shape, op);
  fill_u32x8(p.kept_strides, k.strides[0], op);
  fill_u32x8(p.red_shape, r.shape, op);
  fill_u32x8(p.red_strides, r.strides[0], op);

  // Where the last dispatch writes: `into`, or a new tensor.
  const auto last_out = [&]() {
    if (!into) return new_tensor(dev, {n_out}, DType::F32);
    p.out_off = u32(into->offset(), "offset");
    p.accumulate = accumulate ? 1u : 0u;
    return *into;
  };
  if (count <= kPerThreadMax) {
    p.parts = 1;
    p.chunk = p.count;
    p.scale = scale;
    Tensor out = last_out();
    const auto& pipe = dev.pipeline("reduce/reduce", {{"PER_THREAD", "true"}, {"COLUMNS", "false"}, {"SEG", "1"}});
    const auto [gx, gy] = dev.grid((static_cast<uint64_t>(n_out) + 255) / 256);
    dev.dispatch({op, &pipe, &p, sizeof p, {{x.storage()->buffer}, {out.storage()->buffer}}, gx, gy, 1});
    return out;
  }

  if (k.shape.size() == 1 && k.strides[0][0] == 1) {
    // Outputs side by side in x (a sum over rows): one thread per (output, part), parts enough for about
    // kColumnThreads threads, each part at least kColumnRows rows; the parts [parts, n_out] are summed the same way.
    const int64_t want = std::clamp<int64_t>(kColumnThreads / n_out, 1, std::max<int64_t>(1, count / kColumnRows));
    const int64_t chunk = (count + want - 1) / want, parts = (count + chunk - 1) / chunk;
    p.parts = u32(parts, "parts");
    p.chunk = u32(chunk, "chunk");
    p.scale = parts == 1 ? scale : 1.0f;
    Tensor out = parts == 1 ? last_out() : new_tensor(dev, {parts * n_out}, DType::F32);
    const auto& pipe = dev.pipeline("reduce/reduce", {{"PER_THREAD", "false"}, {"COLUMNS", "true"}, {"SEG", "1"}});
    const auto [gx, gy] = dev.grid(static_cast<uint64_t>((n_out + 255) / 256 * parts));
    dev.dispatch({op, &pipe, &p, sizeof p, {{x.storage()->buffer}, {out.storage()->buffer}}, gx, gy, 1});
    if (parts == 1) return out;
    return reduce_core(dev, op, out, {n_out}, {1}, {parts}, {n_out}, scale, into, accumulate);
  }

  // Split long reductions when there are too few outputs to keep the device busy on their own.
  int64_t parts = 1;
  if (count > kChunk && n_out < 4096) parts = std::min<int64_t>((count + kChunk - 1) / kChunk, 4096);
  const int64_t chunk = (count + parts - 1) / parts;
  parts = (count + chunk - 1) / chunk;
  p.parts = u32(parts, "parts");
  p.chunk = u32(chunk, "chunk");
  p.scale = parts == 1 ? scale : 1.0f;
  Tensor out = parts == 1 ? last_out() : new_tensor(dev, {n_out * parts}, DType::F32);
  const uint32_t seg = row_segment(chunk);
  const auto& pipe = dev.pipeline("reduce/reduce", {{"PER_THREAD", "false"}, {"COLUMNS", "false"}, {"SEG", std::to_string(seg)}});
  const auto [gx, gy] = row_grid(dev, n_out * parts, seg);
  dev.dispatch({op, &pipe, &p, sizeof p, {{x.storage()->buffer}, {out.storage()->buffer}}, gx, gy, 1});
  if (parts == 1) return out;
  // Second stage: the parts of each output are contiguous.
  return reduce_core(dev, op, out, {n_out}, {parts}, {parts}, {1}, scale, into, accumulate);
}

Tensor reduce_impl(const char* op, const Tensor& x, const std::vector<int>& dims, bool keepdim, bool mean) {
  check_dtype(op, x, "self", {DType::F32});
  const int rank = x.rank();
  std::vector<bool> reduced(rank, dims.empty());
  for (int d : dims) {
    const int nd = normalize_dim(d, rank);
    if (rank > 0 && reduced[nd]) throw ArgumentError(std::string(op) + ": dim " + std::to_string(d) + " repeated");
    if (rank > 0) reduced[nd] = true;
  }
  Shape kept_shape, kept_strides, red_shape, red_strides, out_shape;
  for (int i = 0; i < rank; ++i) {
    if (reduced[i]) {
      red_shape.push_back(x.size(i));
      red_strides.push_back(x.strides()[i]);
      if (keepdim) out_shape.push_back(1);
    } else {
      kept_shape.push_back(x.size(i));
      kept_strides.push_back(x.strides()[i]);
      out_shape.push_back(x.size(i));
    }
  }
  const int64_t count = numel(red_shape);
  DeviceImpl& dev = x.device_impl();
  if (numel(kept_shape) == 0) return new_tensor(dev, out_shape, DType::F32);
  // mean over nothing is 0/0 = NaN, as in PyTorch; the kernel's empty sum times this scale gives exactly that.
  const float scale = mean ? (count == 0 ? std::numeric_limits<float>::quiet_NaN() : 1.0f / static_cast<float>(count))
                           : 1.0f;
  Tensor flat = reduce_core(dev, op, x, kept_shape, kept_strides, red_shape, red_strides, scale);
  return flat.reshape(out_shape);
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int>& dims, bool keepdim) {
  return reduce_impl("sum", x, dims, keepdim, false);
}
Tensor mean(const Tensor& x, const std::vector<int>& dims, bool keepdim) {
  return reduce_impl("mean", x, dims, keepdim, true);
}

namespace detail {

void sum_rows_into(const char* op, const Tensor& x, const Tensor& into, bool accumulate) {
  check_dtype(op, x, "input", {DType::F32});
  check_dtype(op, into, "into", {DType::F32});
  check_same_device(op, x, into);
  if (x.rank() != 2 || into.rank() != 1 || into.size(0) != x.size(1) || !into.is_contiguous())
    throw ArgumentError(std::string(op) + ": a sum over the rows of " + shape_str(x.shape()) +
                        " goes into a contiguous [" + std::to_string(x.rank() == 2 ? x.size(1) : 0) + "], got " +
                        shape_str(into.shape()) + (into.is_contiguous() ? "" : " (not contiguous)"));
  // A read and a write binding of one buffer may not meet in a dispatch.
  if (x.storage() == into.storage())
    throw ArgumentError(std::string(op) + ": the sum's input and its destination share a buffer");
  if (x.size(1) == 0) return;
  if (x.size(0) == 0) {
    if (!accumulate) ops::fill_(into, 0.0);
    return;
  }
  reduce_core(x.device_impl(), op, x, {x.size(1)}, {x.strides()[1]}, {x.size(0)}, {x.strides()[0]}, 1.0f, &into,
              accumulate);
}

void register_reduce_ops(Registry& r) {
  for (bool is_mean : {false, true}) {
    OpSchema s;
    s.name = is_mean ? "mean" : "sum";
    s.family = "reduce";
    s.summary = is_mean ? "mean over dims" : "sum over dims";
    s.inputs = {"self"};
    s.args = {{"dim", "int[]", "", "dims to reduce, comma-separated (empty: all)"},
              {"keepdim", "bool", "false", "keep reduced dims as size 1"}};
    s.outputs = {"out"};
    s.dtypes = {DType::F32};
    s.constraints = {"dims distinct and in [-rank, rank)"};
    if (is_mean) s.constraints.push_back("mean over zero elements is NaN");
    s.run = [is_mean](Device&, const OpTensors& in, const OpArgs& args) {
      const auto dims = to_int_dims(args.get_int_list("dim", {}));
      const bool keep = args.get_bool("keepdim", false);
      return OpTensors{{"out", is_mean ? mean(input(in, "self"), dims, keep) : sum(input(in, "self"), dims, keep)}};
    };
    r.add(std::move(s));
  }
}

}  // namespace detail
}  // namespace wgtrain::ops

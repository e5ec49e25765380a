// gather(input, dim, index) and embedding(weight, indices), both through gather.wgsl; embedding_backward, the
// gradient of embedding with respect to its weight, through embedding_backward.wgsl.
// Index safety, twice over: where the host knows an index tensor's values (uploaded from the host), a bad index is
// an ArgumentError before any dispatch; the kernel never reads out of bounds regardless, and reports any index it
// had to refuse at the next read-back (DeviceImpl::index_check_bit).
#include "ops/elementwise/map.h"
#include "wgtrain/device.h"
#include "wgtrain/ops.h"

namespace wgtrain::ops {

using namespace detail;

namespace {

// Throws when the host knows the index tensor holds a value outside [0, size). Only values the view can reach are
// judged: a view of part of an uploaded tensor is left to the kernel's check.
void check_known_indices(const char* op, const Tensor& index, int64_t size, const char* what) {
  const auto range = host_known_range(index);
  if (!range) return;
  const auto [lo, hi] = *range;
  if (lo >= 0 && hi < size) return;
  const int32_t bad = lo < 0 ? lo : hi;
  throw ArgumentError(std::string(op) + ": index " + std::to_string(bad) + " is out of range for " + what + " of " +
                      std::to_string(size) + " (indices must be in [0, " + std::to_string(size) + "))");
}

// index: a view of out's shape; input_view: input with its dim stride zeroed and shape set to out's.
Tensor run_gather(const char* op, const Tensor& input, int dim, const Tensor& index_view, const Tensor& input_view) {
  DeviceImpl& dev = input.device_impl();
  const Shape& shape = index_view.shape();
  Tensor out = new_tensor(dev, shape, input.dtype());
  if (numel(shape) == 0) return out;
  // Operand 0 the index view, operand 1 the input view; the dense fast path never applies (the input is strided).
  StridedParams p = strided_params(shape, {&index_view, &input_view}, op);
  p.dense = 0;
  p.iscalar[0] = static_cast<int32_t>(u32(input.size(dim), "indexed dim"));
  p.iscalar[1] = static_cast<int32_t>(u32(input.strides()[dim], "stride"));
  if (input.size(dim) > INT32_MAX) throw ArgumentError(std::string(op) + ": indexed dim too large");
  p.flags = dev.index_check_bit(op);
  const auto& pipe = dev.pipeline("gather/gather", {{"T", wgsl_type(input.dtype())}});
  const auto [gx, gy] = dev.grid((static_cast<uint64_t>(p.n) + 255) / 256);
  dev.dispatch({op, &pipe, &p, sizeof p,
                {{index_view.storage()->buffer}, {input.storage()->buffer}, {out.storage()->buffer},
                 {dev.index_error_buffer()}},
                gx, gy, 1});
  return out;
}

}  // namespace

Tensor gather(const Tensor& input, int dim, const Tensor& index) {
  check_defined("gather", input, "self");
  check_dtype("gather", index, "index", {DType::I32});
  check_same_device("gather", input, index);
  if (input.rank() == 0) throw ArgumentError("gather: self must have at least 1 dim");
  const int d = normalize_dim(dim, input.rank());
  if (index.rank() != input.rank())
    throw ArgumentError("gather: index " + shape_str(index.shape()) + " must have the rank of self " +
                        shape_str(input.shape()));
  for (int k = 0; k < input.rank(); ++k)
    if (k != d && index.size(k) > input.size(k))
      throw ArgumentError("gather: index " + shape_str(index.shape()) + " is larger than self " +
                          shape_str(input.shape()) + " in dim " + std::to_string(k));
  check_known_indices("gather", index, input.size(d), "a dim");
  Shape strides = input.strides();
  strides[d] = 0;
  const Tensor input_view(input.storage(), index.shape(), strides, input.offset(), input.dtype());
  return run_gather("gather", input, d, index, input_view);
}

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  check_dtype("embedding", weight, "weight", {DType::F32, DType::I32});
  check_dtype("embedding", indices, "indices", {DType::I32});
  check_same_device("embedding", weight, indices);
  check_rank("embedding", weight, "weight", 2);
  check_known_indices("embedding", indices, weight.size(0), "a weight of rows");
  const int64_t D = weight.size(1);
  Shape out_shape = indices.shape();
  out_shape.push_back(D);
  // indices broadcast along the embedding dim; weight walks its columns.
  const Tensor idx_view = indices.unsqueeze(-1).expand(out_shape);
  Shape w_strides(out_shape.size(), 0);
  w_strides.back() = weight.strides()[1];
  const Tensor w_view(weight.storage(), out_shape, w_strides, weight.offset(), weight.dtype());
  return run_gather("embedding", weight, 0, idx_view, w_view);
}

Tensor embedding_backward(const Tensor& grad, const Tensor& indices, int64_t num_weights) {
  check_dtype("embedding_backward", grad, "grad_output", {DType::F32});
  check_dtype("embedding_backward", indices, "indices", {DType::I32});
  check_same_device("embedding_backward", grad, indices);
  if (num_weights <= 0)
    throw ArgumentError("embedding_backward: num_weights must be positive, got " + std::to_string(num_weights));
  const Shape lead(grad.shape().begin(), grad.shape().end() - (grad.rank() ? 1 : 0));
  if (grad.rank() != indices.rank() + 1 || lead != indices.shape())
    throw ArgumentError("embedding_backward: grad_output " + shape_str(grad.shape()) + " must be indices' shape " +
                        shape_str(indices.shape()) + " plus the embedding dim");
  check_known_indices("embedding_backward", indices, num_weights, "a weight of rows");
  const int64_t D = grad.size(-1), M = indices.numel();
  DeviceImpl& dev = grad.device_impl();
  Tensor out = new_tensor(dev, {num_weights, D}, DType::F32);
  if (D == 0) return out;
  const Tensor g = contiguous(grad), idx = contiguous(indices);
  // Which rows some position names (and a check of every index), then the sums, rows no position names as zeros.
  const Tensor present = new_tensor(dev, {num_weights}, DType::I32);
  ops::fill_(present, 0.0);
  struct alignas(16) PresentParams {
    uint32_t rows, num_weights, index_bit, index_off;
  } pp{u32(M, "indices"), u32(num_weights, "num_weights"), dev.index_check_bit("embedding_backward"),
       u32(idx.offset(), "offset")};
  if (M > 0) {
    const auto [px, py] = dev.grid((static_cast<uint64_t>(M) + 255) / 256);
    dev.dispatch({"embedding_backward", &dev.pipeline("gather/embedding_present", {}), &pp, sizeof pp,
                  {{idx.storage()->buffer}, {present.storage()->buffer}, {dev.index_error_buffer()}}, px, py, 1});
  }
  struct alignas(16) Params {
    uint32_t rows, dim, num_weights, pad2, grad_off, index_off, pad0, pad1;
  } p{u32(M, "indices"), u32(D, "embedding dim"), u32(num_weights, "num_weights"), 0,
      u32(g.offset(), "offset"), u32(idx.offset(), "offset"), 0, 0};
  u32(num_weights * D, "weight elements");
  const auto [gx, gz] = dev.grid(static_cast<uint64_t>(num_weights));
  constexpr int64_t kColumns = 256 * 4;  // embedding_backward.wgsl's WG * COLS columns a workgroup
  const uint32_t gy = u32((D + kColumns - 1) / kColumns, "column blocks");
  dev.dispatch({"embedding_backward", &dev.pipeline("gather/embedding_backward", {}), &p, sizeof p,
                {{g.storage()->buffer}, {idx.storage()->buffer}, {out.storage()->buffer}, {present.storage()->buffer}},
                gx, gy, gz});
  return out;
}

namespace detail {

void register_gather_ops(Registry& r) {
  OpSchema g;
  g.name = "gather";
  g.family = "gather";
  g.summary = "out[i][j] = self[index[i][j]][j] (dim 0; likewise for any dim)";
  g.inputs = {"self", "index"};
  g.args = {{"dim", "int", "0", ""}};
  g.outputs = {"out"};
  g.dtypes = {DType::F32, DType::I32, DType::Bool};
  g.min_rank = 1;
  g.constraints = {"index is int32 with self's rank", "index.size(d) <= self.size(d) for d != dim",
                   "0 <= index < self.size(dim)"};
  g.run = [](Device&, const OpTensors& in, const OpArgs& args) {
    return OpTensors{{"out", gather(input(in, "self"), static_cast<int>(args.get_int("dim", 0)), input(in, "index"))}};
  };
  r.add(std::move(g));

  OpSchema e;
  e.name = "embedding";
  e.family = "gather";
  e.summary = "rows of weight[V, D] picked by indices[...] -> [..., D]";
  e.inputs = {"weight", "indices"};
  e.outputs = {"out"};
  e.dtypes = {DType::F32, DType::I32};
  e.constraints = {"indices are int32 in [0, V)"};
  e.run = [](Device&, const OpTensors& in, const OpArgs&) {
    return OpTensors{{"out", embedding(input(in, "weight"), input(in, "indices"))}};
  };
  r.add(std::move(e));

  OpSchema b;
  b.name = "embedding_backward";
  b.family = "gather";
  b.summary = "out[v] = sum of grad_output[i] over positions i whose index is v, in position order -> [V, D]";
  b.inputs = {"grad_output", "indices"};
  b.args = {{"num_weights", "int", "", "V, the rows of the embedding weight (required)"}};
  b.outputs = {"out"};
  b.dtypes = {DType::F32};
  b.min_rank = 1;
  b.training_only = true;
  b.constraints = {"grad_output is indices' shape plus [D]", "indices are int32 in [0, V)",
                   "deterministic: the same sum order on every run"};
  b.run = [](Device&, const OpTensors& in, const OpArgs& args) {
    if (!args.has("num_weights")) throw ArgumentError("embedding_backward: missing argument num_weights=<V>");
    return OpTensors{{"out", embedding_backward(input(in, "grad_output"), input(in, "indices"),
                                                args.get_int("num_weights", 0))}};
  };
  r.add(std::move(b));
}

}  // namespace detail
}  // namespace wgtrain::ops

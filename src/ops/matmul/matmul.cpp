// mm, bmm and linear: one tiled kernel over strided operands (matmul.wgsl).
#include <algorithm>

#include "ops/common.h"
#include "wgtrain/device.h"
#include "wgtrain/ops.h"

namespace wgtrain::ops {

using namespace detail;

namespace {

struct alignas(16) MatmulParams {
  uint32_t m, n, k, batch0;
  uint32_t a_off, a_sb, a_sm, a_sk;
  uint32_t b_off, b_sb, b_sk, b_sn;
  uint32_t bias_off, has_bias, a_kfast, b_nfast;
};
static_assert(sizeof(MatmulParams) == 64);

// a: [batch, M, K] view, b: [batch, K, N] view (batch strides may be 0), bias: [N] or null. Returns [batch, M, N].
Tensor matmul_core(const char* op, const Tensor& a, const Tensor& b, const Tensor* bias) {
  DeviceImpl& dev = a.device_impl();
  const int64_t batch = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  Tensor c = new_tensor(dev, {batch, M, N}, DType::F32);
  if (batch == 0 || M == 0 || N == 0) return c;
  MatmulParams p{};
  p.m = u32(M, "M");
  p.n = u32(N, "N");
  p.k = u32(K, "K");
  p.a_off = u32(a.offset(), "offset");
  p.a_sb = u32(a.strides()[0], "stride");
  p.a_sm = u32(a.strides()[1], "stride");
  p.a_sk = u32(a.strides()[2], "stride");
  p.b_off = u32(b.offset(), "offset");
  p.b_sb = u32(b.strides()[0], "stride");
  p.b_sk = u32(b.strides()[1], "stride");
  p.b_sn = u32(b.strides()[2], "stride");
  p.has_bias = bias ? 1 : 0;
  p.bias_off = bias ? u32(bias->offset(), "offset") : 0;
  p.a_kfast = (K == 1 || a.strides()[2] == 1) ? 1 : 0;
  p.b_nfast = (N == 1 || b.strides()[2] == 1) ? 1 : 0;
  u32(batch * M * N, "output elements");

  const auto& pipe = dev.pipeline("matmul/matmul", {});
  const uint32_t gx = u32((N + 63) / 64, "N tiles"), gy = u32((M + 63) / 64, "M tiles");
  const int64_t maxz = dev.limits.max_workgroups_per_dim;
  const Tensor& bias_t = bias ? *bias : a;  // an unused binding still needs a buffer
  for (int64_t b0 = 0; b0 < batch; b0 += maxz) {
    p.batch0 = static_cast<uint32_t>(b0);
    const uint32_t gz = static_cast<uint32_t>(std::min(maxz, batch - b0));
    dev.dispatch({op, &pipe, &p, sizeof p,
                  {{a.storage()->buffer}, {b.storage()->buffer}, {bias_t.storage()->buffer}, {c.storage()->buffer}},
                  gx, gy, gz});
  }
  return c;
}

}  // namespace

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

// The q4gsw ops on the native Vulkan backend (matmul/gemm.comp, requant.comp, scales.comp): the twins of
// q4gsw.cpp, with the same checks and semantics (README.md beside this file).
#include <string>

#include "ops/matmul/gemm_vulkan.h"
#include "ops/common.h"
#include "wgtrain/error.h"
#include "wgtrain/q4gsw.h"
#include "wgtrain/vulkan.h"

namespace wgtrain::vk {

using detail::GemmOperand;
using detail::GemmQ4;

namespace {

using wgtrain::ops::detail::u32;

void check_f32(const char* op, const Tensor& t, const char* name) {
  if (!t.defined()) throw ArgumentError(std::string(op) + ": '" + name + "' is an undefined tensor");
  if (t.dtype() != DType::F32)
    throw ArgumentError(std::string(op) + ": '" + name + "' is " + dtype_name(t.dtype()) + ", expected float32");
}

void check_weight(const char* op, const Q4Weight& w) {
  if (!w.codes.defined() || !w.scales.defined()) throw ArgumentError(std::string(op) + ": the weight is undefined");
  if (w.codes.dtype() != DType::I32 || w.scales.dtype() != DType::F32)
    throw ArgumentError(std::string(op) + ": codes must be int32 words [N, ceil(K/8)], scales float32 [groups, N]");
  q4gsw::check_layout(op, w.codes.shape(), w.scales.shape(), w.in_features, w.group_size);
  if (w.codes.offset() || w.scales.offset())
    throw ArgumentError(std::string(op) + ": codes and scales must be whole tensors");
}

int64_t rows_of(const Tensor& t) { return t.rank() ? t.numel() / t.size(-1) : 1; }

// The forward (mode 1) and the input gradient (mode 2): rows of `in` ([..., in_f]) times the weight.
Tensor q4_gemm(const char* op, const char* in_name, const Tensor& in, const Q4Weight& w, uint32_t mode, int64_t in_f,
               int64_t out_f) {
  check_weight(op, w);
  check_f32(op, in, in_name);
  if (&in.ctx() != &w.codes.ctx()) throw ArgumentError(std::string(op) + ": inputs live on different devices");
  if (in.rank() < 1 || in.size(-1) != in_f)
    throw ArgumentError(std::string(op) + ": " + in_name + " " + shape_str(in.shape()) + " needs " +
                        std::to_string(in_f) + " features in its last dim");
  const int64_t M = rows_of(in);
  Shape out_shape = in.shape();
  out_shape.back() = out_f;
  detail::Context& ctx = in.ctx();
  Tensor out(ctx.allocate(static_cast<uint64_t>(M * out_f) * 4, std::string(op) + " output"), out_shape, DType::F32);
  GemmQ4 q{mode, w.scales.buffer().get(), w.codes.size(1), w.out_features(), w.group_size};
  detail::gemm(ctx, {in.buffer().get(), in.offset(), in_f, 1}, {w.codes.buffer().get(), 0, 0, 0}, q, M, out_f,
               in_f, *out.buffer(), 0, false);
  return out;
}

struct RequantPush {
  uint32_t rows, k, words, group_size, latent_off, row;
};

}  // namespace

Q4Weight upload_q4(Device& device, std::span<const uint8_t> bytes, std::span<const float> scales, int64_t n,
                   int64_t k, int64_t group_size) {
  if (group_size <= 0 || group_size % 8)
    throw ArgumentError("q4gsw: group_size must be a positive multiple of 8 (32, 64, 128), got " +
                        std::to_string(group_size));
  const int64_t g = q4gsw::groups(k, group_size);
  if (static_cast<int64_t>(scales.size()) != g * n)
    throw ArgumentError("q4gsw: " + std::to_string(scales.size()) + " scales given, [" + std::to_string(g) + ", " +
                        std::to_string(n) + "] needed");
  const auto words = q4gsw::pack_bytes(bytes, n, k);
  Q4Weight w;
  w.codes = Tensor::from_host(device, {n, q4gsw::words_per_row(k)}, words);
  w.scales = Tensor::from_host(device, {g, n}, scales);
  w.in_features = k;
  w.group_size = group_size;
  return w;
}

std::vector<uint8_t> download_q4_bytes(const Q4Weight& w) {
  return q4gsw::unpack_words(w.codes.to_host_i32(), w.out_features(), w.in_features);
}

namespace ops {

Tensor linear_q4gsw(const Tensor& x, const Q4Weight& w) {
  return q4_gemm("linear_q4gsw", "input", x, w, 1, w.in_features, w.out_features());
}

Tensor linear_q4gsw_backward(const Tensor& dy, const Q4Weight& w) {
  return q4_gemm("linear_q4gsw_backward", "grad_output", dy, w, 2, w.out_features(), w.in_features);
}

Tensor linear_dW(const Tensor& dy, const Tensor& x, const Tensor* accumulate_into) {
  const char* op = "linear_dW";
  check_f32(op, dy, "grad_output");
  check_f32(op, x, "input");
  if (&dy.ctx() != &x.ctx()) throw ArgumentError("linear_dW: inputs live on different devices");
  if (dy.rank() < 1 || x.rank() < 1) throw ArgumentError("linear_dW: inputs need at least 1 dim");
  const int64_t M = rows_of(dy);
  if (rows_of(x) != M)
    throw ArgumentError("linear_dW: grad_output " + shape_str(dy.shape()) + " and input " + shape_str(x.shape()) +
                        " have different row counts");
  const int64_t N = dy.size(-1), K = x.size(-1);
  detail::Context& ctx = dy.ctx();
  Tensor dw;
  if (accumulate_into) {
    dw = *accumulate_into;
    check_f32(op, dw, "accumulate_into");
    if (dw.shape() != Shape{N, K})
      throw ArgumentError("linear_dW: accumulate_into must be [" + std::to_string(N) + ", " + std::to_string(K) +
                          "], got " + shape_str(dw.shape()));
    if (dw.buffer() == dy.buffer() || dw.buffer() == x.buffer())
      throw ArgumentError("linear_dW: accumulate_into shares memory with an input");
  } else {
    dw = Tensor(ctx.allocate(static_cast<uint64_t>(N * K) * 4, "linear_dW output"), {N, K}, DType::F32);
  }
  // dW = dy^T x: A = dy^T [N, M] (row stride 1, column stride N), B = x [M, K].
  detail::gemm(ctx, {dy.buffer().get(), dy.offset(), 1, N}, {x.buffer().get(), x.offset(), K, 1}, {}, N, K, M,
               *dw.buffer(), dw.offset(), accumulate_into != nullptr);
  return dw;
}

void q4gsw_requant(const Tensor& latent, Q4Weight& w, bool recompute_scales) {
  const char* op = "q4gsw_requant";
  check_weight(op, w);
  check_f32(op, latent, "latent");
  const int64_t n = w.out_features(), k = w.in_features;
  if (latent.shape() != Shape{n, k})
    throw ArgumentError("q4gsw_requant: latent " + shape_str(latent.shape()) + " should be [" + std::to_string(n) +
                        ", " + std::to_string(k) + "]");
  if (n == 0 || k == 0) return;
  detail::Context& ctx = latent.ctx();
  if (recompute_scales) {
    const auto [gx, gy] = ctx.grid((static_cast<uint64_t>(n * w.scales.size(0)) + 255) / 256);
    RequantPush sp{u32(n, "N"), u32(k, "K"), u32(w.scales.size(0), "groups"), u32(w.group_size, "group size"),
                   u32(latent.offset(), "offset"), gx * 256u};
    ctx.dispatch(ctx.kernel("q4gsw/scales", {}, 2, sizeof sp), &sp, {latent.buffer().get(), w.scales.buffer().get()},
                 gx, gy);
  }
  const auto [gx, gy] = ctx.grid((static_cast<uint64_t>(n * w.codes.size(1)) + 255) / 256);
  RequantPush p{u32(n, "N"), u32(k, "K"), u32(w.codes.size(1), "words"), u32(w.group_size, "group size"),
                u32(latent.offset(), "offset"), gx * 256u};
  ctx.dispatch(ctx.kernel("q4gsw/requant", {}, 3, sizeof p), &p,
               {latent.buffer().get(), w.scales.buffer().get(), w.codes.buffer().get()}, gx, gy);
}

}  // namespace ops
}  // namespace wgtrain::vk

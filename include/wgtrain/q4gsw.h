// 4-bit group-wise symmetric weights (q4gsw) for linear layers, and the ops that train them.
//
// A weight W of a linear with N outputs and K inputs is held as
//   codes:  int4 values q in [-8, 7], stored as q + 8;
//   scales: float32 [ceil(K / group_size), N], one per group of group_size consecutive k (no zero point);
//   W[n][k] = (code[n][k] - 8) * scales[k / group_size][n].
// The exchange layout (as ExecuTorch and safetensors files hold it) is bytes [N, ceil(K / 2)]: two codes per byte,
// even k in the low nibble. On the device the codes are u32 words [N, ceil(K / 8)] (dtype int32 holding the bits),
// nibble j of word w holding k = 8w + j; that is the byte layout read as little-endian words, each row padded to a
// whole word. Padding (k >= K, in a last byte or word) is code 8, a zero weight, so K need not be a multiple of 8.
// group_size must be a multiple of 8 (32, 64 and 128 are the usual ones).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "wgtrain/tensor.h"

namespace wgtrain {

struct Q4Weight {
  Tensor codes;   // int32 [N, ceil(K / 8)], the packed words
  Tensor scales;  // float32 [ceil(K / group_size), N]
  int64_t in_features = 0;  // K
  int64_t group_size = 0;
  int64_t out_features() const { return codes.defined() ? codes.size(0) : 0; }
};

namespace q4gsw {

inline int64_t words_per_row(int64_t k) { return (k + 7) / 8; }
inline int64_t bytes_per_row(int64_t k) { return (k + 1) / 2; }
inline int64_t groups(int64_t k, int64_t group_size) { return (k + group_size - 1) / group_size; }

// Throws ArgumentError naming `op` unless the group size is a positive multiple of 8 and codes [N, ceil(K/8)] and
// scales [ceil(K/group_size), N] fit K (either backend's weight, by its shapes).
void check_layout(const char* op, const Shape& codes, const Shape& scales, int64_t k, int64_t group_size);

// Exchange bytes [N, ceil(K/2)] <-> device words [N, ceil(K/8)]. Padding nibbles become code 8; unpack checks them.
std::vector<int32_t> pack_bytes(std::span<const uint8_t> bytes, int64_t n, int64_t k);
std::vector<uint8_t> unpack_words(std::span<const int32_t> words, int64_t n, int64_t k);

// Uploads a weight given in the exchange layout; checks every size against N, K and group_size.
Q4Weight upload(Device& device, std::span<const uint8_t> bytes, std::span<const float> scales, int64_t n, int64_t k,
                int64_t group_size);
// The exchange bytes of a device weight.
std::vector<uint8_t> download_bytes(const Q4Weight& w);

}  // namespace q4gsw

namespace ops {

// y[M, N] = x[M, K] W^T (x may have any leading dims: [..., K] -> [..., N]).
Tensor linear_q4gsw(const Tensor& x, const Q4Weight& w);
// residual + x W^T, residual of y's shape (a residual stream and the layer's output projection). In mixed precision
// the GEMM's finishing pass adds it, with no pass of its own; otherwise an add follows the product. Either way the
// bits are those of ops::add(residual, linear_q4gsw(x, w)).
Tensor linear_q4gsw_residual(const Tensor& residual, const Tensor& x, const Q4Weight& w);
// dx[M, K] = dy[M, N] W, dequantising on the fly ([..., N] -> [..., K]). With `accumulate_into` (a contiguous
// float32 tensor of dx's shape), adds to it in place and returns it: one input's gradient summed over several
// linears (q, k and v) without an add each.
Tensor linear_q4gsw_backward(const Tensor& dy, const Q4Weight& w, const Tensor* accumulate_into = nullptr);
// dW[N, K] = dy[M, N]^T x[M, K] in float32 (leading dims of dy and x flattened into M). With `accumulate_into`
// (a contiguous float32 [N, K]), adds to it in place and returns it.
Tensor linear_dW(const Tensor& dy, const Tensor& x, const Tensor* accumulate_into = nullptr);
// Re-quantises the latent float32 weights [N, K] into w.codes, in place:
// code = clamp(round_half_even(latent / scale), -8, 7) + 8, and 8 where the scale is 0. With recompute_scales,
// first sets each group's scale to max|latent| / 7 over the group. The gradient is straight-through: the training
// graph passes dW to the latent unchanged.
void q4gsw_requant(const Tensor& latent, Q4Weight& w, bool recompute_scales);

}  // namespace ops
}  // namespace wgtrain

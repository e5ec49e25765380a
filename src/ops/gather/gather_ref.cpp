// CPU references for gather and embedding (float64; index values held as doubles).
#include "ops/reference.h"
#include "wgtrain/error.h"

namespace wgtrain::ref {

HostTensor gather(const HostTensor& input, int dim, const HostTensor& index) {
  const int rank = input.rank();
  const int d = dim < 0 ? dim + rank : dim;
  const Shape in_strides = contiguous_strides(input.shape);
  HostTensor out(index.shape);
  for (int64_t i = 0; i < index.numel(); ++i) {
    int64_t rem = i, src = 0;
    for (int k = rank - 1; k >= 0; --k) {
      const int64_t c = rem % index.shape[k];
      rem /= index.shape[k];
      if (k != d) src += c * in_strides[k];
    }
    const auto v = static_cast<int64_t>(index.data[i]);
    if (v < 0 || v >= input.shape[d]) throw ArgumentError("ref::gather: index out of range");
    out.data[i] = input.data[src + v * in_strides[d]];
  }
  return out;
}

HostTensor embedding(const HostTensor& weight, const HostTensor& indices) {
  const int64_t V = weight.shape[0], D = weight.shape[1];
  Shape shape = indices.shape;
  shape.push_back(D);
  HostTensor out(shape);
  for (int64_t i = 0; i < indices.numel(); ++i) {
    const auto v = static_cast<int64_t>(indices.data[i]);
    if (v < 0 || v >= V) throw ArgumentError("ref::embedding: index out of range");
    for (int64_t j = 0; j < D; ++j) out.data[i * D + j] = weight.data[v * D + j];
  }
  return out;
}

HostTensor embedding_backward(const HostTensor& grad, const HostTensor& indices, int64_t num_weights) {
  const int64_t D = grad.shape.back();
  HostTensor out({num_weights, D});
  for (int64_t i = 0; i < indices.numel(); ++i) {
    const auto v = static_cast<int64_t>(indices.data[i]);
    if (v < 0 || v >= num_weights) throw ArgumentError("ref::embedding_backward: index out of range");
    for (int64_t j = 0; j < D; ++j) out.data[v * D + j] += grad.data[i * D + j];
  }
  return out;
}

}  // namespace wgtrain::ref

// The launcher of elementwise/map.wgsl, shared by the elementwise, select and shape families.
#pragma once

#include <array>
#include <initializer_list>
#include <string>
#include <vector>

#include "ops/common.h"

namespace wgtrain::ops::detail {

// Mirrors `struct Strided` in common/strided.wgsl: up to three operand views of one output shape.
struct alignas(16) StridedParams {
  uint32_t n, rank, dense, flags;
  uint32_t off[4];
  float fscalar[4];
  int32_t iscalar[4];
  U32x8 shape, strides0, strides1, strides2;
};
static_assert(sizeof(StridedParams) == 192);

// StridedParams for `views` (each of `shape`), dims coalesced; `dense` set where every view is dense.
StridedParams strided_params(const Shape& shape, const std::vector<const Tensor*>& views, const char* op);

// WGSL element type of a dtype's storage ("f32", "i32", "u32" for bool).
const char* wgsl_type(DType t);

struct MapKernel {
  std::string expr;  // over x0, x1, x2, p.fscalar, p.iscalar
  DType out;
  // The expression is also valid WGSL with x0, x1, x2 as vec4s: dense, aligned operands then move 16 bytes a load.
  bool vectorizable = false;
};

// Runs `expr` over operand views that already have the output shape (expand them first). Scalars reach the
// expression as p.fscalar / p.iscalar. Returns a new contiguous tensor of `shape`.
Tensor run_map(const char* op, const MapKernel& k, std::initializer_list<Tensor> operands, const Shape& shape,
               std::array<float, 4> fscalar = {}, std::array<int32_t, 4> iscalar = {});

// A new contiguous copy of x, bit for bit (unlike x + 0, which turns -0 into +0).
Tensor clone(const Tensor& x);

// Writes src (any view) into dst (any view of the same shape and dtype), elementwise.
void copy_into(const char* op, const Tensor& dst, const Tensor& src);
// The kernel behind copy_into, for views already checked (same shape and dtype, different buffers, dst no
// broadcast): a tiled transpose where dst's innermost dim is strided in src, 16-byte words where the innermost dim is
// contiguous in both and everything is a multiple of 4 words, else one word at a time (shape/copy.cpp).
void copy_view(const char* op, const Tensor& dst, const Tensor& src);

}  // namespace wgtrain::ops::detail

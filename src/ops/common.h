// Shared by the op handlers: argument checks, uniform layouts for strided tensors, dim coalescing, registration.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "gpu/device_impl.h"
#include "wgtrain/error.h"
#include "wgtrain/registry.h"
#include "wgtrain/tensor.h"

namespace wgtrain::ops::detail {

using wgtrain::detail::DeviceImpl;

// Shape and strides of a view as kernels see them: up to kMaxRank dims, matching WGSL's array<vec4<u32>, 2>.
struct alignas(16) U32x8 {
  uint32_t v[8] = {};
};

// Checked narrowing for values that go into u32 uniforms.
uint32_t u32(int64_t v, const char* what);

void check_defined(const char* op, const Tensor& t, const char* name);
void check_dtype(const char* op, const Tensor& t, const char* name, std::initializer_list<DType> allowed);
void check_rank(const char* op, const Tensor& t, const char* name, int rank);
void check_same_device(const char* op, const Tensor& a, const Tensor& b);

// A view's dims as (shape, strides) pairs with size-1 dims dropped and adjacent dims merged where every given view is
// contiguous across them. All views must share one shape. Returns at least one dim.
struct Coalesced {
  Shape shape;
  std::vector<Shape> strides;  // one per view
};
Coalesced coalesce(const Shape& shape, const std::vector<Shape>& strides);

void fill_u32x8(U32x8& dst, const Shape& values, const char* what);

// [min, max] of an int32 view's values where the host wrote them (Tensor::from_host) and the view reaches every
// one of them; nullopt otherwise, and the kernel's own check has to do.
std::optional<std::pair<int32_t, int32_t>> host_known_range(const Tensor& t);

// Threads that share one row in the row kernels (softmax, reduce, norms): a power of two near len / 4, from 1 to
// 256, so a 256-thread workgroup holds 256 / segment rows and short rows do not leave most threads idle.
uint32_t row_segment(int64_t len);
// The grid for `rows` rows at 256 / segment rows a workgroup (the kernels' segment_index in common/segments.wgsl).
std::pair<uint32_t, uint32_t> row_grid(DeviceImpl& dev, int64_t rows, uint32_t segment);
// 4 where rows of `len` floats at these offsets (and strides, in floats) are whole vec4s, else 1: the kernels that
// take a vec4 form (norms, rope) then move 16 bytes a load.
int64_t vec_width(int64_t len, std::initializer_list<int64_t> offsets);

// A new contiguous tensor on a device (poisoned when the device poisons).
Tensor new_tensor(DeviceImpl& dev, const Shape& shape, DType dtype);

// A new int32 tensor holding `bytes` of host data (a table for a kernel), written without a flush: a fresh buffer
// is idle.
Tensor upload_words(DeviceImpl& dev, const void* data, size_t bytes);

// x [rows, n] summed over its rows into `into` (contiguous, [n]), added to what `into` holds where `accumulate`
// (old + sum, as an add after the sum would give): a weight's gradient summed straight into its parameter's
// gradient buffer (src/ops/reduce).
void sum_rows_into(const char* op, const Tensor& x, const Tensor& into, bool accumulate);

// swiglu(gate, up) made again for the backward: the forward's kernel form, so the same bits, without the maxima the
// forward already left for the mixed GEMMs (autograd hands them over: DeviceImpl::give_derived) (src/ops/swiglu).
Tensor swiglu_again(const Tensor& gate, const Tensor& up);

// Registration, one function per family (called once by Registry::global()).
void register_elementwise_ops(Registry& r);
void register_shape_ops(Registry& r);
void register_select_ops(Registry& r);
void register_gather_ops(Registry& r);
void register_matmul_ops(Registry& r);
void register_softmax_ops(Registry& r);
void register_reduce_ops(Registry& r);
void register_q4gsw_ops(Registry& r);
void register_fused_ce_ops(Registry& r);
void register_adamw_ops(Registry& r);
void register_norm_ops(Registry& r);
void register_rope_ops(Registry& r);
void register_swiglu_ops(Registry& r);
void register_dropout_ops(Registry& r);
void register_attention_ops(Registry& r);

// Helpers for registry entries.
const Tensor& input(const OpTensors& in, const std::string& name);
std::vector<int> to_int_dims(const std::vector<int64_t>& v);

}  // namespace wgtrain::ops::detail

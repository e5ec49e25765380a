// full and copy_ on the native Vulkan backend: transfer commands (vkCmdFillBuffer, vkCmdCopyBuffer), no shader.
#include <bit>
#include <cmath>
#include <string>

#include "vulkan/context.h"
#include "wgtrain/error.h"
#include "wgtrain/vulkan.h"

namespace wgtrain::vk::ops {

Tensor full(Device& device, const Shape& shape, double value, DType dtype) {
  uint32_t word = 0;
  switch (dtype) {
    case DType::F32: word = std::bit_cast<uint32_t>(static_cast<float>(value)); break;
    case DType::I32:
      if (value != std::nearbyint(value) || value < -2147483648.0 || value > 2147483647.0)
        throw ArgumentError("full: " + std::to_string(value) + " is not an int32 value");
      word = static_cast<uint32_t>(static_cast<int32_t>(value));
      break;
    case DType::Bool: word = value != 0 ? 1u : 0u; break;
  }
  Tensor t = Tensor::empty(device, shape, dtype);
  device.ctx().fill(*t.buffer(), 0, static_cast<uint64_t>(t.numel()) * 4, word);
  return t;
}

void copy_(const Tensor& dst, const Tensor& src) {
  if (!dst.defined() || !src.defined()) throw ArgumentError("copy_: an undefined tensor");
  if (dst.numel() != src.numel() || dst.dtype() != src.dtype())
    throw ArgumentError("copy_: cannot copy " + std::string(dtype_name(src.dtype())) + " " + shape_str(src.shape()) +
                        " into " + dtype_name(dst.dtype()) + " " + shape_str(dst.shape()));
  if (&dst.ctx() != &src.ctx()) throw ArgumentError("copy_: tensors on different devices");
  dst.ctx().copy(*src.buffer(), static_cast<uint64_t>(src.offset()) * 4, *dst.buffer(),
                 static_cast<uint64_t>(dst.offset()) * 4, static_cast<uint64_t>(src.numel()) * 4);
}

}  // namespace wgtrain::vk::ops

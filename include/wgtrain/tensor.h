// Tensors: a view (shape, strides, element offset, dtype) onto GPU storage shared by all views of it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace wgtrain {

class Device;
namespace detail {
struct Storage;
struct DeviceImpl;
}

// Element types. Bool is stored as one 32-bit word per element (0 or 1): WGSL has no 8-bit storage type, and a word
// per element keeps every kernel's indexing the same.
enum class DType : uint8_t { F32, I32, Bool };

const char* dtype_name(DType t);
constexpr size_t dtype_size(DType) { return 4; }

using Shape = std::vector<int64_t>;

// Most dims a tensor may have; kernels carry shapes and strides for up to this many dims.
constexpr int kMaxRank = 8;

int64_t numel(const Shape& shape);
std::string shape_str(const Shape& shape);
// Row-major (C order) strides of a shape, in elements.
Shape contiguous_strides(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;

  // A new, uninitialised tensor (contents undefined; poisoned when the device was opened with poison on).
  static Tensor empty(Device& device, const Shape& shape, DType dtype = DType::F32);
  // A new tensor holding a copy of host data (row-major); data.size() must equal numel(shape).
  static Tensor from_host(Device& device, const Shape& shape, std::span<const float> data);
  static Tensor from_host(Device& device, const Shape& shape, std::span<const int32_t> data);
  // A bool tensor: each byte is false when 0, true otherwise.
  static Tensor from_host_bool(Device& device, const Shape& shape, std::span<const uint8_t> data);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  int64_t size(int dim) const;
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return wgtrain::numel(shape_); }
  DType dtype() const { return dtype_; }
  bool is_contiguous() const;
  // The device the storage lives on (internal).
  detail::DeviceImpl& device_impl() const;

  // Views: no data is copied.
  Tensor reshape(const Shape& shape) const;  // needs a contiguous tensor; one dim may be -1
  Tensor transpose(int dim0, int dim1) const;
  Tensor permute(const std::vector<int>& dims) const;
  // Elements start, start+step, ... below end along dim (negative start/end count from the end; clamped).
  Tensor slice(int dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor unsqueeze(int dim) const;
  // A broadcast view to `shape` (stride 0 on expanded dims), NumPy rules.
  Tensor expand(const Shape& shape) const;

  // Overwrites a contiguous tensor with host data (data.size() == numel()), in order after the work recorded so
  // far: a queue write, no wait. The float form needs a float32 tensor, the int form an int32 one.
  void write(std::span<const float> data) const;
  void write(std::span<const int32_t> data) const;

  // Copies to the host (waits for the GPU). Non-contiguous views are gathered on the GPU first.
  std::vector<float> to_host_f32() const;
  std::vector<int32_t> to_host_i32() const;  // int32, or bool as 0/1

  // Internal: the storage this view reads.
  const std::shared_ptr<detail::Storage>& storage() const { return storage_; }
  Tensor(std::shared_ptr<detail::Storage> storage, Shape shape, Shape strides, int64_t offset, DType dtype);

 private:
  std::shared_ptr<detail::Storage> storage_;
  Shape shape_;
  Shape strides_;
  int64_t offset_ = 0;
  DType dtype_ = DType::F32;
};

// Normalises a possibly negative dim against a rank; throws ArgumentError when out of range.
int normalize_dim(int dim, int rank, const char* what = "dim");

}  // namespace wgtrain

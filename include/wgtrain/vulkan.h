// The native Vulkan backend: the training kernels (the three q4gsw GEMMs, requantisation, fused cross-entropy,
// AdamW, and the fills and copies a step needs) as GLSL compute shaders, compiled to SPIR-V by glslc at build time
// and embedded, on a small Vulkan runtime of its own (instance, device choice, buffers, pipelines with push
// descriptors, batched command buffers, timestamp queries). For devices where a native Vulkan path is preferred over
// WebGPU; the op registry lists which ops each backend offers (`wgtrain ops`).
//
// Semantics, layouts and argument checks are those of the WebGPU ops (wgtrain/q4gsw.h, fused_ce.h, adamw.h);
// tensors here are contiguous. Work is recorded into a command buffer and submitted at a read-back or
// synchronize(). A Device is used from one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "wgtrain/adamw.h"
#include "wgtrain/tensor.h"

namespace wgtrain::vk {

namespace detail {
struct Context;
struct Buffer;
}

struct DeviceInfo {
  std::string name;        // e.g. "NVIDIA H200", "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string driver;      // driver name and version
  std::string type;        // "discrete GPU", "integrated GPU", "CPU", ...
  uint32_t api_version = 0;
  bool software = false;   // a CPU implementation (lavapipe)
  bool timestamps = false;
  uint32_t subgroup_size = 0;
  uint64_t max_storage_buffer_range = 0;
  // VK_NV_cooperative_matrix with 16x16x16 fp16 products into fp32 (see ops::CoopMat below).
  bool cooperative_matrix = false;
};

struct DeviceOptions {
  // A physical device by enumeration order (Device::list); -1: $WGTRAIN_VULKAN_DEVICE if set, else the first
  // discrete GPU, else the first.
  int index = -1;
  bool poison = false;     // fill every new buffer with 0xFF bytes (NaN), so that an unwritten element shows
  // Use cooperative-matrix GEMMs (fp16 operands, fp32 accumulation) where the device has them. Off by default:
  // they change the numbers (see ops below).
  bool cooperative_matrix = false;
};

struct DeviceStats {
  uint64_t dispatches = 0, submits = 0, buffers_created = 0, pipelines_created = 0;
};

class Device {
 public:
  // Opens a device; throws Error saying what was tried (no loader, no device, missing extension).
  static Device open(const DeviceOptions& options = {});
  // The physical devices the loader offers, in enumeration order (what `index` counts); throws Error without a
  // loader.
  struct Physical {
    std::string name, type;
    bool software = false;
  };
  static std::vector<Physical> list();
  ~Device();
  Device(Device&&) noexcept;
  Device& operator=(Device&&) noexcept;

  const DeviceInfo& info() const;
  const DeviceOptions& options() const;
  DeviceStats stats() const;
  // Submits what is recorded and waits for it.
  void synchronize();

  // GPU time of the work recorded inside `body` (timestamps), or the wall clock around a synchronize.
  struct Timing {
    double seconds = 0;
    bool from_timestamps = false;
  };
  template <class F>
  Timing time(F&& body) {
    begin_timing();
    body();
    return end_timing();
  }
  void begin_timing();
  Timing end_timing();

  detail::Context& ctx() const { return *ctx_; }

 private:
  explicit Device(std::shared_ptr<detail::Context> c);
  std::shared_ptr<detail::Context> ctx_;
};

// A contiguous tensor in a device buffer (float32, int32 or bool words), possibly a slice of a larger one (an
// arena of parameters): `offset` elements into the buffer.
class Tensor {
 public:
  Tensor() = default;
  static Tensor empty(Device& device, const Shape& shape, DType dtype = DType::F32);
  static Tensor from_host(Device& device, const Shape& shape, std::span<const float> data);
  static Tensor from_host(Device& device, const Shape& shape, std::span<const int32_t> data);

  bool defined() const { return buffer_ != nullptr; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  int64_t numel() const { return wgtrain::numel(shape_); }
  int64_t size(int dim) const;
  int rank() const { return static_cast<int>(shape_.size()); }
  // The same elements under another shape (same count).
  Tensor reshape(const Shape& shape) const;
  // Rows [start, end) of dim 0: a view into the same buffer.
  Tensor slice(int64_t start, int64_t end) const;
  int64_t offset() const { return offset_; }

  std::vector<float> to_host_f32() const;
  std::vector<int32_t> to_host_i32() const;  // int32, or bool as 0/1

  // Internal.
  Tensor(std::shared_ptr<detail::Buffer> buffer, Shape shape, DType dtype, int64_t offset = 0);
  const std::shared_ptr<detail::Buffer>& buffer() const { return buffer_; }
  detail::Context& ctx() const;

 private:
  std::shared_ptr<detail::Buffer> buffer_;
  Shape shape_;
  DType dtype_ = DType::F32;
  int64_t offset_ = 0;
};

// A q4gsw weight (the layouts of wgtrain/q4gsw.h): codes as u32 words [N, ceil(K/8)], scales [ceil(K/group), N].
struct Q4Weight {
  Tensor codes, scales;
  int64_t in_features = 0, group_size = 0;
  int64_t out_features() const { return codes.defined() ? codes.size(0) : 0; }
};

// From the exchange layout (bytes [N, ceil(K/2)], even k in the low nibble), checked as q4gsw::upload checks it.
Q4Weight upload_q4(Device& device, std::span<const uint8_t> bytes, std::span<const float> scales, int64_t n,
                   int64_t k, int64_t group_size);
std::vector<uint8_t> download_q4_bytes(const Q4Weight& w);

namespace ops {

// As wgtrain::ops::linear_q4gsw and friends: x [..., K] -> [..., N]; dy [..., N] -> [..., K]; dW [N, K].
Tensor linear_q4gsw(const Tensor& x, const Q4Weight& w);
Tensor linear_q4gsw_backward(const Tensor& dy, const Q4Weight& w);
Tensor linear_dW(const Tensor& dy, const Tensor& x, const Tensor* accumulate_into = nullptr);
void q4gsw_requant(const Tensor& latent, Q4Weight& w, bool recompute_scales);

struct CrossEntropy {
  Tensor loss, dlogits;
};
CrossEntropy fused_ce(const Tensor& logits, const Tensor& labels, std::optional<int64_t> n_valid = std::nullopt,
                      bool in_place = false);

// AdamW over parameters given as (param, grad, m, v) tensors of one shape each, as wgtrain::ops::adamw_step.
struct AdamWParam {
  Tensor param, grad, m, v;
  double weight_decay = -1;
};
// As wgtrain::ops::AdamW: the segment tables built once, each step's scalars written by set_step (inside the
// command buffer, in order), the update one dispatch per set of shared buffers.
class AdamW {
 public:
  AdamW(std::vector<AdamWParam> params, wgtrain::ops::AdamWOptions options);
  ~AdamW();
  AdamW(AdamW&&) noexcept;
  AdamW& operator=(AdamW&&) noexcept;
  void set_step(int64_t step, double lr);
  void update() const;
  const wgtrain::ops::AdamWOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
// One step with options.lr: an AdamW used once.
void adamw_step(const std::vector<AdamWParam>& params, const wgtrain::ops::AdamWOptions& options, int64_t step);

// A new tensor of `shape` filled with `value`, and an element-for-element copy into a tensor of one size.
Tensor full(Device& device, const Shape& shape, double value, DType dtype = DType::F32);
void copy_(const Tensor& dst, const Tensor& src);

}  // namespace ops
}  // namespace wgtrain::vk

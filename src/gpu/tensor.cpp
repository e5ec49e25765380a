#include "wgtrain/tensor.h"

#include <algorithm>
#include <numeric>

#include "gpu/device_impl.h"
#include "wgtrain/device.h"
#include "wgtrain/error.h"

namespace wgtrain {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::I32: return "int32";
    case DType::Bool: return "bool";
  }
  return "?";
}

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Shape contiguous_strides(const Shape& shape) {
  Shape st(shape.size());
  int64_t s = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    st[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
  }
  return st;
}

int normalize_dim(int dim, int rank, const char* what) {
  const int r = std::max(rank, 1);  // a 0-d tensor takes dim 0 or -1, as in PyTorch
  const int d = dim < 0 ? dim + r : dim;
  if (d < 0 || d >= r)
    throw ArgumentError(std::string(what) + " " + std::to_string(dim) + " is out of range for a tensor of rank " +
                        std::to_string(rank));
  return d;
}

namespace {

void check_shape(const Shape& shape) {
  if (shape.size() > static_cast<size_t>(kMaxRank))
    throw ArgumentError("rank " + std::to_string(shape.size()) + " exceeds the maximum of " +
                        std::to_string(kMaxRank));
  for (auto d : shape)
    if (d < 0) throw ArgumentError("negative dimension in shape " + shape_str(shape));
  if (numel(shape) > (int64_t{1} << 32) - 1)
    throw ArgumentError("shape " + shape_str(shape) + " has more than 2^32-1 elements");
}

}  // namespace

Tensor::Tensor(std::shared_ptr<detail::Storage> storage, Shape shape, Shape strides, int64_t offset, DType dtype)
    : storage_(std::move(storage)), shape_(std::move(shape)), strides_(std::move(strides)), offset_(offset),
      dtype_(dtype) {}

Tensor Tensor::empty(Device& device, const Shape& shape, DType dtype) {
  check_shape(shape);
  auto st = device.impl().allocate(static_cast<uint64_t>(wgtrain::numel(shape)) * dtype_size(dtype),
                                   "a " + std::string(dtype_name(dtype)) + " tensor of shape " + shape_str(shape));
  return Tensor(std::move(st), shape, contiguous_strides(shape), 0, dtype);
}

namespace {
template <class T>
Tensor from_host_impl(Device& device, const Shape& shape, std::span<const T> data, DType dtype) {
  if (static_cast<int64_t>(data.size()) != numel(shape))
    throw ArgumentError("from_host: " + std::to_string(data.size()) + " values given for shape " + shape_str(shape) +
                        " (" + std::to_string(numel(shape)) + " elements)");
  check_shape(shape);
  auto st = device.impl().allocate(data.size() * sizeof(T),
                                   "a " + std::string(dtype_name(dtype)) + " tensor of shape " + shape_str(shape),
                                   /*host_write=*/true);
  Tensor t(std::move(st), shape, contiguous_strides(shape), 0, dtype);
  // An allocation for a host write is idle (device_impl.h), so no recorded work needs submitting first.
  device.impl().write_idle(t.storage()->buffer, 0, data.data(), data.size() * sizeof(T));
  return t;
}
}  // namespace

Tensor Tensor::from_host(Device& device, const Shape& shape, std::span<const float> data) {
  return from_host_impl(device, shape, data, DType::F32);
}
Tensor Tensor::from_host(Device& device, const Shape& shape, std::span<const int32_t> data) {
  Tensor t = from_host_impl(device, shape, data, DType::I32);
  if (!data.empty()) {
    const auto [lo, hi] = std::minmax_element(data.begin(), data.end());
    t.storage()->int_range = std::make_pair(*lo, *hi);
  }
  return t;
}

Tensor Tensor::from_host_bool(Device& device, const Shape& shape, std::span<const uint8_t> data) {
  std::vector<int32_t> words(data.size());
  for (size_t i = 0; i < data.size(); ++i) words[i] = data[i] ? 1 : 0;
  return from_host_impl(device, shape, std::span<const int32_t>(words), DType::Bool);
}

detail::DeviceImpl& Tensor::device_impl() const {
  if (!storage_) throw ArgumentError("use of an undefined tensor");
  return *storage_->device;
}

int64_t Tensor::size(int dim) const { return shape_[normalize_dim(dim, rank())]; }

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;  // nothing to gather (and contiguous_strides gives a 0-size dim stride 1)
  int64_t expect = 1;
  for (int i = rank() - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != expect) return false;
    expect *= shape_[i];
  }
  return true;
}

Tensor Tensor::reshape(const Shape& shape) const {
  Shape s = shape;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      if (infer >= 0) throw ArgumentError("reshape: more than one -1 in " + shape_str(shape));
      infer = static_cast<int>(i);
    } else {
      known *= s[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel() % known != 0)
      throw ArgumentError("reshape: cannot infer -1 in " + shape_str(shape) + " for " + shape_str(shape_));
    s[infer] = numel() / known;
  }
  if (wgtrain::numel(s) != numel())
    throw ArgumentError("reshape: " + shape_str(shape_) + " has " + std::to_string(numel()) +
                        " elements, shape " + shape_str(shape) + " has " + std::to_string(wgtrain::numel(s)));
  check_shape(s);
  if (!is_contiguous())
    throw ArgumentError("reshape of a non-contiguous view " + shape_str(shape_) +
                        " would need a copy: call ops::contiguous first");
  return Tensor(storage_, s, contiguous_strides(s), offset_, dtype_);
}

Tensor Tensor::transpose(int dim0, int dim1) const {
  const int a = normalize_dim(dim0, rank()), b = normalize_dim(dim1, rank());
  Shape sh = shape_, st = strides_;
  std::swap(sh[a], sh[b]);
  std::swap(st[a], st[b]);
  return Tensor(storage_, sh, st, offset_, dtype_);
}

Tensor Tensor::permute(const std::vector<int>& dims) const {
  if (static_cast<int>(dims.size()) != rank())
    throw ArgumentError("permute: " + std::to_string(dims.size()) + " dims given for rank " + std::to_string(rank()));
  Shape sh(rank()), st(rank());
  std::vector<bool> seen(rank(), false);
  for (int i = 0; i < rank(); ++i) {
    const int d = normalize_dim(dims[i], rank());
    if (seen[d]) throw ArgumentError("permute: dim " + std::to_string(d) + " repeated");
    seen[d] = true;
    sh[i] = shape_[d];
    st[i] = strides_[d];
  }
  return Tensor(storage_, sh, st, offset_, dtype_);
}

Tensor Tensor::slice(int dim, int64_t start, int64_t end, int64_t step) const {
  if (rank() == 0) throw ArgumentError("slice of a zero-dimensional tensor");
  if (step <= 0) throw ArgumentError("slice: step must be positive, got " + std::to_string(step));
  const int d = normalize_dim(dim, rank());
  const int64_t n = shape_[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape sh = shape_, st = strides_;
  sh[d] = (end - start + step - 1) / step;
  st[d] = strides_[d] * step;
  return Tensor(storage_, sh, st, offset_ + start * strides_[d], dtype_);
}

Tensor Tensor::unsqueeze(int dim) const {
  const int d = normalize_dim(dim, rank() + 1);
  Shape sh = shape_, st = strides_;
  const int64_t stride = d < rank() ? strides_[d] * shape_[d] : 1;
  sh.insert(sh.begin() + d, 1);
  st.insert(st.begin() + d, stride);
  check_shape(sh);
  return Tensor(storage_, sh, st, offset_, dtype_);
}

Tensor Tensor::expand(const Shape& shape) const {
  if (shape.size() < shape_.size())
    throw ArgumentError("expand: cannot expand " + shape_str(shape_) + " to fewer dims " + shape_str(shape));
  check_shape(shape);
  const size_t lead = shape.size() - shape_.size();
  Shape st(shape.size(), 0);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) continue;
    const int64_t have = shape_[i - lead];
    if (have == shape[i]) {
      st[i] = strides_[i - lead];
    } else if (have != 1) {
      throw ArgumentError("expand: dim " + std::to_string(i) + " of " + shape_str(shape_) + " is " +
                          std::to_string(have) + ", cannot expand to " + shape_str(shape));
    }
  }
  return Tensor(storage_, shape, st, offset_, dtype_);
}

namespace {
template <class T>
std::vector<T> to_host_impl(const Tensor& t, DType want) {
  if (!t.defined()) throw ArgumentError("to_host of an undefined tensor");
  if ((want == DType::F32) != (t.dtype() == DType::F32))
    throw ArgumentError(std::string("to_host: the tensor is ") + dtype_name(t.dtype()) + ", not " + dtype_name(want));
  std::vector<T> out(static_cast<size_t>(t.numel()));
  if (out.empty()) return out;
  if (t.is_contiguous()) {
    t.device_impl().read(t.storage()->buffer, static_cast<uint64_t>(t.offset()) * 4, out.size() * sizeof(T),
                         out.data());
    return out;
  }
  // A strided view: the span of storage it covers comes back whole and is gathered here, so reading any view needs
  // no kernel (and works on a backend without the copy kernels). Views have non-negative strides.
  int64_t span = 1;
  for (int d = 0; d < t.rank(); ++d) span += (t.shape()[d] - 1) * t.strides()[d];
  std::vector<T> raw(static_cast<size_t>(span));
  t.device_impl().read(t.storage()->buffer, static_cast<uint64_t>(t.offset()) * 4, raw.size() * sizeof(T),
                       raw.data());
  std::vector<int64_t> idx(static_cast<size_t>(t.rank()), 0);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t at = 0;
    for (int d = 0; d < t.rank(); ++d) at += idx[d] * t.strides()[d];
    out[i] = raw[static_cast<size_t>(at)];
    for (int d = t.rank() - 1; d >= 0; --d) {
      if (++idx[d] < t.shape()[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}
}  // namespace

namespace {
template <class T>
void write_impl(const Tensor& t, std::span<const T> data, DType want) {
  if (!t.defined()) throw ArgumentError("write into an undefined tensor");
  if (t.dtype() != want)
    throw ArgumentError(std::string("write: the tensor is ") + dtype_name(t.dtype()) + ", the data " +
                        dtype_name(want));
  if (!t.is_contiguous()) throw ArgumentError("write: the tensor " + shape_str(t.shape()) + " is not contiguous");
  if (static_cast<int64_t>(data.size()) != t.numel())
    throw ArgumentError("write: " + std::to_string(data.size()) + " values given for shape " + shape_str(t.shape()));
  // The host no longer knows every value the storage holds: index ops fall back to their GPU check.
  t.storage()->int_range.reset();
  t.device_impl().write(t.storage()->buffer, static_cast<uint64_t>(t.offset()) * 4, data.data(),
                        data.size() * sizeof(T));
}
}  // namespace

void Tensor::write(std::span<const float> data) const { write_impl(*this, data, DType::F32); }
void Tensor::write(std::span<const int32_t> data) const { write_impl(*this, data, DType::I32); }

std::vector<float> Tensor::to_host_f32() const { return to_host_impl<float>(*this, DType::F32); }
std::vector<int32_t> Tensor::to_host_i32() const { return to_host_impl<int32_t>(*this, DType::I32); }

}  // namespace wgtrain

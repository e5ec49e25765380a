#include "ops/common.h"

#include <algorithm>
#include <cstring>

#include "wgtrain/ops.h"

namespace wgtrain::ops::detail {

uint32_t u32(int64_t v, const char* what) {
  if (v < 0 || v > int64_t{0xFFFFFFFF})
    throw ArgumentError(std::string(what) + " = " + std::to_string(v) + " does not fit the kernels' 32-bit indices");
  return static_cast<uint32_t>(v);
}

void check_defined(const char* op, const Tensor& t, const char* name) {
  if (!t.defined()) throw ArgumentError(std::string(op) + ": input '" + name + "' is an undefined tensor");
}

void check_dtype(const char* op, const Tensor& t, const char* name, std::initializer_list<DType> allowed) {
  check_defined(op, t, name);
  for (DType d : allowed)
    if (t.dtype() == d) return;
  std::string list;
  for (DType d : allowed) list += (list.empty() ? "" : " or ") + std::string(dtype_name(d));
  throw ArgumentError(std::string(op) + ": '" + name + "' is " + dtype_name(t.dtype()) + ", expected " + list);
}

void check_rank(const char* op, const Tensor& t, const char* name, int rank) {
  if (t.rank() != rank)
    throw ArgumentError(std::string(op) + ": '" + name + "' must have " + std::to_string(rank) + " dims, got shape " +
                        shape_str(t.shape()));
}

void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  if (&a.device_impl() != &b.device_impl())
    throw ArgumentError(std::string(op) + ": inputs live on different devices");
}

Coalesced coalesce(const Shape& shape, const std::vector<Shape>& strides) {
  Coalesced c;
  c.strides.resize(strides.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !c.shape.empty();
    for (size_t t = 0; merge && t < strides.size(); ++t)
      merge = c.strides[t].back() == strides[t][d] * shape[d];
    if (merge) {
      c.shape.back() *= shape[d];
      for (size_t t = 0; t < strides.size(); ++t) c.strides[t].back() = strides[t][d];
    } else {
      c.shape.push_back(shape[d]);
      for (size_t t = 0; t < strides.size(); ++t) c.strides[t].push_back(strides[t][d]);
    }
  }
  if (c.shape.empty()) {
    c.shape.push_back(1);
    for (auto& s : c.strides) s.push_back(0);
  }
  return c;
}

void fill_u32x8(U32x8& dst, const Shape& values, const char* what) {
  if (values.size() > 8) throw ArgumentError(std::string(what) + ": more than 8 dims");
  for (size_t i = 0; i < values.size(); ++i) dst.v[i] = u32(values[i], what);
}

std::optional<std::pair<int32_t, int32_t>> host_known_range(const Tensor& t) {
  const auto& st = *t.storage();
  const bool whole = t.is_contiguous() && t.offset() == 0 && static_cast<uint64_t>(t.numel()) * 4 == st.bytes;
  if (!whole) return std::nullopt;
  return st.int_range;
}

uint32_t row_segment(int64_t len) {
  uint32_t seg = 1;
  while (seg < 256 && static_cast<int64_t>(seg) * 4 < len) seg *= 2;
  return seg;
}

std::pair<uint32_t, uint32_t> row_grid(DeviceImpl& dev, int64_t rows, uint32_t segment) {
  const uint64_t per = 256 / segment;
  return dev.grid((static_cast<uint64_t>(rows) + per - 1) / per);
}

int64_t vec_width(int64_t len, std::initializer_list<int64_t> offsets) {
  if (len % 4 != 0) return 1;
  for (int64_t off : offsets)
    if (off % 4 != 0) return 1;
  return 4;
}

Tensor new_tensor(DeviceImpl& dev, const Shape& shape, DType dtype) {
  auto st = dev.allocate(static_cast<uint64_t>(numel(shape)) * dtype_size(dtype),
                         "a " + std::string(dtype_name(dtype)) + " tensor of shape " + shape_str(shape));
  return Tensor(std::move(st), shape, contiguous_strides(shape), 0, dtype);
}

Tensor upload_words(DeviceImpl& dev, const void* data, size_t bytes) {
  std::vector<uint8_t> words((bytes + 3) / 4 * 4, 0);
  if (bytes) std::memcpy(words.data(), data, bytes);
  const Shape shape = {static_cast<int64_t>(words.size() / 4)};
  Tensor t(dev.allocate(words.size(), "a kernel table", /*host_write=*/true), shape, contiguous_strides(shape), 0,
           DType::I32);
  dev.write_idle(t.storage()->buffer, 0, words.data(), words.size());
  return t;
}

const Tensor& input(const OpTensors& in, const std::string& name) {
  auto it = in.find(name);
  if (it == in.end()) throw ArgumentError("missing input tensor '" + name + "'");
  return it->second;
}

std::vector<int> to_int_dims(const std::vector<int64_t>& v) {
  std::vector<int> out;
  for (auto x : v) {
    if (x < -kMaxRank || x >= kMaxRank) throw ArgumentError("dim " + std::to_string(x) + " is out of range");
    out.push_back(static_cast<int>(x));
  }
  return out;
}

}  // namespace wgtrain::ops::detail

namespace wgtrain::ops {

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw ArgumentError("shapes " + shape_str(a) + " and " + shape_str(b) + " do not broadcast (dim " +
                          std::to_string(i) + ": " + std::to_string(da) + " vs " + std::to_string(db) + ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace wgtrain::ops

#include "wgtrain/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <utility>
#include <nlohmann/json.hpp>

#include "wgtrain/atomic_file.h"
#include "wgtrain/device.h"

namespace wgtrain::safetensors {

namespace {

using json = nlohmann::json;

// The same cap as Hugging Face's reader: a header beyond it is not a real file.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

[[noreturn]] void fail(const std::string& what) { throw FormatError("safetensors: " + what); }

float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
  if (exp == 0) {
    const float f = std::ldexp(static_cast<float>(man), -24);
    return sign ? -f : f;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
}

template <class T>
T load_le(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // the project targets little-endian hosts, as the format's data is
  return v;
}

}  // namespace

size_t dtype_bytes(const std::string& d) {
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "I8" || d == "U8" || d == "BOOL") return 1;
  fail("unknown dtype \"" + d + "\"");
}

Header parse_header(std::span<const uint8_t> file) {
  if (file.size() < 8) fail("file of " + std::to_string(file.size()) + " bytes is too short for the 8-byte header length");
  const uint64_t n = load_le<uint64_t>(file.data());
  if (n > kMaxHeaderBytes) fail("header length " + std::to_string(n) + " exceeds the limit of 100 MB");
  if (n > file.size() - 8)
    fail("header length " + std::to_string(n) + " is longer than the " + std::to_string(file.size() - 8) +
         " bytes that follow it");
  const auto* hb = reinterpret_cast<const char*>(file.data() + 8);
  json header;
  try {
    header = json::parse(hb, hb + n);
  } catch (const json::exception& e) {
    std::string what = e.what();
    std::replace(what.begin(), what.end(), '\n', ' ');
    fail("header is not valid JSON: " + what);
  }
  if (!header.is_object()) fail("header is not a JSON object");
  const uint64_t data_len = file.size() - 8 - n;

  Header out;
  out.data_start = 8 + n;
  struct Span {
    uint64_t begin, end;
    std::string name;
  };
  std::vector<Span> spans;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail("__metadata__ is not an object");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) fail("__metadata__ value of \"" + k + "\" is not a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor \"" + name + "\"";
    if (!entry.is_object()) fail(where + " is not an object");
    for (const auto& [k, v] : entry.items())
      if (k != "dtype" && k != "shape" && k != "data_offsets") fail(where + " has an unknown field \"" + k + "\"");
    if (!entry.contains("dtype") || !entry["dtype"].is_string()) fail(where + " has no dtype string");
    if (!entry.contains("shape") || !entry["shape"].is_array()) fail(where + " has no shape array");
    if (!entry.contains("data_offsets") || !entry["data_offsets"].is_array() || entry["data_offsets"].size() != 2)
      fail(where + " has no [begin, end] data_offsets");
    TensorInfo a;
    a.dtype = entry["dtype"].get<std::string>();
    const size_t esize = dtype_bytes(a.dtype);
    if (entry["shape"].size() > static_cast<size_t>(kMaxRank))
      fail(where + " has " + std::to_string(entry["shape"].size()) + " dims (at most " + std::to_string(kMaxRank) +
           ")");
    uint64_t count = 1;
    bool overflow = false;
    for (const auto& d : entry["shape"]) {
      if (!d.is_number_unsigned()) fail(where + " has a shape entry that is not a non-negative integer");
      const uint64_t v = d.get<uint64_t>();
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) fail(where + " has a dim too large");
      if (v != 0 && count > std::numeric_limits<uint64_t>::max() / v) overflow = true;
      count *= v;
      a.shape.push_back(static_cast<int64_t>(v));
    }
    if (overflow || count > std::numeric_limits<uint64_t>::max() / esize) fail(where + " has too many elements");
    const auto& off = entry["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail(where + " has data_offsets that are not non-negative integers");
    const uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    if (b > e) fail(where + " has data_offsets [" + std::to_string(b) + ", " + std::to_string(e) + "] reversed");
    if (e > data_len)
      fail(where + " ends at byte " + std::to_string(e) + " of a data section of " + std::to_string(data_len) +
           " bytes (truncated file?)");
    if (e - b != count * esize)
      fail(where + " has " + std::to_string(e - b) + " data bytes, but shape and dtype need " +
           std::to_string(count * esize));
    a.begin = b;
    a.end = e;
    spans.push_back({b, e, name});
    out.tensors.emplace(name, std::move(a));
  }
  std::sort(spans.begin(), spans.end(), [](const Span& x, const Span& y) {
    return x.begin != y.begin ? x.begin < y.begin : x.end < y.end;
  });
  uint64_t at = 0;
  for (const auto& s : spans) {
    if (s.begin < at) fail("tensor \"" + s.name + "\" overlaps the tensor before it in the data section");
    if (s.begin > at) fail("the data section has a gap before tensor \"" + s.name + "\"");
    at = s.end;
  }
  if (at != data_len)
    fail("the data section has " + std::to_string(data_len - at) + " bytes that belong to no tensor");
  return out;
}

Contents parse(std::span<const uint8_t> file) {
  const Header h = parse_header(file);
  Contents out;
  out.metadata = h.metadata;
  for (const auto& [name, t] : h.tensors) {
    Array a;
    a.dtype = t.dtype;
    a.shape = t.shape;
    a.bytes.assign(file.data() + h.data_start + t.begin, file.data() + h.data_start + t.end);
    out.tensors.emplace(name, std::move(a));
  }
  return out;
}

Contents load(const std::string& path) {
  // A directory opens as a stream on Linux and fails only on the first read, as a bare basic_filebuf error.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw FormatError("safetensors: '" + path + "' is a directory, not a safetensors file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw FormatError("safetensors: cannot open '" + path + "': " + std::strerror(errno));
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw FormatError("safetensors: error reading '" + path + "'");
  try {
    return parse(bytes);
  } catch (const FormatError& e) {
    throw FormatError(std::string(e.what()) + " (in '" + path + "')");
  }
}

std::vector<uint8_t> serialize(const Contents& c) {
  json header = json::object();
  uint64_t at = 0;
  for (const auto& [name, a] : c.tensors) {
    if (name == "__metadata__") throw FormatError("safetensors: a tensor may not be named __metadata__");
    if (a.bytes.size() != static_cast<uint64_t>(numel(a.shape)) * dtype_bytes(a.dtype))
      throw FormatError("safetensors: tensor \"" + name + "\" has " + std::to_string(a.bytes.size()) +
                        " bytes for its shape and dtype");
    header[name] = {{"dtype", a.dtype}, {"shape", a.shape}, {"data_offsets", {at, at + a.bytes.size()}}};
    at += a.bytes.size();
  }
  if (!c.metadata.empty()) header["__metadata__"] = c.metadata;
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  std::vector<uint8_t> out(8 + h.size() + at);
  const uint64_t n = h.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, h.data(), h.size());
  uint8_t* p = out.data() + 8 + h.size();
  for (const auto& [name, a] : c.tensors) {
    if (!a.bytes.empty()) std::memcpy(p, a.bytes.data(), a.bytes.size());
    p += a.bytes.size();
  }
  return out;
}

void save(const std::string& path, const Contents& c) { write_file_atomic(path, serialize(c)); }

bool is_float_dtype(const std::string& d) { return d == "F32" || d == "F16" || d == "BF16" || d == "F64"; }

void float_values(const std::string& d, const uint8_t* p, size_t n, float* out) {
  if (!is_float_dtype(d)) fail("dtype " + d + " is not a float type (F32, F16, BF16, F64)");
  for (size_t i = 0; i < n; ++i) {
    if (d == "F32") out[i] = load_le<float>(p + 4 * i);
    else if (d == "F64") out[i] = static_cast<float>(load_le<double>(p + 8 * i));
    else if (d == "F16") out[i] = half_to_float(load_le<uint16_t>(p + 2 * i));
    else out[i] = std::bit_cast<float>(static_cast<uint32_t>(load_le<uint16_t>(p + 2 * i)) << 16);
  }
}

Tensor to_tensor(Device& device, const Array& a, const std::string& name) {
  const size_t n = static_cast<size_t>(numel(a.shape));
  const uint8_t* p = a.bytes.data();
  const std::string& d = a.dtype;
  if (is_float_dtype(d)) {
    std::vector<float> v(n);
    float_values(d, p, n, v.data());
    return Tensor::from_host(device, a.shape, v);
  }
  if (d == "BOOL") {
    std::vector<uint8_t> v(p, p + n);
    return Tensor::from_host_bool(device, a.shape, v);
  }
  if (d == "I32" || d == "I64" || d == "I16" || d == "I8" || d == "U8") {
    std::vector<int32_t> v(n);
    for (size_t i = 0; i < n; ++i) {
      if (d == "I32") {
        v[i] = load_le<int32_t>(p + 4 * i);
      } else if (d == "I64") {
        const int64_t x = load_le<int64_t>(p + 8 * i);
        if (x < std::numeric_limits<int32_t>::min() || x > std::numeric_limits<int32_t>::max())
          throw FormatError("tensor \"" + name + "\": I64 value " + std::to_string(x) + " at element " +
                            std::to_string(i) + " does not fit int32");
        v[i] = static_cast<int32_t>(x);
      } else if (d == "I16") {
        v[i] = load_le<int16_t>(p + 2 * i);
      } else if (d == "I8") {
        v[i] = static_cast<int8_t>(p[i]);
      } else {
        v[i] = p[i];
      }
    }
    return Tensor::from_host(device, a.shape, v);
  }
  throw FormatError("tensor \"" + name + "\" has dtype " + d +
                    ", which wgtrain does not read (F32, F16, BF16, F64, I32, I64, I16, I8, U8, BOOL)");
}

Array from_tensor(const Tensor& t) {
  Array a;
  a.shape = t.shape();
  if (t.dtype() == DType::F32) {
    const auto v = t.to_host_f32();
    a.dtype = "F32";
    a.bytes.resize(v.size() * 4);
    if (!v.empty()) std::memcpy(a.bytes.data(), v.data(), a.bytes.size());
  } else {
    const auto v = t.to_host_i32();
    if (t.dtype() == DType::Bool) {
      a.dtype = "BOOL";
      a.bytes.resize(v.size());
      for (size_t i = 0; i < v.size(); ++i) a.bytes[i] = v[i] != 0;
    } else {
      a.dtype = "I32";
      a.bytes.resize(v.size() * 4);
      if (!v.empty()) std::memcpy(a.bytes.data(), v.data(), a.bytes.size());
    }
  }
  return a;
}

// ---- memory-mapped files ----------------------------------------------------------------------------------------

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw FormatError("safetensors: cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw FormatError("safetensors: cannot read '" + path + "': " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw FormatError("safetensors: '" + path + "' is a directory, not a safetensors file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw FormatError("safetensors: cannot map '" + path + "': " + why);
    }
    data_ = static_cast<const uint8_t*>(m);
  }
  ::close(fd);
  try {
    header_ = parse_header({data_, size_});
  } catch (const FormatError& e) {
    unmap();
    throw FormatError(std::string(e.what()) + " (in '" + path + "')");
  }
}

void MappedFile::unmap() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
}

MappedFile::~MappedFile() { unmap(); }

MappedFile::MappedFile(MappedFile&& o) noexcept
    : path_(std::move(o.path_)), data_(std::exchange(o.data_, nullptr)), size_(o.size_),
      header_(std::move(o.header_)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    unmap();
    path_ = std::move(o.path_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = o.size_;
    header_ = std::move(o.header_);
  }
  return *this;
}

const TensorInfo& MappedFile::info(const std::string& name) const {
  auto it = header_.tensors.find(name);
  if (it == header_.tensors.end()) throw FormatError("safetensors: '" + path_ + "' has no tensor '" + name + "'");
  return it->second;
}

std::span<const uint8_t> MappedFile::bytes(const std::string& name) const {
  const TensorInfo& t = info(name);
  return {data_ + header_.data_start + t.begin, static_cast<size_t>(t.end - t.begin)};
}

std::vector<float> MappedFile::to_f32(const std::string& name) const {
  const TensorInfo& t = info(name);
  std::vector<float> out(static_cast<size_t>(numel(t.shape)));
  try {
    float_values(t.dtype, data_ + header_.data_start + t.begin, out.size(), out.data());
  } catch (const FormatError& e) {
    throw FormatError(std::string(e.what()) + " (tensor '" + name + "' in '" + path_ + "')");
  }
  return out;
}

}  // namespace wgtrain::safetensors

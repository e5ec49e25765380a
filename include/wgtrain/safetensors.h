// safetensors files (the format Hugging Face uses): an 8-byte little-endian header length N, N bytes of JSON
// ({"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ..., "__metadata__": {str: str}}),
// then the raw little-endian data, every byte of it belonging to exactly one tensor.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "wgtrain/error.h"
#include "wgtrain/tensor.h"

namespace wgtrain::safetensors {

// A malformed or unusable file. The message is one line and says what is wrong and where.
class FormatError : public ArgumentError {
 public:
  using ArgumentError::ArgumentError;
};

struct Array {
  std::string dtype;  // "F32", "F16", "BF16", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL"
  Shape shape;
  std::vector<uint8_t> bytes;
};

struct Contents {
  std::map<std::string, Array> tensors;
  std::map<std::string, std::string> metadata;
};

// One tensor's entry in a header: its dtype, shape and byte range within the data section.
struct TensorInfo {
  std::string dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

struct Header {
  std::map<std::string, TensorInfo> tensors;
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // file offset of the data section
};

// Bytes per element of a safetensors dtype name; throws FormatError for an unknown one.
size_t dtype_bytes(const std::string& dtype);

// Checks a whole file's header against its size (every check parse() makes) without copying any data.
Header parse_header(std::span<const uint8_t> file);
// Parses a whole file held in memory. Never reads outside `file`; every inconsistency is a FormatError.
Contents parse(std::span<const uint8_t> file);
Contents load(const std::string& path);
std::vector<uint8_t> serialize(const Contents& contents);
// Writes atomically: a temporary file beside `path`, flushed to disk, then renamed over it.
void save(const std::string& path, const Contents& contents);

// To a device tensor: F32, F16, BF16, F64 become float32; I32, I64, I16, I8, U8 become int32 (I64 values must fit);
// BOOL becomes bool. `name` is used in messages.
Tensor to_tensor(Device& device, const Array& array, const std::string& name);
// From a device tensor (any view): float32 as F32, int32 as I32, bool as BOOL.
Array from_tensor(const Tensor& t);

// A file mapped read-only, its header checked as parse() checks it: tensors are read in place, one at a time, so a
// multi-gigabyte checkpoint is never copied whole into memory.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);  // throws FormatError naming the file
  ~MappedFile();
  MappedFile(MappedFile&&) noexcept;
  MappedFile& operator=(MappedFile&&) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, TensorInfo>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  bool has(const std::string& name) const { return header_.tensors.count(name) != 0; }
  const TensorInfo& info(const std::string& name) const;  // throws FormatError for an unknown name
  std::span<const uint8_t> bytes(const std::string& name) const;
  // A float tensor (F32, F16, BF16, F64) converted to float32; other dtypes are a FormatError.
  std::vector<float> to_f32(const std::string& name) const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  Header header_;
  void unmap();
};

}  // namespace wgtrain::safetensors

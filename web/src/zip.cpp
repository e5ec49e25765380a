// The store-only zip writer (zip.h), after PKWARE's APPNOTE: a local header and the bytes for each file, then the
// central directory and its end record.
#include "zip.h"

#include <zlib.h>

#include <fstream>
#include <iterator>
#include <limits>

#include "wgtrain/error.h"

namespace wgtrain::web {
namespace {

void u16(std::vector<uint8_t>& o, uint32_t v) {
  o.push_back(v & 0xFF);
  o.push_back((v >> 8) & 0xFF);
}
void u32(std::vector<uint8_t>& o, uint32_t v) {
  u16(o, v & 0xFFFF);
  u16(o, v >> 16);
}

// The fields a local header and its central-directory entry share, from "version needed" to the name's length.
void common(std::vector<uint8_t>& o, uint32_t crc, uint32_t size, size_t name_len) {
  u16(o, 10);      // version needed: 1.0 (stored)
  u16(o, 0x0800);  // flags: names are UTF-8
  u16(o, 0);       // method: stored
  u16(o, 0);       // time 00:00
  u16(o, 0x0021);  // date 1980-01-01
  u32(o, crc);
  u32(o, size);    // compressed
  u32(o, size);    // uncompressed
  u16(o, static_cast<uint32_t>(name_len));
}

}  // namespace

std::vector<uint8_t> zip_files(const std::vector<std::pair<std::string, std::string>>& entries) {
  constexpr uint64_t kMax = std::numeric_limits<uint32_t>::max();
  if (entries.size() > 0xFFFF) throw ArgumentError("zip: more than 65535 files");
  std::vector<uint8_t> out, central;
  for (const auto& [name, path] : entries) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("zip: cannot read " + path);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (bytes.size() > kMax || out.size() + bytes.size() + name.size() + 30 > kMax)
      throw Error("zip: " + path + " would take the archive past zip's 4 GiB limit");
    const uint32_t crc = static_cast<uint32_t>(crc32(0, bytes.data(), static_cast<uInt>(bytes.size())));
    const uint32_t size = static_cast<uint32_t>(bytes.size()), offset = static_cast<uint32_t>(out.size());
    u32(out, 0x04034b50);
    common(out, crc, size, name.size());
    u16(out, 0);  // extra field length
    out.insert(out.end(), name.begin(), name.end());
    out.insert(out.end(), bytes.begin(), bytes.end());
    u32(central, 0x02014b50);
    u16(central, 0x0314);  // made by: Unix, 2.0
    common(central, crc, size, name.size());
    u16(central, 0);  // extra field
    u16(central, 0);  // comment
    u16(central, 0);  // disk
    u16(central, 0);  // internal attributes
    u32(central, 0100644u << 16);  // external: a regular file, rw-r--r--
    u32(central, offset);
    central.insert(central.end(), name.begin(), name.end());
  }
  if (out.size() + central.size() + 22 > kMax) throw Error("zip: the archive would pass zip's 4 GiB limit");
  const uint32_t cd_at = static_cast<uint32_t>(out.size());
  out.insert(out.end(), central.begin(), central.end());
  u32(out, 0x06054b50);
  u16(out, 0);  // this disk
  u16(out, 0);  // the directory's disk
  u16(out, static_cast<uint32_t>(entries.size()));
  u16(out, static_cast<uint32_t>(entries.size()));
  u32(out, static_cast<uint32_t>(central.size()));
  u32(out, cd_at);
  u16(out, 0);  // comment length
  return out;
}

}  // namespace wgtrain::web

// zlib.h's crc32, compressBound and compress2 for the browser build: see zlib.h.
#include "zlib.h"

#include <array>
#include <cstring>

namespace {

const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> t = [] {
    std::array<uint32_t, 256> r{};
    for (uint32_t n = 0; n < 256; ++n) {
      uint32_t c = n;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      r[n] = c;
    }
    return r;
  }();
  return t;
}

constexpr uLong kBlock = 65535;  // a stored block's largest payload

}  // namespace

extern "C" {

uLong crc32(uLong crc, const Bytef* buf, uInt len) {
  if (!buf) return 0;
  const auto& t = crc_table();
  uint32_t c = static_cast<uint32_t>(crc) ^ 0xFFFFFFFFu;
  for (uInt i = 0; i < len; ++i) c = t[(c ^ buf[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

// 2 header bytes, 5 per block (one block even for no input), 4 of Adler-32.
uLong compressBound(uLong n) { return n + 5 * (n / kBlock + 1) + 6; }

int compress2(Bytef* dest, uLongf* destLen, const Bytef* source, uLong sourceLen, int /*level*/) {
  if (*destLen < compressBound(sourceLen)) return Z_BUF_ERROR;
  Bytef* o = dest;
  *o++ = 0x78;  // deflate, 32K window
  *o++ = 0x01;  // no dictionary, fastest; (0x78 << 8 | 0x01) % 31 == 0
  uLong at = 0;
  do {
    const uLong n = sourceLen - at < kBlock ? sourceLen - at : kBlock;
    *o++ = at + n == sourceLen ? 1 : 0;  // BFINAL, BTYPE 00 (stored)
    *o++ = n & 0xFF;
    *o++ = (n >> 8) & 0xFF;
    *o++ = ~n & 0xFF;
    *o++ = (~n >> 8) & 0xFF;
    if (n) std::memcpy(o, source + at, n);
    o += n;
    at += n;
  } while (at < sourceLen);
  uint32_t a = 1, b = 0;  // Adler-32
  for (uLong i = 0; i < sourceLen; ++i) {
    a = (a + source[i]) % 65521;
    b = (b + a) % 65521;
  }
  const uint32_t adler = (b << 16) | a;
  for (int s = 24; s >= 0; s -= 8) *o++ = (adler >> s) & 0xFF;
  *destLen = static_cast<uLongf>(o - dest);
  return Z_OK;
}

}  // extern "C"

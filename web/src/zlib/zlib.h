// The part of zlib's interface the library uses (src/train/plot.cpp: a PNG's IDAT stream and chunk checksums), for
// the browser build, where Debian's emscripten has no zlib. compress2 writes a valid zlib stream of stored
// (uncompressed) deflate blocks whatever the level: the PNG is larger than zlib would make it, and reads the same.
#pragma once

#include <cstddef>

typedef unsigned char Bytef;
typedef unsigned int uInt;
typedef unsigned long uLong;
typedef uLong uLongf;

#define Z_OK 0
#define Z_BUF_ERROR (-5)

extern "C" {
// CRC-32 (ISO-HDLC, as zlib's and PNG's and zip's) of buf[0, len) continuing from crc (0 to start).
uLong crc32(uLong crc, const Bytef* buf, uInt len);
// The largest output compress2 writes for sourceLen bytes.
uLong compressBound(uLong sourceLen);
// A zlib stream of source into dest; *destLen: its capacity in, the stream's length out. Z_BUF_ERROR when too small.
int compress2(Bytef* dest, uLongf* destLen, const Bytef* source, uLong sourceLen, int level);
}

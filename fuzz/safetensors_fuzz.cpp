// libFuzzer target: the safetensors reader must accept or reject (FormatError) any bytes, never crash or read out
// of bounds. Build and run with scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <span>

#include "wgtrain/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto c = wgtrain::safetensors::parse(std::span<const uint8_t>(data, size));
    // What parses must serialise and parse back to the same tensors.
    const auto again = wgtrain::safetensors::parse(wgtrain::safetensors::serialize(c));
    if (again.tensors.size() != c.tensors.size()) __builtin_trap();
  } catch (const wgtrain::safetensors::FormatError&) {
  }
  return 0;
}

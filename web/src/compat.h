// Forced into every file of the browser build (web/wasm.cmake): what Debian's emscripten 3.1.6 (libc++ 14) lacks of
// the C++20 library the sources use. The native build never sees this file.
#pragma once

#include <version>

#if !defined(__cpp_lib_bit_cast)
#include <type_traits>
namespace std {
// libc++ 14 has the compiler builtin but not the library function.
template <class To, class From>
  requires(sizeof(To) == sizeof(From) && is_trivially_copyable_v<To> && is_trivially_copyable_v<From>)
constexpr To bit_cast(const From& from) noexcept {
  return __builtin_bit_cast(To, from);
}
}  // namespace std
#endif

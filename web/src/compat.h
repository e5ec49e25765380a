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

#if defined(_LIBCPP_VERSION) && _LIBCPP_VERSION < 170000
// libc++ 14's from_chars reads integers only; the chat templates' number literals and loss.csv read floats. This
// one reads what from_chars's `general` format reads (no leading space or '+', no "0x" prefix), through strtod in
// the "C" locale (a browser build has no other).
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>
namespace std {
template <class T>
  requires(is_same_v<T, double> || is_same_v<T, float>)
from_chars_result from_chars(const char* first, const char* last, T& value) {
  if (first == last || *first == ' ' || *first == '\t' || *first == '\n' || *first == '+')
    return {first, errc::invalid_argument};
  string text(first, last);
  const size_t digits = text[0] == '-' ? 1 : 0;
  if (text.size() > digits + 1 && text[digits] == '0' && (text[digits + 1] == 'x' || text[digits + 1] == 'X'))
    text.resize(digits + 1);  // "0x1p3" reads as 0, as from_chars does
  char* end = nullptr;
  errno = 0;
  const double v = strtod(text.c_str(), &end);
  if (end == text.c_str()) return {first, errc::invalid_argument};
  const char* ptr = first + (end - text.c_str());
  if (errno == ERANGE || (is_same_v<T, float> && v != 0 && (v > 3.4028234663852886e38 || v < -3.4028234663852886e38)))
    return {ptr, errc::result_out_of_range};
  value = static_cast<T>(v);
  return {ptr, errc{}};
}

// Floating-point to_chars, scientific only (what the chat templates' float formatting asks for): the shortest
// digits that read back to the same value, as to_chars gives them, through snprintf's %e. Other formats report
// errc::not_supported.
inline to_chars_result to_chars(char* first, char* last, double value, chars_format fmt) {
  if (fmt != chars_format::scientific) return {last, errc::not_supported};
  char buf[40];
  int n = 0;
  for (int precision = 0; precision <= 17; ++precision) {
    n = snprintf(buf, sizeof buf, "%.*e", precision, value);
    if (strtod(buf, nullptr) == value) break;
  }
  if (n < 0 || n > last - first) return {last, errc::value_too_large};
  for (int i = 0; i < n; ++i) first[i] = buf[i];
  return {first + n, errc{}};
}
}  // namespace std
#endif

// Range checks for the CLI's numeric options, as CLI11 validators: a value out of range is an error naming the
// option and the range, before any work. A default is spelled by leaving the option out, never by 0 or -1.
// Header-only, so that tests can check the validators without the binary.
#pragma once

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace wgtrain::cli {

namespace detail {

// The whole text as an integer, or false.
inline bool parse_int(const std::string& s, long long& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  v = std::strtoll(s.c_str(), &end, 10);
  return errno == 0 && end == s.c_str() + s.size();
}

// The whole text as a finite number, or false (nan and inf are not numbers a training run can use).
inline bool parse_finite(const std::string& s, double& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  v = std::strtod(s.c_str(), &end);
  return errno == 0 && end == s.c_str() + s.size() && std::isfinite(v);
}

inline std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace detail

// An integer >= min. `hint` follows the error (e.g. "leave it out for the default").
inline CLI::Validator integer_at_least(long long min, const std::string& hint = "") {
  return CLI::Validator(
      [min, hint](std::string& s) -> std::string {
        long long v = 0;
        if (!detail::parse_int(s, v)) return "'" + s + "' is not an integer";
        if (v < min)
          return "must be at least " + std::to_string(min) + ", got " + s + (hint.empty() ? "" : "; " + hint);
        return {};
      },
      "INT >= " + std::to_string(min));
}

// A finite number in [lo, hi] (or above lo when `lo_open`): nan, inf and out-of-range values are errors.
inline CLI::Validator number_in(double lo, double hi, bool lo_open = false) {
  std::string desc = std::isinf(hi) ? std::string(lo_open ? "NUMBER > " : "NUMBER >= ") + detail::number_text(lo)
                                    : "NUMBER in " + std::string(lo_open ? "(" : "[") + detail::number_text(lo) +
                                          ", " + detail::number_text(hi) + "]";
  return CLI::Validator(
      [lo, hi, lo_open, desc](std::string& s) -> std::string {
        double v = 0;
        if (!detail::parse_finite(s, v)) return "'" + s + "' is not a finite number (expected a " + desc + ")";
        if (lo_open ? !(v > lo) : !(v >= lo)) return "expected a " + desc + ", got " + s;
        if (v > hi) return "expected a " + desc + ", got " + s;
        return {};
      },
      desc);
}

// A non-negative integer that fits 64 bits unsigned (a seed): "-1" is not silently 2^64 - 1.
inline CLI::Validator unsigned_integer() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
          return "expected a non-negative integer, got '" + s + "'";
        errno = 0;
        (void)std::strtoull(s.c_str(), nullptr, 10);
        if (errno == ERANGE) return "'" + s + "' does not fit 64 bits";
        return {};
      },
      "UINT");
}

}  // namespace wgtrain::cli

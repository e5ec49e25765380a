#include "tokenizer/unicode_tables.h"

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <vector>

namespace wgtrain::tok::tables {

namespace {

#include "tokenizer/unicode_tables.inc"

// Hangul syllables: decomposed and composed by arithmetic (Unicode 3.12), not listed in the tables.
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

// The value of the range holding c, in a table of start << shift | value sorted by start.
template <size_t N>
uint32_t range_value(const uint32_t (&table)[N], char32_t c, int shift) {
  const uint32_t key = (static_cast<uint32_t>(c) << shift) | ((1u << shift) - 1);
  const uint32_t* it = std::upper_bound(std::begin(table), std::end(table), key);  // first range starting after c
  return it == std::begin(table) ? 0 : *(it - 1) & ((1u << shift) - 1);
}

// The decomposition of c in a table of (code point, offset << 5 | length) pairs; false when c has none.
template <size_t N>
bool find_decomposition(const uint32_t (&table)[N], char32_t c, std::vector<char32_t>& out) {
  size_t lo = 0, hi = N / 2;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (table[2 * mid] < c) lo = mid + 1;
    else hi = mid;
  }
  if (lo == N / 2 || table[2 * lo] != c) return false;
  const uint32_t v = table[2 * lo + 1];
  out.insert(out.end(), kDecompositionPool + (v >> 5), kDecompositionPool + (v >> 5) + (v & 31));
  return true;
}

void decompose(char32_t c, bool compat, std::vector<char32_t>& out) {
  if (c >= kSBase && c < kSBase + kSCount) {
    const char32_t s = c - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  if (c < 0xC0) {  // nothing below U+00C0 decomposes canonically; compatibility mappings start at U+00A0
    if (!compat || c < 0xA0) {
      out.push_back(c);
      return;
    }
  }
  if (compat && find_decomposition(kCompatibilityDecompositions, c, out)) return;
  if (find_decomposition(kCanonicalDecompositions, c, out)) return;
  out.push_back(c);
}

// The primary composite of (a, b), or 0.
char32_t compose(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  size_t lo = 0, hi = std::size(kCompositions) / 3;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    const uint32_t x = kCompositions[3 * mid], y = kCompositions[3 * mid + 1];
    if (x < a || (x == a && y < b)) lo = mid + 1;
    else hi = mid;
  }
  if (lo < std::size(kCompositions) / 3 && kCompositions[3 * lo] == a && kCompositions[3 * lo + 1] == b)
    return kCompositions[3 * lo + 2];
  return 0;
}

}  // namespace

uint8_t properties(char32_t c) { return static_cast<uint8_t>(range_value(kPropertyRanges, c, 5)); }
uint8_t combining_class(char32_t c) { return static_cast<uint8_t>(range_value(kCombiningClassRanges, c, 8)); }

std::string normalize(std::string_view s, NormalForm form) {
  const bool compat = form == NormalForm::NFKC || form == NormalForm::NFKD;
  const bool composed = form == NormalForm::NFC || form == NormalForm::NFKC;
  std::vector<char32_t> d;
  d.reserve(s.size());
  for (size_t i = 0; i < s.size();) decompose(next_code_point(s, i), compat, d);
  // Canonical ordering: each run of non-starters sorted by combining class, stably.
  std::vector<uint8_t> cc(d.size());
  for (size_t i = 0; i < d.size(); ++i) cc[i] = combining_class(d[i]);
  for (size_t i = 0; i < d.size();) {
    if (cc[i] == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < d.size() && cc[j] != 0) ++j;
    for (size_t a = i + 1; a < j; ++a)  // insertion sort: runs are short
      for (size_t b = a; b > i && cc[b - 1] > cc[b]; --b) {
        std::swap(cc[b - 1], cc[b]);
        std::swap(d[b - 1], d[b]);
      }
    i = j;
  }
  std::string out;
  out.reserve(s.size());
  if (!composed) {
    for (char32_t c : d) append_utf8(out, c);
    return out;
  }
  // Canonical composition: a character joins the last starter unless a character between them is blocking (a
  // starter, or one of the same or a higher class).
  std::vector<char32_t> r;
  r.reserve(d.size());
  ptrdiff_t starter = -1;
  int last_cc = -1;  // the class of the last character kept after the starter; -1: none
  for (size_t i = 0; i < d.size(); ++i) {
    const int c_cc = cc[i];
    if (starter >= 0 && (last_cc == -1 || (last_cc != 0 && last_cc < c_cc))) {
      if (const char32_t p = compose(r[starter], d[i])) {
        r[starter] = p;
        continue;
      }
    }
    if (c_cc == 0) {
      starter = static_cast<ptrdiff_t>(r.size());
      last_cc = -1;
    } else {
      last_cc = c_cc;
    }
    r.push_back(d[i]);
  }
  for (char32_t c : r) append_utf8(out, c);
  return out;
}

std::string lowercase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      out.push_back(static_cast<char>(b >= 'A' && b <= 'Z' ? b + 32 : b));
      ++i;
      continue;
    }
    const char32_t c = next_code_point(s, i);
    // The last run starting at or before c.
    size_t lo = 0, hi = std::size(kLowercaseRuns) / 4;
    while (lo < hi) {
      const size_t mid = (lo + hi) / 2;
      if (kLowercaseRuns[4 * mid] <= c) lo = mid + 1;
      else hi = mid;
    }
    if (lo > 0) {
      const uint32_t* r = kLowercaseRuns + 4 * (lo - 1);
      if (c <= r[1] && (c - r[0]) % r[2] == 0) {
        append_utf8(out, static_cast<char32_t>(c + r[3]));  // unsigned wrap-around gives c + distance
        continue;
      }
    }
    bool longer = false;
    for (size_t k = 0; k < std::size(kLowercaseLonger); k += 2 + kLowercaseLonger[k + 1]) {
      if (kLowercaseLonger[k] != c) continue;
      for (uint32_t m = 0; m < kLowercaseLonger[k + 1]; ++m) append_utf8(out, kLowercaseLonger[k + 2 + m]);
      longer = true;
      break;
    }
    if (!longer) append_utf8(out, c);
  }
  return out;
}

}  // namespace wgtrain::tok::tables

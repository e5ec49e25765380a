#include "tokenizer/unicode.h"

// Character properties, normalisation and lowercase come from ICU natively and from generated tables
// (unicode_tables.h) where WGTRAIN_UNICODE_TABLES is set: the browser build, which has no ICU.
#if WGTRAIN_UNICODE_TABLES
#include "tokenizer/unicode_tables.h"
#else
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/ustring.h>
#endif

#include "wgtrain/error.h"

namespace wgtrain::tok {

char32_t next_code_point(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  const size_t n = utf8_length(b0);
  if (n == 1 || i + n > s.size()) {
    ++i;
    return b0;
  }
  char32_t c = b0 & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return c;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

size_t count_code_points(std::string_view s) {
  size_t n = 0;
  for (unsigned char b : s) n += (b & 0xC0) != 0x80;
  return n;
}

namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 when invalid; `valid_prefix` gets how many of its bytes form the
// maximal prefix of a valid sequence (what one U+FFFD replaces).
size_t valid_sequence_at(std::string_view s, size_t i, size_t& valid_prefix) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  valid_prefix = 1;
  if (b0 < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte (Unicode Table 3-7)
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t k = 1; k < n; ++k) {
    if (i + k >= s.size()) return 0;
    const auto b = static_cast<unsigned char>(s[i + k]);
    if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return 0;
    valid_prefix = k + 1;
  }
  return n;
}

}  // namespace

bool is_valid_utf8(std::string_view s) {
  size_t i = 0, prefix;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = valid_sequence_at(s, i, prefix);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string utf8_lossy(std::string_view s) {
  if (is_valid_utf8(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 16);
  size_t i = 0, prefix;
  while (i < s.size()) {
    const size_t n = valid_sequence_at(s, i, prefix);
    if (n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      i += prefix;
    }
  }
  return out;
}

size_t complete_utf8_prefix(std::string_view s) {
  // Look back at most 3 bytes for a lead byte whose sequence runs past the end.
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const auto b = static_cast<unsigned char>(s[s.size() - back]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: keep looking for its lead
    if (b >= 0xC0 && utf8_length(b) > back) {
      size_t prefix;
      valid_sequence_at(s, s.size() - back, prefix);
      // Only a lead whose bytes so far are a valid start is "not complete yet"; anything else is just invalid.
      if (prefix == back) return s.size() - back;
    }
    break;
  }
  return s.size();
}

#if WGTRAIN_UNICODE_TABLES

bool is_whitespace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
  return tables::properties(c) & tables::kWhiteSpace;
}

bool is_numeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return tables::properties(c) & tables::kNumeric;
}

bool is_word_char(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  return tables::properties(c) & tables::kWord;
}

bool is_combining_mark(char32_t c) {
  if (c < 0x300) return false;
  return tables::properties(c) & tables::kMark;
}

bool is_punctuation(char32_t c) { return tables::properties(c) & tables::kPunctuation; }

std::string normalize(std::string_view s, NormalForm form) {
  bool ascii = true;
  for (unsigned char b : s) ascii &= b < 0x80;
  if (ascii) return std::string(s);  // every form leaves ASCII as it is
  return tables::normalize(s, form);
}

std::string lowercase(std::string_view s) { return tables::lowercase(s); }

#else

bool is_whitespace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_WHITE_SPACE);
}

bool is_numeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  const int8_t t = u_charType(static_cast<UChar32>(c));
  return t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER;
}

bool is_word_char(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  const auto u = static_cast<UChar32>(c);
  if (u_hasBinaryProperty(u, UCHAR_ALPHABETIC) || u_hasBinaryProperty(u, UCHAR_JOIN_CONTROL)) return true;
  const int8_t t = u_charType(u);
  return t == U_NON_SPACING_MARK || t == U_ENCLOSING_MARK || t == U_COMBINING_SPACING_MARK ||
         t == U_DECIMAL_DIGIT_NUMBER || t == U_CONNECTOR_PUNCTUATION;
}

bool is_combining_mark(char32_t c) {
  if (c < 0x300) return false;
  const int8_t t = u_charType(static_cast<UChar32>(c));
  return t == U_NON_SPACING_MARK || t == U_ENCLOSING_MARK || t == U_COMBINING_SPACING_MARK;
}

bool is_punctuation(char32_t c) {
  const int8_t t = u_charType(static_cast<UChar32>(c));
  return t == U_CONNECTOR_PUNCTUATION || t == U_DASH_PUNCTUATION || t == U_START_PUNCTUATION ||
         t == U_END_PUNCTUATION || t == U_INITIAL_PUNCTUATION || t == U_FINAL_PUNCTUATION ||
         t == U_OTHER_PUNCTUATION;
}

std::string normalize(std::string_view s, NormalForm form) {
  bool ascii = true;
  for (unsigned char b : s) ascii &= b < 0x80;
  if (ascii) return std::string(s);  // every form leaves ASCII as it is
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  switch (form) {
    case NormalForm::NFC: n = icu::Normalizer2::getNFCInstance(status); break;
    case NormalForm::NFD: n = icu::Normalizer2::getNFDInstance(status); break;
    case NormalForm::NFKC: n = icu::Normalizer2::getNFKCInstance(status); break;
    case NormalForm::NFKD: n = icu::Normalizer2::getNFKDInstance(status); break;
  }
  if (U_FAILURE(status)) throw Error(std::string("ICU normalizer unavailable: ") + u_errorName(status));
  std::string out;
  out.reserve(s.size());
  icu::StringByteSink<std::string> sink(&out);
  n->normalizeUTF8(0, icu::StringPiece(s.data(), static_cast<int32_t>(s.size())), sink, nullptr, status);
  if (U_FAILURE(status)) throw Error(std::string("Unicode normalization failed: ") + u_errorName(status));
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
    // The full mapping of this one character: alone in its string, no casing context applies (Σ -> σ).
    UChar src[2];
    int32_t src_len = 0;
    U16_APPEND_UNSAFE(src, src_len, static_cast<UChar32>(c));
    UChar dst[8];
    UErrorCode status = U_ZERO_ERROR;
    const int32_t n = u_strToLower(dst, 8, src, src_len, "", &status);
    if (U_FAILURE(status) || n > 8) {
      append_utf8(out, c);
      continue;
    }
    for (int32_t k = 0; k < n;) {
      UChar32 lc;
      U16_NEXT_UNSAFE(dst, k, lc);
      append_utf8(out, static_cast<char32_t>(lc));
    }
  }
  return out;
}

#endif

}  // namespace wgtrain::tok

// UTF-8 and the few Unicode facts the tokenizer pipeline needs, with the semantics of the Rust code that
// Hugging Face's `tokenizers` runs: String::from_utf8_lossy, char::is_whitespace, char::is_numeric, char::to_lowercase,
// the regex crate's \w, and the unicode-normalization forms (from ICU natively; in the browser build from tables
// generated from ICU: unicode_tables.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace wgtrain::tok {

// Bytes of the UTF-8 sequence a lead byte starts (1 for a byte that cannot lead one).
inline size_t utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xF0) return 4;
  if (lead >= 0xE0) return 3;
  if (lead >= 0xC0) return 2;
  return 1;
}

// The code point at s[i] of valid UTF-8; advances i past it.
char32_t next_code_point(std::string_view s, size_t& i);
void append_utf8(std::string& out, char32_t c);
size_t count_code_points(std::string_view s);

bool is_valid_utf8(std::string_view s);
// Invalid sequences become U+FFFD, one per maximal invalid subpart: Rust's String::from_utf8_lossy.
std::string utf8_lossy(std::string_view bytes);
// Length of the longest prefix of s that ends on a complete character (s may end in a cut one).
size_t complete_utf8_prefix(std::string_view s);

bool is_whitespace(char32_t c);       // White_Space: Rust's char::is_whitespace and the regex crate's \s
bool is_numeric(char32_t c);          // general categories Nd, Nl, No: char::is_numeric
bool is_word_char(char32_t c);        // the regex crate's Unicode \w
bool is_combining_mark(char32_t c);   // general categories Mn, Mc, Me
bool is_punctuation(char32_t c);      // general categories P*: the Punctuation pre-tokenizer's test

enum class NormalForm { NFC, NFD, NFKC, NFKD };
std::string normalize(std::string_view s, NormalForm form);
// Each character mapped by its full lowercase mapping, without context (char::to_lowercase, one char at a time).
std::string lowercase(std::string_view s);

}  // namespace wgtrain::tok

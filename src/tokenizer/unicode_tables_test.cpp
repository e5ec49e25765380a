// The generated Unicode tables (what the browser build uses) against ICU (what the native build uses): every code
// point's properties, combining class, normal forms and lowercase, and random strings of combining sequences.
#include <gtest/gtest.h>

#include <random>

#include "tokenizer/unicode.h"
#include "tokenizer/unicode_tables.h"

#include <unicode/uchar.h>

namespace wgtrain::tok {
namespace {

bool is_scalar(char32_t c) { return c < 0xD800 || (c > 0xDFFF && c <= 0x10FFFF); }

TEST(TokenizerUnicode, TablesEqualIcuOnEveryCodePoint) {
  int mismatches = 0;
  const NormalForm forms[] = {NormalForm::NFC, NormalForm::NFD, NormalForm::NFKC, NormalForm::NFKD};
  for (char32_t c = 0; c <= 0x10FFFF; ++c) {
    if (!is_scalar(c)) continue;
    const uint8_t p = tables::properties(c);
    const bool ok_props = is_whitespace(c) == bool(p & tables::kWhiteSpace) &&
                          is_numeric(c) == bool(p & tables::kNumeric) && is_word_char(c) == bool(p & tables::kWord) &&
                          is_punctuation(c) == bool(p & tables::kPunctuation) &&
                          (c < 0x300 || is_combining_mark(c) == bool(p & tables::kMark)) &&
                          tables::combining_class(c) == u_getCombiningClass(static_cast<UChar32>(c));
    std::string s;
    append_utf8(s, c);
    bool ok_text = lowercase(s) == tables::lowercase(s);
    for (NormalForm f : forms) ok_text &= normalize(s, f) == tables::normalize(s, f);
    if (!(ok_props && ok_text) && ++mismatches <= 10) ADD_FAILURE() << "U+" << std::hex << uint32_t(c);
  }
  EXPECT_EQ(mismatches, 0);
}

// Strings from a pool rich in composition and reordering cases: starters that compose, marks of several classes,
// Hangul jamo and syllables, compatibility characters, singletons and exclusions.
TEST(TokenizerUnicode, TablesEqualIcuOnRandomSequences) {
  const char32_t pool[] = {'a', 'e', 'o', 'A', 'K', 0x300, 0x301, 0x302, 0x308, 0x316, 0x323, 0x327, 0x328, 0x345,
                           0x1100, 0x1161, 0x11A8, 0xAC00, 0xAC01, 0xC5, 0x212B, 0x2126, 0x1E0A, 0x1E0C, 0x307,
                           0xFB01, 0x2460, 0xFF21, 0x3099, 0x304B, 0x309A, 0x0F73, 0x0F71, 0x0F72, 0x05B0, 0x05B7,
                           0x0340, 0x0344, 0x1D15E, 0x1D165, 0x2ADC, 0x0958, 0x093C, 0x0915, 0x3B1, 0x313, 0x342,
                           0x1F80, 0x0130, 0x03A3, 0x1E9E, ' ', 0x00A0, 0x0CCB, 0x0CC6, 0x0CC2, 0x0CD5};
  std::mt19937 rng(15);
  std::uniform_int_distribution<size_t> pick(0, std::size(pool) - 1), len(1, 12);
  const NormalForm forms[] = {NormalForm::NFC, NormalForm::NFD, NormalForm::NFKC, NormalForm::NFKD};
  int mismatches = 0;
  for (int n = 0; n < 200000; ++n) {
    std::string s;
    for (size_t k = len(rng); k > 0; --k) append_utf8(s, pool[pick(rng)]);
    bool ok = lowercase(s) == tables::lowercase(s);
    for (NormalForm f : forms) ok &= normalize(s, f) == tables::normalize(s, f);
    if (!ok && ++mismatches <= 10) ADD_FAILURE() << "differs on '" << s << "'";
  }
  EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace wgtrain::tok

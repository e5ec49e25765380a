// The Unicode data of unicode.h from generated tables (unicode_tables.inc, written from ICU by
// unicode_tables_gen.cpp) rather than from ICU at run time: what the browser build uses, where there is no ICU. The
// native build keeps ICU, and src/tokenizer/unicode_tables_test.cpp checks the two agree on every code point.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tokenizer/unicode.h"

namespace wgtrain::tok::tables {

enum : uint8_t { kWhiteSpace = 1, kNumeric = 2, kWord = 4, kMark = 8, kPunctuation = 16 };
uint8_t properties(char32_t c);  // the bits above
uint8_t combining_class(char32_t c);

std::string normalize(std::string_view s, NormalForm form);  // UAX #15, as ICU's Normalizer2
std::string lowercase(std::string_view s);                   // as unicode.h's lowercase

}  // namespace wgtrain::tok::tables

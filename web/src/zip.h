// A store-only zip writer (no compression, no zip64): what the page puts its downloads in (a peft adapter, a run
// directory). Any unzip reads it; entries carry no timestamps (1980-01-01) so equal inputs give equal archives.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace wgtrain::web {

// A zip of the given files: (name in the archive, path to read). Throws Error for an unreadable file or an archive
// over zip's 4 GiB limit.
std::vector<uint8_t> zip_files(const std::vector<std::pair<std::string, std::string>>& entries);

}  // namespace wgtrain::web

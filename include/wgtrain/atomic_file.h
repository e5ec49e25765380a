// Every file wgtrain writes (checkpoints, safetensors, tokenizer and config files, loss.csv, loss.png, adapters,
// exports) is written through these, so that a reader, or a run after a crash or a full disk, finds either the
// previous file or the whole new one, never a part of it:
//   1. the bytes go to a temporary file in the same directory, named `path + ".tmp." + pid` (the name
//      RunDirectory recognises, and removes once its process is gone);
//   2. the temporary is flushed to disk (fsync) and closed;
//   3. it is renamed over `path` (atomic within one file system);
//   4. the directory is flushed (fsync), so that the rename itself survives a crash.
// On any failure the temporary is removed, `path` is left as it was, and Error says which step failed and why.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace wgtrain {

void write_file_atomic(const std::string& path, std::span<const uint8_t> bytes);
void write_file_atomic(const std::string& path, std::string_view text);

// Copies the file `from` to `to` the same way (a copy is whole or absent).
void copy_file_atomic(const std::string& from, const std::string& to);

// The temporary file name write_file_atomic uses for `path` in this process.
std::string atomic_temporary_name(const std::string& path);

// Flushes a directory's entries to disk (after a rename into it). Best effort: file systems that cannot sync a
// directory are not an error.
void sync_directory(const std::string& dir);

}  // namespace wgtrain

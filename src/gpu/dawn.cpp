#include "gpu/dawn.h"

#ifndef __EMSCRIPTEN__
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "gpu/napi_imports.h"
#endif

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

#include "wgtrain/error.h"

namespace wgtrain::gpu {

#ifdef __EMSCRIPTEN__
// The browser build: the table is the browser's WebGPU, through JavaScript (web/src/webgpu_table.cpp).
const webgpu::Api& browser_webgpu();

std::string dawn_library_path() { return "the browser's WebGPU (navigator.gpu)"; }

const webgpu::Api& dawn() { return browser_webgpu(); }

#else

// Stand-ins for the Node-API functions the library imports (gpu/napi_imports.h says why). Exported from every
// executable that links wgtrain, so that dlopen binds them; reached only if Dawn's JavaScript glue ever ran.
#define WGTRAIN_NAPI_STUB(name)                                                                        \
  extern "C" __attribute__((visibility("default"), used)) void name() {                             \
    std::fprintf(stderr, "wgtrain: Dawn called Node-API's " #name ", which exists only inside Node\n"); \
    std::abort();                                                                                    \
  }
WGTRAIN_NAPI_IMPORTS(WGTRAIN_NAPI_STUB)
#undef WGTRAIN_NAPI_STUB

std::string dawn_library_path() {
  if (const char* env = std::getenv("WGTRAIN_DAWN_LIBRARY"); env && *env) return env;
#ifdef WGTRAIN_DAWN_DEFAULT_PATH
  if (std::filesystem::exists(WGTRAIN_DAWN_DEFAULT_PATH)) return WGTRAIN_DAWN_DEFAULT_PATH;
#endif
  return "linux-x64.dawn.node";
}

std::map<std::string, uint64_t> elf_local_symbols(const std::string& path, const std::vector<std::string>& names) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open the Dawn library '" + path + "': " + std::strerror(errno));
  struct stat st {};
  fstat(fd, &st);
  void* map = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) throw Error("cannot map the Dawn library '" + path + "': " + std::strerror(errno));
  const auto* m = static_cast<const unsigned char*>(map);
  const size_t size = static_cast<size_t>(st.st_size);
  std::map<std::string, uint64_t> found;
  std::string problem;
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(m);
  if (size < sizeof(Elf64_Ehdr) || std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
      eh->e_shoff + uint64_t(eh->e_shnum) * sizeof(Elf64_Shdr) > size) {
    problem = "not a 64-bit ELF file";
  } else {
    const auto* sh = reinterpret_cast<const Elf64_Shdr*>(m + eh->e_shoff);
    const std::set<std::string> wanted(names.begin(), names.end());
    for (int i = 0; i < eh->e_shnum; ++i) {
      if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum) continue;
      const Elf64_Shdr& strs = sh[sh[i].sh_link];
      if (sh[i].sh_offset + sh[i].sh_size > size || strs.sh_offset + strs.sh_size > size) break;
      const auto* syms = reinterpret_cast<const Elf64_Sym*>(m + sh[i].sh_offset);
      const char* strtab = reinterpret_cast<const char*>(m + strs.sh_offset);
      for (size_t k = 0; k < sh[i].sh_size / sizeof(Elf64_Sym); ++k) {
        if (!syms[k].st_name || !syms[k].st_value || syms[k].st_name >= strs.sh_size) continue;
        const char* name = strtab + syms[k].st_name;
        if (wanted.count(name)) found.emplace(name, syms[k].st_value);
      }
    }
  }
  munmap(map, size);
  if (!problem.empty()) throw Error("the Dawn library '" + path + "' is " + problem);
  return found;
}

namespace {

webgpu::Api load() {
  const std::string path = dawn_library_path();
  const char* hint = ". Run scripts/setup.sh, or point WGTRAIN_DAWN_LIBRARY at npm webgpu@0.4.0's "
                     "dist/linux-x64.dawn.node.";
  // The library is a Node addon: its wgpu* functions are local symbols of its .symtab, not dynamic exports. Read
  // their addresses from the file first (and fail before loading anything if one is missing).
  std::vector<std::string> names = {"dawnProcSetProcs", "_ZN4dawn6native8GetProcsEv"};
#define WGTRAIN_NAME(ret, name, params) names.push_back("wgpu" #name);
  WGPU_ABI_FUNCTIONS(WGTRAIN_NAME)
#undef WGTRAIN_NAME
  if (!std::filesystem::exists(path)) throw Error("the Dawn library '" + path + "' does not exist" + hint);
  const auto symbols = elf_local_symbols(path, names);
  std::vector<std::string> missing;
  for (const auto& n : names)
    if (!symbols.count(n)) missing.push_back(n);
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    throw Error("the Dawn library '" + path + "' lacks " + std::to_string(missing.size()) +
                " function(s) wgtrain needs: " + list + " (is it npm webgpu@0.4.0's dist/linux-x64.dawn.node?)");
  }
  // RTLD_LOCAL: Dawn's bundled SPIRV-Tools and Tint symbols stay out of the global namespace. Its napi_* imports
  // bind to the stand-ins above.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    throw Error("cannot load the Dawn library '" + path + "': " + (why ? why : "unknown error") + hint);
  }
  link_map* lm = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm) throw Error("cannot find where '" + path + "' was loaded");
  const uintptr_t base = lm->l_addr;
  auto at = [&](const std::string& n) { return reinterpret_cast<void*>(base + symbols.at(n)); };
  webgpu::Api api;
#define WGTRAIN_RESOLVE(ret, name, params) api.name = reinterpret_cast<decltype(api.name)>(at("wgpu" #name));
  WGPU_ABI_FUNCTIONS(WGTRAIN_RESOLVE)
#undef WGTRAIN_RESOLVE
  // The wgpu* functions dispatch through a process-wide table of procs, empty until set: Dawn native's.
  const auto get_procs = reinterpret_cast<const void* (*)()>(at("_ZN4dawn6native8GetProcsEv"));
  const auto set_procs = reinterpret_cast<void (*)(const void*)>(at("dawnProcSetProcs"));
  set_procs(get_procs());
  // The handle is never closed: Dawn keeps threads and static state alive until process exit.
  return api;
}

}  // namespace

const webgpu::Api& dawn() {
  static std::once_flag once;
  static webgpu::Api api;
  static std::string failure;
  std::call_once(once, [] {
    try {
      api = load();
    } catch (const Error& e) {
      failure = e.what();
    }
  });
  if (!failure.empty()) throw Error(failure);
  return api;
}

#endif  // __EMSCRIPTEN__

}  // namespace wgtrain::gpu

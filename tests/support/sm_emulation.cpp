#include "support/sm_emulation.h"

#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <unistd.h>

#include "gpu/kernels.h"
#include "wgtrain/error.h"

namespace wgtrain::test {

namespace fs = std::filesystem;

namespace {

// The builtins written out, for a workgroup of `subgroups` subgroups of 32 lanes.
std::string builtins(int subgroups) {
  return R"(
// The emulation's builtins (tests/support/sm_emulation.h). A product passes its operands, 8 rows at a time, through
// the subgroup's 128 floats of sm_x (the kernels call it in uniform control flow, so it may hold barriers).
struct SMX { v: array<f32, 8> }
var<private> sm_li: u32;
var<workgroup> sm_x: array<f32, )" +
         std::to_string(128 * subgroups) + R"(>;
fn rf16(x: f32) -> f32 { return unpack2x16float(pack2x16float(vec2<f32>(x, 0.0))).x; }
fn rf16v(x: vec4<f32>) -> vec4<f32> { return vec4<f32>(rf16(x.x), rf16(x.y), rf16(x.z), rf16(x.w)); }
// The index of the lane's element e in a fragment at `off` of an array, row-major or column-major.
fn sm_at(off: u32, cm: bool, stride: u32, e: u32) -> u32 {
  let i = (sm_li % 32u) / 2u;
  let j = 8u * (sm_li % 2u) + e;
  return select(off + i * stride + j, off + j * stride + i, cm);
}
fn smmma(a: SMX, b: SMX, c: SMX) -> SMX {
  let x = 128u * (sm_li / 32u);
  let i = (sm_li % 32u) / 2u;
  let j0 = 8u * (sm_li % 2u);
  var row: array<f32, 16>;
  var r = c;
  for (var h = 0u; h < 2u; h = h + 1u) {  // rows 8 h to 8 h + 7 of a, then of b
    workgroupBarrier();
    if (i / 8u == h) {
      for (var e = 0u; e < 8u; e = e + 1u) { sm_x[x + (i % 8u) * 16u + j0 + e] = a.v[e]; }
    }
    workgroupBarrier();
    if (i / 8u == h) {
      for (var k = 0u; k < 16u; k = k + 1u) { row[k] = sm_x[x + (i % 8u) * 16u + k]; }
    }
  }
  for (var h = 0u; h < 2u; h = h + 1u) {
    workgroupBarrier();
    if (i / 8u == h) {
      for (var e = 0u; e < 8u; e = e + 1u) { sm_x[x + (i % 8u) * 16u + j0 + e] = b.v[e]; }
    }
    workgroupBarrier();
    for (var e = 0u; e < 8u; e = e + 1u) {
      var acc = r.v[e];
      for (var k = 0u; k < 8u; k = k + 1u) { acc = fma(row[8u * h + k], sm_x[x + k * 16u + j0 + e], acc); }
      r.v[e] = acc;
    }
  }
  return r;
}
)";
}

}  // namespace

std::string sm_emulated(std::string s, bool pack_f16) {
  s = std::regex_replace(s, std::regex(R"(//[^\n]*)"), "");  // comments speak of subgroups too
  for (const char* e : {"enable f16;\n", "enable chromium_experimental_subgroup_matrix;\n",
                        "enable chromium_disable_uniformity_analysis;\n"}) {
    for (size_t at; (at = s.find(e)) != std::string::npos;) s.erase(at, std::string(e).size());
  }
  // Packed f16 arrays: two values a word, each stored on its own (an atomic and, then or: neighbouring lanes store
  // the two halves of a word at once).
  std::set<std::string> packed;
  if (pack_f16) {
    const std::regex decl(R"(var<workgroup> (\w+): array<f16, ([^>]+)>;)");
    for (std::sregex_iterator i(s.begin(), s.end(), decl), end; i != end; ++i) packed.insert((*i)[1]);
    s = std::regex_replace(s, decl, "var<workgroup> $1: array<atomic<u32>, (($2) + 1u) / 2u>;");
    for (const std::string& a : packed) {
      s = std::regex_replace(s, std::regex("\\b" + a + R"(\[([^\]\n]*)\] = ([^;\n]*);)"), "st16_" + a + "($1, $2);");
      if (std::regex_search(s, std::regex("\\b" + a + R"(\[)")))
        throw Error("the emulation packs " + a + " but the kernel reads or writes it other than one element at a time");
    }
  }
  s = std::regex_replace(s, std::regex(R"(subgroup_matrix_(left|right)<f16, 16, 16>)"), "SMX");
  s = std::regex_replace(s, std::regex(R"(subgroup_matrix_result<f32, 16, 16>)"), "SMX");
  std::set<std::string> loaded, stored;
  const std::regex load(R"(subgroupMatrixLoad<SMX>\(&(\w+), )"), store(R"(subgroupMatrixStore\(&(\w+), )");
  for (std::sregex_iterator i(s.begin(), s.end(), load), end; i != end; ++i) loaded.insert((*i)[1]);
  for (std::sregex_iterator i(s.begin(), s.end(), store), end; i != end; ++i) stored.insert((*i)[1]);
  s = std::regex_replace(s, load, "smload_$1(");
  s = std::regex_replace(s, store, "smstore_$1(");
  s = std::regex_replace(s, std::regex(R"(subgroupMatrixMultiplyAccumulate\()"), "smmma(");
  s = std::regex_replace(s, std::regex(R"(vec4<f16>\()"), "rf16v(");
  s = std::regex_replace(s, std::regex(R"(\bf16\()"), "rf16(");
  s = std::regex_replace(s, std::regex(R"(\bf16\b)"), "f32");
  if (s.find("subgroup") != std::string::npos) throw Error("the emulation left a subgroup builtin in place");
  if (loaded.empty() && stored.empty()) return s;  // an include without fragments
  std::smatch wg;
  if (!std::regex_search(s, wg, std::regex(R"(@workgroup_size\((\d+)\))")) || std::stoi(wg[1]) % 32 != 0)
    throw Error("the emulation needs a workgroup of whole subgroups of 32, given as one number");
  const int subgroups = std::stoi(wg[1]) / 32;
  const size_t entry = s.find(") {\n", s.find("fn main("));
  if (entry == std::string::npos) throw Error("the emulation found no entry point");
  s.insert(entry + 4, "  sm_li = li;\n");
  s += builtins(subgroups);
  for (const std::string& a : loaded) {
    const std::string at = "sm_at(off, cm, stride, e)";
    const std::string value = packed.count(a) ? "unpack2x16float(atomicLoad(&" + a + "[" + at + " / 2u]))[" + at +
                                                    " % 2u]"
                                              : a + "[" + at + "]";
    s += "fn smload_" + a + "(off: u32, cm: bool, stride: u32) -> SMX {\n  var r: SMX;\n"
         "  for (var e = 0u; e < 8u; e = e + 1u) { r.v[e] = " + value + "; }\n  return r;\n}\n";
  }
  for (const std::string& a : stored) {
    if (packed.count(a)) throw Error("the emulation cannot store fragments into the packed " + a);
    s += "fn smstore_" + a + "(off: u32, x: SMX, cm: bool, stride: u32) {\n"
         "  for (var e = 0u; e < 8u; e = e + 1u) { " + a + "[sm_at(off, cm, stride, e)] = x.v[e]; }\n}\n";
  }
  for (const std::string& a : packed)
    s += "fn st16_" + a + "(i: u32, v: f32) {\n  let shift = 16u * (i % 2u);\n"
         "  atomicAnd(&" + a + "[i / 2u], ~(0xffffu << shift));\n"
         "  atomicOr(&" + a + "[i / 2u], (pack2x16float(vec2<f32>(v, 0.0)) & 0xffffu) << shift);\n}\n";
  return s;
}

SmEmulation::SmEmulation(const std::vector<EmulatedKernel>& kernels)
    : dir_(fs::temp_directory_path() / ("wgtrain-sm-emulation-" + std::to_string(::getpid()))) {
  fs::create_directories(dir_);
  for (const EmulatedKernel& k : kernels) {
    std::string file = k.name;
    file[file.find('/')] = '.';
    std::ofstream(dir_ / (file + ".wgsl")) << sm_emulated(std::string(wgtrain::detail::kernel_source(k.name)),
                                                          k.pack_f16);
  }
  ::setenv(wgtrain::detail::kKernelOverridesEnv, dir_.c_str(), 1);
}

SmEmulation::~SmEmulation() {
  ::unsetenv(wgtrain::detail::kKernelOverridesEnv);
  fs::remove_all(dir_);
}

}  // namespace wgtrain::test

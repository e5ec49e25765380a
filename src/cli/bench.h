// wgtrain bench: each kernel at training sizes; the bytes and FLOPs it must move or do, and the measured time.
#pragma once

#include <string>

#include "wgtrain/device.h"

namespace wgtrain::cli {

struct BenchOptions {
  Backend backend = Backend::Auto;
  bool cooperative_matrix = false;  // native-vulkan: cooperative-matrix GEMMs where offered
  bool subgroup_matrix = false;     // webgpu: DeviceOptions::subgroup_matrix (the toggles it needs come with it)
  std::string precision = "fp32";  // the GEMMs' arithmetic, fp32 or mixed (wgtrain/precision.h)
  std::string only;        // run only benchmarks whose name contains this
  std::string json_path;   // also write the results as JSON lines here
  bool quick = false;      // small sizes: checks the command on any machine (timings then mean little)
  // train_step: the model preset, batch and sequence length of the timed training step, and a directory to dump
  // its initial weights, batch and first losses into (for bench/torch_llama.py to repeat them).
  std::string train_config = "base";
  int64_t train_batch = 16, train_seq = 512;
  std::string dump_dir;
  // Extra `mm (shape)` rows: c[M, N] = a[M, K] b[K, N] at each "MxNxK" given (comma-separated), both operands
  // row-major f32, in the run's precision: for sweeping M or K around the step's shapes.
  std::string mm_shapes;
};

// On any backend; benchmarks whose ops the backend lacks are skipped with a line saying so.
int run_bench(const BenchOptions& options);

}  // namespace wgtrain::cli

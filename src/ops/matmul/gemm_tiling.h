// The fp32 GEMM's tilings (gemm.wgsl, gemm_tiled.wgsl): a table whose entries the tests and the bench can force
// one at a time, so that every tiling is checked and timed, and the choice the op makes without forcing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace wgtrain {
struct DeviceImpl;
}

namespace wgtrain::ops::detail {

struct GemmTiling {
  const char* name;
  // 0: gemm.wgsl (128 x 128 tiles, 8 x 8 a thread, where M and N are both 128 or more; else 64 x 64, 4 x 4).
  // Otherwise gemm_tiled.wgsl: tiles (16 tm) x (16 tn), k staged bk deep in `stages` workgroup buffers, loads
  // ordered for conflict-free workgroup stores where `tstore` (its TSTORE).
  int tm, tn, bk, stages;
  bool tstore = false;
};

// The table, in a fixed order (entry 0: gemm.wgsl as it was).
const std::vector<GemmTiling>& gemm_tilings();
// Workgroup memory an entry needs, in bytes.
int64_t gemm_tiling_storage(const GemmTiling& t);

// gemm_force: kGemmTableChoice (the op chooses), or an entry of gemm_tilings() that every fp32 GEMM takes (an
// index past the table is an error; an entry needing more workgroup memory than the device has is an
// UnsupportedError). The bench sets it from WGTRAIN_FORCE_GEMM.
inline constexpr int kGemmTableChoice = -1;
extern int gemm_force;
// The entry an fp32 GEMM of this shape and form of B (GemmB::Mode) takes on this device (honouring gemm_force).
const GemmTiling& gemm_choice(const DeviceImpl& dev, int64_t M, int64_t N, int64_t K, int b_mode);

}  // namespace wgtrain::ops::detail

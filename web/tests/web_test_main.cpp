// main() of the op tests in the browser: GoogleTest's, after a line saying which adapter and limits the run got
// (the kernels' variants follow them: e.g. fused_ce's 1024-wide rows only where 1024 invocations are allowed), and
// with a last line the page watches for (a program suspended by ASYNCIFY returns from main long after the call that
// started it, so the page reads the result from the output).
#include <gtest/gtest.h>

#include <cstdio>

#include "support/test_support.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  {
    const wgtrain::Device& d = wgtrain::test::device();
    const auto& l = d.limits();
    std::printf("adapter: %s (%s%s), %u invocations per workgroup, storage offsets aligned to %u, uniform offsets "
                "to %u, %u storage buffers per stage\n",
                d.info().name.c_str(), d.info().adapter_type.c_str(), d.info().software ? ", a CPU rasteriser" : "",
                l.max_invocations_per_workgroup, l.min_storage_offset_alignment, l.min_uniform_offset_alignment,
                l.max_storage_buffers_per_stage);
  }
  const int rc = RUN_ALL_TESTS();
  std::printf("WGTRAIN_EXIT %d\n", rc);
  std::fflush(stdout);
  return rc;
}

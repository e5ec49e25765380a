#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here): what issue #14's infrastructure needs checked on a real
# GPU, into $OUT.
#   devices.log      the adapter with subgroup matrices requested: enabled or not, and the shapes it offers
#   tests.log        the memory, ABI, feature and copy tests on this adapter (the subgroup-matrix test opens a device
#                    with the feature here, where the adapter offers it)
#   adamw_alone.*    adamw_step on a fresh device, then the whole bench: the row should read the same in both now
#   bench.*          that every row starts from an emptied pool
#   copy.*           the dim-order copies: the tiled transpose, the head-layout permute, a dense copy for the ceiling
#   toggles.*        mm and train_step with subgroup matrices and their toggles on, beside the same rows in bench.*
set -uo pipefail
source scripts/h200/env.sh
out=${OUT:-/tmp}
quiet() { grep -v "^Warning\|^    at"; }
.carry/wgtrain devices --subgroup-matrix 2>&1 | quiet | tee "$out/devices.log"
[ -x .carry/wgtrain_tests ] &&
  .carry/wgtrain_tests --gtest_filter='Memory.*:Abi.*:Features.*:Contiguous.*:Device.*' 2>&1 | quiet |
    tail -40 | tee "$out/tests.log"
.carry/wgtrain bench --only adamw --json "$out/adamw_alone.json" 2>&1 | quiet | tee "$out/adamw_alone.log"
.carry/wgtrain bench --json "$out/bench.json" 2>&1 | quiet | tee "$out/bench.log"
.carry/wgtrain bench --only copy --json "$out/copy.json" 2>&1 | quiet | tee "$out/copy.log"
for row in mm train_step; do
  .carry/wgtrain bench --subgroup-matrix --only "$row" --json "$out/toggles_$row.json" 2>&1 | quiet |
    tee "$out/toggles_$row.log"
done

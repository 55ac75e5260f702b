#!/usr/bin/env bash
# The layer stack compiled by regions against compiled whole (RuntimeOptions.compile_regions,
# sidecar/runtime/regions.py), in one call of about six minutes: the logits of each, bit for bit
# (bench/stack_check.py), the runtime's load on an empty and then a filled compile cache
# (bench/load_time.py: the start a respawn waits for), and the 64-item forward's kernels
# (bench/profile_kernels.py). Regions stay the default only while the logits are equal and the
# forward is no slower.
#
# Assumes: the `device` machine (one GPU, a call of at most 10 minutes, no network), run from the
# repository root with `.whl/` carried.
#
#   bash bench/device/regions.sh    # $OUT: regions.log, kernels-whole.json, kernels-regions.json
set -u
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
[ -d /tmp/full ] || python3 -m sidecar.devtools.checkpoint /tmp/full --size full > /dev/null 2>&1
log=$OUT/regions.log
echo "checkpoint ready at $SECONDS s" | tee "$log"
python3 bench/stack_check.py /tmp/full --no-compile-regions --save /tmp/whole.pt 2>&1 | grep -v Warning | tail -1 | tee -a "$log"
python3 bench/stack_check.py /tmp/full --compile-regions --save /tmp/regions.pt 2>&1 | grep -v Warning | tail -1 | tee -a "$log"
python3 bench/stack_check.py --compare /tmp/whole.pt /tmp/regions.pt | tee -a "$log"
for mode in whole regions; do
    flag=--compile-regions; [ $mode = whole ] && flag=--no-compile-regions
    for run in empty filled; do
        echo "== load, $mode, $run cache" | tee -a "$log"
        timeout 200 python3 bench/load_time.py /tmp/full --cache-dir /tmp/cc-$mode $flag 2>&1 \
            | grep -v Warning | tail -1 | cut -c1-900 | tee -a "$log"
    done
    timeout 150 python3 bench/profile_kernels.py /tmp/full --batch 64 --skip-decode $flag \
        --out "$OUT/kernels-$mode.json" 2>&1 | grep -v Warning | tail -3 | tee -a "$log"
done
echo "end at $SECONDS s" | tee -a "$log"

#!/usr/bin/env bash
# The forward pass's open leads, measured in one `device` call on one H200 (~8 minutes; carry .whl):
#   bash bench/forward_probes.sh
# - attention over the mixed texts' real segments: varlen against length-grouped dense SDPA
#   (bench/attention_options.py);
# - the forward's kernels by kind at 64 items, with the q/k norm and rotary kernels counted apart
#   from attention (bench/profile_kernels.py);
# - a step at 1 and 64 items, and whether it runs free of host synchronisations
#   (bench/profile_step.py), with Inductor's default kernel configurations and then with its
#   coordinate-descent tuning (TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1), which searches the
#   block sizes of each generated kernel: the q/k kernel still takes an estimated ~5 x its memory
#   traffic (12.35 ms before the rotary change less the 6.1 ms it saved, against ~1.2 ms).
# Each result lands in $OUT as JSON, each log beside it; a probe that overruns its share is cut.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
python3 -m sidecar.checkpoint /tmp/full --size full > /dev/null 2>&1 || exit 1
probe() {  # name seconds command...
    local name=$1 seconds=$2; shift 2
    echo "== $name"
    timeout "$seconds" "$@" > "$OUT/$name.log" 2>&1
    echo "rc=$?"; grep -v Warning "$OUT/$name.log" | tail -n 4
}
probe attention 90 python3 bench/attention_options.py /tmp/full --items 56 --out "$OUT/attention.json"
probe kernels 120 python3 bench/profile_kernels.py /tmp/full --batch 64 --out "$OUT/kernels.json"
probe step 120 python3 bench/profile_step.py /tmp/full --batch 1 64 --out "$OUT/step.json"
probe step-cdt 150 env TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1 \
    python3 bench/profile_step.py /tmp/full --batch 1 64 --out "$OUT/step-cdt.json"
exit 0

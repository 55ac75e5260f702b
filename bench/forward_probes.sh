#!/usr/bin/env bash
# The forward pass's open leads, measured in one `device` call on one H200 (~8 minutes; carry .whl):
#   bash bench/forward_probes.sh
# - a step at 1 and 64 items (bench/profile_step.py): forward, scoring, reveal, the whole step
#   back to back, and whether it runs free of host synchronisations; with Inductor's default
#   kernel configurations and then with its coordinate-descent tuning
#   (TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1, which searches each generated kernel's block
#   sizes: the q/k norm and rotary kernel still takes about twice its memory traffic's time), and
#   whether the two give the same logits bit for bit (a different reduction order would not, and
#   then the fidelity run would have to be made again before it could be used);
# - attention over the mixed texts' real segments: varlen against length-grouped dense SDPA
#   (bench/attention_options.py);
# - if time is left, the forward's kernels by kind at 64 items (bench/profile_kernels.py).
# Each result lands in $OUT as JSON, each log beside it; a probe that overruns its share is cut.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
python3 -m sidecar.checkpoint /tmp/full --size full > /dev/null 2>&1 || exit 1
probe() {  # name seconds command...
    local name=$1 seconds=$2 start=$SECONDS; shift 2
    echo "== $name"
    timeout "$seconds" "$@" > "$OUT/$name.log" 2>&1
    echo "rc=$? in $((SECONDS - start)) s"; grep -v Warning "$OUT/$name.log" | tail -n 4
}
probe step 110 python3 bench/profile_step.py /tmp/full --batch 1 64 --out "$OUT/step.json" \
    --save-logits /tmp/logits-default
probe step-cdt 200 env TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1 \
    python3 bench/profile_step.py /tmp/full --batch 1 64 --out "$OUT/step-cdt.json" \
    --save-logits /tmp/logits-cdt
for b in 1 64; do
    python3 bench/stack_check.py --compare /tmp/logits-default/logits-$b.pt /tmp/logits-cdt/logits-$b.pt \
        > "$OUT/cdt-equal-$b.json" 2>/dev/null && echo "cdt logits at $b: $(cat "$OUT/cdt-equal-$b.json")"
done
probe attention 90 python3 bench/attention_options.py /tmp/full --items 56 --out "$OUT/attention.json"
left=$((500 - SECONDS))
[ $left -gt 60 ] && probe kernels $left python3 bench/profile_kernels.py /tmp/full --batch 64 --out "$OUT/kernels.json"
exit 0

#!/usr/bin/env bash
# The checks to make on the GPU before a harness run, in one `device` call (~2 to 4 minutes).
#
# Assumes: the `device` machine (one GPU, a call of at most 10 minutes, no network), run from
# the repository root with the wheels the image lacks carried in `.whl/` (soundfile and its
# needs); $OUT is the folder whose files come back (at most a few, hence one archive of logs).
#
#   bash bench/device/forward_probes.sh            # the step at 1, 8 and 64 items (bench/profile_step.py)
#   bash bench/device/forward_probes.sh --kernels  # and the forward's kernels by kind at 64 items,
#                                                  # its device time by operator and input shapes
#                                                  # (--ops), and Inductor's code (in kernels.log)
#   bash bench/device/forward_probes.sh --attention  # and attention alone over the mixed texts'
#                                                  # packed segments, several kernels
#                                                  # (bench/probe_faster_attention.py, ~1 minute)
#   bash bench/device/forward_probes.sh --kernels --attention  # flags combine
#
# The step probe reports, per batch size: the forward, the scoring (the Triton kernel against the
# eager scoring on the same logits, with the share of equal tokens), the reveal, a whole step back
# to back, the decode, whether a step runs free of host synchronisations, and where the batch's
# bucket has two graphs (attention capped at 1,024 and at 4,096 tokens) whether they agree bit
# for bit. It keeps the first step's logits in /tmp/logits-default for `bench/stack_check.py
# --compare`. Results land in $OUT as JSON, the logs in $OUT/logs.tar.gz; a probe that overruns
# its share is cut.
set -u
bash bench/device/wheels.sh 2>/dev/null || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
python3 -m sidecar.devtools.checkpoint /tmp/full --size full > /dev/null 2>&1 || exit 1
# Batches of 1, 8 and 64 of profile_step's 540-token item land in these buckets, whatever the
# others: capturing only them saves most of each run's graph capture.
buckets="--buckets 768 5120 36864"
logs=/tmp/probe-logs
mkdir -p "$logs"
trap 'tar -czf "$OUT/logs.tar.gz" -C "$logs" .' EXIT
probe() {  # name seconds command...
    local name=$1 seconds=$2 start=$SECONDS; shift 2
    echo "== $name"
    timeout "$seconds" "$@" > "$logs/$name.log" 2>&1
    echo "rc=$? in $((SECONDS - start)) s"; grep -v Warning "$logs/$name.log" | tail -n 4
}
probe step 200 python3 bench/profile_step.py /tmp/full --batch 1 8 64 $buckets --out "$OUT/step.json" \
    --save-logits /tmp/logits-default
if [[ " $* " == *" --kernels "* ]]; then
    probe kernels 180 env TORCH_LOGS=output_code python3 bench/profile_kernels.py /tmp/full \
        --batch 64 --ops --out "$OUT/kernels.json"
fi
if [[ " $* " == *" --attention "* ]]; then
    probe attention 150 python3 bench/probe_faster_attention.py /tmp/full --items 56 \
        --out "$OUT/attention.json"
fi
exit 0

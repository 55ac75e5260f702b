#!/usr/bin/env bash
# The codec decode's cost to the denoising forward (issue 40 item 3), in one call of the device
# machine (~6 minutes, ~8 at most): bench/decode_cost.py on the full-size random checkpoint, the
# forward of a mixed-run batch alone and beside a decode that never stops, per variant of the
# decode (stream priorities, frames per call, a bfloat16 decoder), and each precision's audio
# against the float32 decode with TF32 off.
#
# Assumes: the `device` machine (one GPU, a call of at most 10 minutes, no network), run from the
# repository root with the wheels the image lacks carried in `.whl/`; $OUT is the folder whose
# files come back.
#
#   bash bench/device/decode_cost.sh COMMIT
#
# $OUT gets decode-cost.json (written after every variant, so a run cut short keeps what it
# measured; keys in bench/README.md, "The decode's cost") and decode-cost.log.
set -u
commit=${1:-unknown}
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
bash bench/device/wheels.sh || exit 1
if [ ! -d /tmp/full ]; then
    python3 -m sidecar.devtools.checkpoint /tmp/full --size full > "$OUT/checkpoint.log" 2>&1 ||
        { tail -n 20 "$OUT/checkpoint.log"; exit 1; }
fi
echo "checkpoint ready at $SECONDS s"
timeout $((470 - SECONDS)) python3 bench/decode_cost.py /tmp/full --commit "$commit" \
    --out "$OUT/decode-cost.json" > "$OUT/decode-cost.log" 2>&1
echo "rc=$? at $SECONDS s"
grep -v Warning "$OUT/decode-cost.log" | tail -n 12 | cut -c1-500
exit 0

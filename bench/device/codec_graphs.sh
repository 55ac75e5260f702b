#!/usr/bin/env bash
# The codec's decode graphs on the GPU (bench/codec_graphs.py): a short request's decode with and
# without them, its time and its audio, on the full-size random checkpoint (~2 minutes).
#
# Assumes: the `device` machine (one GPU, no network), run from the repository root with the
# wheels the image lacks carried in `.whl/`; $OUT is the folder whose files come back.
#
#   bash bench/device/codec_graphs.sh COMMIT
#
# $OUT gets codec-graphs.json and codec-graphs.log.
set -u
commit=${1:-unknown}
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
bash bench/device/wheels.sh || exit 1
if [ ! -d /tmp/full ]; then
    python3 -m sidecar.devtools.checkpoint /tmp/full --size full > "$OUT/checkpoint.log" 2>&1 ||
        { tail -n 20 "$OUT/checkpoint.log"; exit 1; }
fi
timeout 300 python3 bench/codec_graphs.py /tmp/full --commit "$commit" \
    --out "$OUT/codec-graphs.json" > "$OUT/codec-graphs.log" 2>&1
echo "rc=$? at $SECONDS s"
grep -v Warning "$OUT/codec-graphs.log" | tail -n 12 | cut -c1-1500
exit 0

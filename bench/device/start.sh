#!/usr/bin/env bash
# Starts and respawns on the GPU (issue 40: kill to ready <= 10 s, cold start <= 30 s), in one
# call of the device machine, which starts bare: the compile cache lives only within the call,
# so bench/start_arm.py starts the server twice on one data directory (the first compiles into
# an empty DATA_DIR/compile-cache, the second reads it back) and SIGKILLs the sidecar twice after
# each start. Then, for the cost of the graphs left to their first batch, bench/runtime_speed.py
# with every graph at load and with the default (graphs_at_load 4096).
#
# Assumes: the `device` machine (one GPU, a call of at most 10 minutes, no network), run from the
# repository root with `.whl/` carried (what the server needs to start, as for harness.sh).
#
#   bash bench/device/start.sh COMMIT
#
# $OUT gets start.json (per start: cold_start_s, each kill, and the log lines of every sidecar
# start: `start stages:`, `captured ... CUDA graphs`, `memory back`, `ready in`), speed-*.json,
# and run.tar.gz with the server logs.
set -u
commit=$1
run=/tmp/start-run
mkdir -p "$run"
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
bash bench/device/wheels.sh || exit 1
[ -d /tmp/full ] || python3 -m sidecar.devtools.checkpoint /tmp/full --size full > "$run/checkpoint.log" 2>&1
timeout 300 python3 bench/start_arm.py --checkpoint /tmp/full --commit "$commit" \
    --out "$OUT/start.json" > "$run/start.log" 2>&1
# runtime_speed.py in-process, on the compile cache the server filled: load_s is then a warm
# start with every graph at load against 16 of them, and batch_s (32 items, a bucket above 4096
# tokens) includes that bucket's first pass and capture in the default.
cache=$(ls -d /tmp/start-*/data/compile-cache 2>/dev/null | head -n 1)
[ -n "$cache" ] && export TORCHINDUCTOR_CACHE_DIR=$cache TRITON_CACHE_DIR=$cache/triton
for graphs in all 4096; do
    timeout 100 python3 bench/runtime_speed.py /tmp/full --graphs-at-load "$graphs" \
        --out "$OUT/speed-$graphs.json" > "$run/speed-$graphs.log" 2>&1
done
cp /tmp/start-*/server-*.log "$run/" 2>/dev/null
tar -czf "$OUT/run.tar.gz" -C "$run" .
tail -n 40 "$run/start.log"
for f in "$run"/speed-*.log; do echo "== $f"; tail -n 3 "$f"; done
exit 0

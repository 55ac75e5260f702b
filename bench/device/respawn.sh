#!/usr/bin/env bash
# Respawn and cold start on the GPU (issue 40: kill to ready <= 10 s, cold start <= 30 s), in one
# call of the device machine (bare: the compile cache lives only within the call).
#
# 1. bench/start_arm.py with spares (the default on a GPU, docs/DEPLOYMENT.md "Spare sidecars"):
#    a first start on an empty compile cache, then a restart on the cache it filled; after each
#    start two SIGKILLs of the sidecar, each once the device's spare is parked.
# 2. If the call has time left, the same data directory (warm cache) without spares
#    (--spare-sidecars off): one start and one kill, the respawn as it was before spares.
#
# Assumes: the `device` machine (one GPU, a call of at most 10 minutes, no network), run from the
# repository root with `.whl/` carried.
#
#   bash bench/device/respawn.sh COMMIT
#
# $OUT gets respawn.json (spares) and respawn-off.json (without): per start `cold_start_s`, each
# kill (`kill_to_ready_s`, `took_spare`, `spare_held_gpu`: must be false) and the log lines of
# every sidecar start (`start stages: … ready T s after exec, T s after go`, the runtime's
# `captured … CUDA graphs …` and `compile phases: …`, the pool's `spare …` and `ready in` lines);
# run.tar.gz has the server logs.
set -u
commit=${1:-unknown}
run=/tmp/respawn-run
mkdir -p "$run"
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
t0=$SECONDS
[ -d /tmp/full ] || python3 -m sidecar.devtools.checkpoint /tmp/full --size full > "$run/checkpoint.log" 2>&1
echo "checkpoint made in $((SECONDS - t0)) s; $SECONDS s so far"
data=/tmp/respawn-data
timeout 400 python3 bench/start_arm.py --checkpoint /tmp/full --commit "$commit" --starts 2 \
    --kills 2 --data-dir "$data" --out "$OUT/respawn.json" > "$run/spares.log" 2>&1
echo "spares done at $SECONDS s"
if [ "$SECONDS" -lt 440 ]; then
    timeout $((530 - SECONDS)) python3 bench/start_arm.py --checkpoint /tmp/full --commit "$commit" \
        --starts 1 --kills 1 --data-dir "$data" --server-arg=--spare-sidecars --server-arg=off \
        --out "$OUT/respawn-off.json" > "$run/off.log" 2>&1
    echo "without spares done at $SECONDS s"
fi
for d in /tmp/start-*; do
    for f in "$d"/server-*.log; do [ -f "$f" ] && cp "$f" "$run/$(basename "$d")-$(basename "$f")"; done
done
tar -czf "$OUT/run.tar.gz" -C "$run" .
for f in "$run"/spares.log "$run"/off.log; do [ -f "$f" ] && { echo "== $f"; tail -n 30 "$f" | cut -c1-600; }; done
exit 0

#!/usr/bin/env bash
# Respawn and cold start on the GPU (issue 40: kill to ready <= 10 s, cold start <= 30 s), in one
# call of the device machine (bare: the compile cache lives only within the call). Three runs of
# bench/start_arm.py on one data directory, each kill once the device's spare is parked:
#
#   cold  a first start on an empty compile cache (a new machine), one SIGKILL (spares: the
#         default on a GPU, docs/DEPLOYMENT.md "Spare sidecars")
#   warm  a restart on the cache it filled (a service restart), two SIGKILLs
#   off   if the call has time left: a restart without spares (--spare-sidecars off), one
#         SIGKILL, the respawn as it was before spares
#
# Assumes: the `device` machine (one GPU, a call of at most 10 minutes, no network), run from the
# repository root with `.whl/` carried. About 8 minutes.
#
#   bash bench/device/respawn.sh COMMIT
#
# $OUT gets respawn-cold.json, respawn-warm.json, respawn-off.json: per start `cold_start_s`, each
# kill (`kill_to_ready_s`, `took_spare`, `spare_held_gpu`: must be false) and the log lines of
# every sidecar start (`start stages: … ready T s after exec, T s after go`, the runtime's
# `captured … CUDA graphs …` and `compile phases: …`, `float specializations …`, the pool's
# `spare …` and `ready in` lines); run.tar.gz has the server logs.
set -u
commit=${1:-unknown}
run=/tmp/respawn-run
data=/tmp/respawn-data
mkdir -p "$run"
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
bash bench/device/wheels.sh || exit 1
[ -d /tmp/full ] || python3 -m sidecar.devtools.checkpoint /tmp/full --size full > "$run/checkpoint.log" 2>&1
echo "checkpoint ready at $SECONDS s"
arm() {  # NAME LIMIT_S START_ARM_ARGS...
    local name=$1 limit=$2
    shift 2
    timeout "$limit" python3 bench/start_arm.py --checkpoint /tmp/full --commit "$commit" \
        --data-dir "$data" --starts 1 --out "$OUT/respawn-$name.json" "$@" > "$run/$name.log" 2>&1
    echo "$name done at $SECONDS s (exit $?)"
}
arm cold 240 --kills 1
arm warm 220 --kills 2
[ "$SECONDS" -lt 450 ] && arm off $((540 - SECONDS)) --kills 1 --server-arg=--spare-sidecars --server-arg=off
for d in /tmp/start-*; do
    for f in "$d"/server-*.log; do [ -f "$f" ] && cp "$f" "$run/$(basename "$d")-$(basename "$f")"; done
done
tar -czf "$OUT/run.tar.gz" -C "$run" .
for name in cold warm off; do
    [ -f "$run/$name.log" ] && { echo "== $name"; tail -n 16 "$run/$name.log" | cut -c1-700; }
done
exit 0

#!/usr/bin/env bash
# The sweep arm under several settings in one call, a server of its own for each (one compile
# cache between them, so the later servers start sooner): an A/B of settings on one card, which
# timings from two leases are not.
#
# Assumes: the `device` machine (one GPU, a call of at most 10 minutes, no network), run from the
# repository root with `.whl/` carried (bench/device/harness.sh lists what it holds).
#
#   bash bench/device/sweep_ab.sh COMMIT NAME[:SETTING[+SETTING...]] ...
#   bash bench/device/sweep_ab.sh 1a2b3c4 joins: nojoins:OMNIVOICE_LIGHT_JOINS=false
#
# Each SETTING is NAME=VALUE, exported for that variant's harness and server alone: the server's
# OMNIVOICE_* settings, and SWEEP_RATES (default 20), SWEEP_SECONDS (20) and REQUESTS (100, the
# mixed arm's, which always runs) for the harness; TREE, another checkout (on the device: a copy
# of this one with a change taken back, say) whose harness and server the variant runs. COMMIT
# is recorded as given: pass a hash.
# With a py-spy wheel in SPY_WHEELS (a carried folder), the first variant's sidecar is sampled
# for 12 s once its last rate has run 4 s: which of its threads hold the interpreter's lock,
# and where (`py-spy record --gil --threads`, raw stacks).
#
# Each variant lands in $OUT/NAME.tar.gz (result.json, harness.log, the server's log, the spans
# gzipped, and bench/span_passes.py's reading of them as passes.txt); the variants' figures are
# printed as they end.
set -u
commit=$1
shift
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/tmp/sweep-ab-inductor
bash bench/device/wheels.sh || exit 1
if [ -n "${SPY_WHEELS:-}" ]; then
    bash bench/device/wheels.sh "$SPY_WHEELS" /tmp/spy || exit 1
fi
make=--make-checkpoint
first=1
for variant in "$@"; do
    name=${variant%%:*} settings=""
    [ "$variant" != "$name" ] && settings=${variant#*:}
    run=/tmp/sweep-ab/$name
    mkdir -p "$run"
    (
        for setting in ${settings//+/ }; do export "${setting?}"; done
        cd "${TREE:-.}" || exit 1
        timeout 280 python3 bench/harness.py $make --arms sweep --devices 0 --commit "$commit" \
            --requests "${REQUESTS:-100}" --sweep-rates "${SWEEP_RATES:-20}" \
            --sweep-seconds "${SWEEP_SECONDS:-20}" --out "$run/result.json" \
            --trace-spans "$run/spans.jsonl" > "$run/harness.log" 2>&1
    ) &
    harness=$!
    if [ -n "${SPY_WHEELS:-}" ] && [ $first = 1 ]; then
        last_rate=$(sed -n 's/.*SWEEP_RATES=\([0-9.,]*\).*/\1/p' <<< "$settings")
        last_rate=${last_rate:-${SWEEP_RATES:-20}}
        last_rate=${last_rate##*,}
        until grep -q "requests at ${last_rate}/s" "$run/harness.log" 2>/dev/null \
            || ! kill -0 $harness 2>/dev/null; do sleep 1; done
        sleep 4
        # The serving sidecar: `python -m sidecar`, not a parked spare (`--park`).
        for pid in $(pgrep -f -- "-m sidecar"); do
            tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q -- "--park" && continue
            /tmp/spy/bin/py-spy record -p "$pid" -d 12 -r 200 --gil --threads --nonblocking \
                -f raw -o "$run/gil.txt" > "$run/spy.log" 2>&1
            break
        done
    fi
    wait $harness
    make="" first=0
    for d in /tmp/bench-*; do cp "$d/server.log" "$run/" 2>/dev/null; done
    rm -rf /tmp/bench-*
    if [ -f "$run/spans.jsonl" ]; then
        python3 bench/span_passes.py "$run/spans.jsonl" > "$run/passes.txt" 2>&1
        gzip -f "$run/spans.jsonl"
    fi
    tar -czf "$OUT/$name.tar.gz" -C "$run" .
    python3 -c "
import json, sys
r = json.load(open(sys.argv[2]))
print(sys.argv[1], r.get('gpu'), 'mixed', r.get('mixed_http_x_realtime'), 'sweep', r.get('interactive_sweep'))
" "$name" "$run/result.json" 2>&1 || tail -n 5 "$run/harness.log"
    cat "$run/passes.txt" 2>/dev/null
done
exit 0

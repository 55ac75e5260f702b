#!/usr/bin/env bash
# The fidelity gate (bench/fidelity.py) on the GPU, in two calls made back to back: `start`
# installs and starts everything in the background, `finish` waits for the rest.
#
# Assumes: the `device` machine (one GPU, a call of at most 10 minutes, the machine kept warm a
# short while between calls, no network), run from the repository root with the wheels carried:
# WHL (default .whl: soundfile and its needs) and WHL_REF (default .whl-ref: omnivoice 0.2.1 and
# pydub); with WHL_PEER (a folder of the seed server's wheels, see bench/peer_arm.py) a short
# run of the seed server's arm follows, to check the arm before a harness run. $OUT is the
# folder whose files come back.
#
#   bash bench/device/fidelity.sh start COMMIT    # the plain and confident full-size checkpoints;
#                                                 # bench/runtime_speed.py with and without eager
#                                                 # rounding (its cost); bench/fidelity.py; then,
#                                                 # with AGREEMENT=1, bench/agreement.py on both
#   bash bench/device/fidelity.sh finish COMMIT   # waits for the rest
#
# Each call copies what there is so far to $OUT: fidelity.json, and run.tar.gz with the logs and
# the other results. FIDELITY_ARGS adds flags to bench/fidelity.py (say --unfused-norm-rope: the
# q/k norm and rotary as the compiler makes them, without sidecar/runtime/kernels/norm_rope.py).
set -u
what=$1 commit=$2
run=/tmp/fidelity-run
work=/tmp/fidelity
mkdir -p "$run"
export PYTHONPATH=/tmp/refsite:/tmp/site:$PWD PYTHONUNBUFFERED=1

if [ "$what" = start ]; then
    pip=(python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir)
    "${pip[@]}" --target /tmp/site "${WHL:-.whl}"/*.whl || exit 1
    "${pip[@]}" --target /tmp/refsite "${WHL_REF:-.whl-ref}"/*.whl || exit 1
    if [ -n "${WHL_PEER:-}" ]; then "${pip[@]}" --target /tmp/peersite "$WHL_PEER"/*.whl || exit 1; fi
    setsid nohup bash -c "
        python3 -m sidecar.devtools.checkpoint $work/plain --size full > $run/checkpoint.log 2>&1
        python3 -m sidecar.devtools.checkpoint $work/confident --size full --confident >> $run/checkpoint.log 2>&1
        for rounding in '' --no-eager-rounding; do
            python3 bench/runtime_speed.py $work/plain \$rounding \
                --out $run/speed\$rounding.json > $run/speed\$rounding.log 2>&1
        done
        python3 bench/fidelity.py --workdir $work --commit $commit --out $run/fidelity.json ${FIDELITY_ARGS:-} \
            > $run/fidelity.log 2>&1
        if [ -n '${WHL_PEER:-}' ]; then
            python3 bench/peer_arm.py $work/plain --site /tmp/peersite --requests ${PEER_REQUESTS:-200} \
                --out $run/peer.json > $run/peer.log 2>&1
        fi
        if [ '${AGREEMENT:-0}' = 1 ]; then
            for ck in plain confident; do
                for dtype in float32 bfloat16; do
                    python3 bench/agreement.py $work/\$ck --dtype \$dtype --items 24 \
                        --out $run/agreement-\$ck-\$dtype.json > $run/agreement-\$ck-\$dtype.log 2>&1
                done
            done
        fi
        touch $run/done" > /dev/null 2>&1 < /dev/null &
fi
until [ -e "$run/done" ] || [ $SECONDS -gt 560 ]; do sleep 5; done
cp "$run/fidelity.json" "$OUT/" 2>/dev/null
tar -czf "$OUT/run.tar.gz" -C "$run" .
for f in "$run"/*.log; do echo "== $f"; tail -n 4 "$f" | cut -c1-400; done
[ -e "$run/done" ] && echo "all done" || echo "still running"
exit 0

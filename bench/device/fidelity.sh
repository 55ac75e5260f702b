#!/usr/bin/env bash
# The fidelity gate (bench/fidelity.py, its band from the reference's own bf16 variants) on the
# GPU: `start` installs and starts the run in the background and waits for it; should the call
# end first, `finish`, made right after while the machine is warm, waits for the rest.
#
# Assumes: the `device` machine (one GPU, a call of at most 10 minutes, the machine kept warm a
# short while between calls, no network), run from the repository root with the wheels carried:
# WHL (default .whl: soundfile and its needs) and WHL_REF (default .whl-ref: omnivoice 0.2.1 and
# pydub, `pip download --no-deps omnivoice==0.2.1 pydub==0.25.1 -d .whl-ref`); with WHL_PEER (a
# folder of the seed server's wheels, see bench/peer_arm.py) a short run of the seed server's
# arm follows, to check the arm before a harness run. $OUT is the folder whose files come back.
#
#   bash bench/device/fidelity.sh start COMMIT    # both checkpoints at once, each in a process
#                                                 # of its own (the GPU holds both; one compiles
#                                                 # while the other computes), then
#                                                 # bench/fidelity_gate.py judges the two parts
#   bash bench/device/fidelity.sh finish COMMIT   # waits for the rest
#
# Each call copies what there is so far to $OUT: fidelity.json (the judged run, once both parts
# are there), the parts, and run.tar.gz with the logs; once the gate has judged, the call exits
# with its status (1: outside the band; before that, 0). WAIT_S (default 540) bounds a call's wait.
# FIDELITY_ARGS adds flags to bench/fidelity.py (say --attention cudnn, or --variants to run
# fewer). SPEED=1 first times bench/runtime_speed.py; AGREEMENT=1 runs bench/agreement.py on both checkpoints after the gate.
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
        if [ '${SPEED:-0}' = 1 ]; then
            python3 -m sidecar.devtools.checkpoint $work/plain --size full > $run/checkpoint.log 2>&1
            python3 bench/runtime_speed.py $work/plain --out $run/speed.json > $run/speed.log 2>&1
        fi
        for ck in plain confident; do
            python3 bench/fidelity.py --workdir $work --commit $commit --checkpoints \$ck \
                --out $run/fidelity-\$ck.json ${FIDELITY_ARGS:-} > $run/fidelity-\$ck.log 2>&1 &
        done
        wait
        python3 bench/fidelity_gate.py $run/fidelity-plain.json $run/fidelity-confident.json \
            --out $run/fidelity.json > $run/gate.log 2>&1
        echo \$? > $run/gate.rc
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
until [ -e "$run/done" ] || [ $SECONDS -gt "${WAIT_S:-540}" ]; do sleep 5; done
cp "$run"/fidelity*.json "$OUT/" 2>/dev/null
tar -czf "$OUT/run.tar.gz" -C "$run" .
for f in "$run"/*.log; do echo "== $f"; grep -v Warning "$f" | tail -n 4 | cut -c1-400; done
if [ -e "$run/gate.rc" ]; then
    echo "== the gate (bench/fidelity_gate.py): each step, then the verdict"
    cat "$run/gate.log"
    echo "gate exit status $(cat "$run/gate.rc") (0 green, 1 outside the band)"
fi
if [ -e "$run/done" ]; then echo "all done"; else echo "still running: call finish"; fi
exit "$(cat "$run/gate.rc" 2>/dev/null || echo 0)"  # the gate's status once it has judged

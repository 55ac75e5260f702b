#!/usr/bin/env bash
# Some of the harness's server arms (never the reference or the seed server), over two calls made
# back to back: the harness runs on in the background between them while the machine stays warm.
# Settings reach the server as OMNIVOICE_* variables (the harness records them as
# `server_environment`).
#
# Assumes: the `device` machine (one GPU, a call of at most 10 minutes, no network), run from the
# repository root with `.whl/` carried (bench/device/harness.sh lists what it holds).
#
#   bash bench/device/arms.sh start COMMIT ARMS [NAME=VALUE ...]   # e.g. single,sweep,job,bulk
#                                                                  # OMNIVOICE_INTERACTIVE_STREAM=high
#   bash bench/device/arms.sh finish COMMIT                        # waits for it, packs the run
#
# COMMIT is recorded as given, so pass a hash (`git rev-parse --short HEAD` here): `HEAD` lands in
# the result as `HEAD`.
#
# HARNESS_ARGS (a variable of the call) adds to the harness's own arguments, say
# `--trace-spans /tmp/run/spans.jsonl`; ARMS_WAIT_S (550) how long a call waits for the harness,
# less when the call runs something else first.
#
# Everything lands in /tmp/run on the machine and goes back as $OUT/run.tar.gz (result.json,
# harness.log, the server's log, and with spans traced bench/span_decodes.py's reading of them as
# decodes.txt once the harness has ended); each call packs what there is so far.
set -u
what=$1 commit=$2
run=/tmp/run
mkdir -p "$run"
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
if [ "$what" = start ]; then
    arms=$3
    shift 3
    for assignment in "$@"; do export "${assignment?}"; done
    bash bench/device/wheels.sh || exit 1
    setsid nohup python3 bench/harness.py --make-checkpoint --arms "$arms" --devices 0 \
        --commit "$commit" --out "$run/result.json" ${HARNESS_ARGS:-} > "$run/harness.log" 2>&1 < /dev/null &
fi
while pgrep -f "bench/harness.py" > /dev/null && [ $SECONDS -lt "${ARMS_WAIT_S:-550}" ]; do sleep 5; done
for d in /tmp/bench-*; do
    cp "$d/server.log" "$run/$(basename "$d")-server.log" 2>/dev/null
done
if [ -f "$run/spans.jsonl" ] && ! pgrep -f "bench/harness.py" > /dev/null; then
    python3 bench/span_decodes.py "$run/spans.jsonl" > "$run/decodes.txt" 2>&1
fi
tar -czf "$OUT/run.tar.gz" -C "$run" .
tail -n 25 "$run/harness.log" | cut -c1-400
if pgrep -f "bench/harness.py" > /dev/null; then
    echo "the harness is still running: call 'bash bench/device/arms.sh finish $commit' again"
fi
exit 0

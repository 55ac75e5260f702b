#!/usr/bin/env bash
# The committed benchmark run on one H200 through the `device` tool, in two calls (one call may
# last 10 minutes; the whole run takes about 18). Carry .whl and .whl-ref. Make the calls back to
# back: the harness runs on in the background between them, while the machine stays warm.
#
#   bash bench/h200.sh start COMMIT    # installs, then the harness in the background: checkpoint,
#                                      # peak rate, server arms, then the reference arm
#   bash bench/h200.sh finish COMMIT   # waits for the harness to end
#
# Everything lands in /tmp/run on the machine and goes back as one archive, $OUT/run.tar.gz (the
# device tool returns only a few files per call). Each call packs what there is so far.
set -u
what=$1 commit=$2
run=/tmp/run
mkdir -p "$run"
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1

if [ "$what" = start ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/refsite .whl-ref/*.whl || exit 1
    setsid nohup python3 bench/harness.py --make-checkpoint --reference-site /tmp/refsite --devices 0 \
        --commit "$commit" --out "$run/result.json" > "$run/harness.log" 2>&1 < /dev/null &
fi
while pgrep -f "bench/harness.py" > /dev/null && [ $SECONDS -lt 550 ]; do sleep 5; done
for d in /tmp/bench-*; do cp "$d/server.log" "$run/$(basename "$d")-server.log" 2>/dev/null; done
tar -czf "$OUT/run.tar.gz" -C "$run" .
tail -n 8 "$run/harness.log"
exit 0

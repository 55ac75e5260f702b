#!/usr/bin/env bash
# The fidelity run (issue 20) on one H200 through the `device` tool: `start` alone finished it in
# 7.6 minutes on 2026-12-01; `finish`, made right after, collects a slower run (one call may last
# 10 minutes; the machine stays warm 30 s between calls). Carry the wheels: WHL (default
# .whl: soundfile and its needs) and WHL_REF (default .whl-ref: omnivoice 0.2.1 and pydub).
#
#   bash bench/fidelity_h200.sh start COMMIT    # installs, then in the background: the plain and
#                                               # confident full-size checkpoints, bench/fidelity.py,
#                                               # then bench/agreement.py on both (float32, bf16)
#   bash bench/fidelity_h200.sh finish COMMIT   # waits for the rest
#
# Each call copies what there is so far to $OUT: fidelity.json, and run.tar.gz with the logs and
# the agreement results.
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
    setsid nohup bash -c "
        python3 bench/fidelity.py --workdir $work --commit $commit --out $run/fidelity.json \
            > $run/fidelity.log 2>&1
        for ck in plain confident; do
            for dtype in float32 bfloat16; do
                python3 bench/agreement.py $work/\$ck --dtype \$dtype --items 24 \
                    --out $run/agreement-\$ck-\$dtype.json > $run/agreement-\$ck-\$dtype.log 2>&1
            done
        done
        touch $run/done" > /dev/null 2>&1 < /dev/null &
fi
until [ -e "$run/done" ] || [ $SECONDS -gt 560 ]; do sleep 5; done
cp "$run/fidelity.json" "$OUT/" 2>/dev/null
tar -czf "$OUT/run.tar.gz" -C "$run" .
for f in "$run"/*.log; do echo "== $f"; tail -n 4 "$f" | cut -c1-400; done
[ -e "$run/done" ] && echo "all done" || echo "still running"
exit 0

#!/usr/bin/env bash
# Interactive first audio beside a bulk job against the job's share, over the step budget
# (`--interactive-step-tokens`, docs/DEPLOYMENT.md "Interactive requests beside jobs"): the
# harness's arms `job` and `bulk` once per budget, the server taking the budget from
# OMNIVOICE_INTERACTIVE_STEP_TOKENS. The budget trades the interactive requests' first audio
# (each of their 32 steps lasts as long as the step's tokens take) for the job's throughput.
#
# Assumes: the `device` machine (one GPU, a call of at most 10 minutes, no network), run from the
# repository root with `.whl/` carried. At 300 requests a budget takes about 2.5 minutes (a
# start on an empty compile cache, the mixed arm, the job alone, the job beside 10 interactive
# requests a second); a budget that cannot finish before the call ends is skipped.
#
#   bash bench/device/interactive.sh COMMIT [BUDGET ...]   # default: 2048 4096 8192
#
# $OUT gets interactive-BUDGET.json (the harness's result: `interactive_under_bulk_first_audio_
# p50_s`, `_p99_s`, `bulk_throughput_share`, `bulk_total_throughput_share`) and its log.
set -u
commit=${1:-unknown}
shift
budgets=("$@")
[ ${#budgets[@]} -eq 0 ] && budgets=(2048 4096 8192)
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
bash bench/device/wheels.sh || exit 1
[ -d /tmp/full ] || python3 -m sidecar.devtools.checkpoint /tmp/full --size full > /dev/null 2>&1
echo "checkpoint ready at $SECONDS s"
for budget in "${budgets[@]}"; do
    if [ $SECONDS -gt $((${CALL_S:-590} - 170)) ]; then echo "budget $budget: no time left"; continue; fi
    OMNIVOICE_INTERACTIVE_STEP_TOKENS=$budget timeout $((${CALL_S:-590} - SECONDS)) \
        python3 bench/harness.py --checkpoint /tmp/full --arms job,bulk --requests "${REQUESTS:-300}" \
        --commit "$commit" --out "$OUT/interactive-$budget.json" > "$OUT/interactive-$budget.log" 2>&1
    echo "budget $budget: exit $? at $SECONDS s"
    python3 - "$OUT/interactive-$budget.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    sys.exit(0)
keys = ("interactive_under_bulk_first_audio_p50_s", "interactive_under_bulk_first_audio_p99_s",
        "bulk_throughput_share", "bulk_total_throughput_share", "job_x_realtime")
print({k: r.get(k) for k in keys})
PY
done

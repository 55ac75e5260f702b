#!/usr/bin/env bash
# Does the runtime's output stay bit for bit what an older tree made? bench/same_output.py on the
# full-size random checkpoint (bf16, compile, graphs, the Triton kernels), saved by this tree and
# by an old one, then compared: logits of one packed forward at 1, 8 and 64 items, eight seeded
# generations, and two requests joining six at step 7.
#
# Assumes: the `device` machine, run from the repository root with `.whl/` carried and the old
# tree's `sidecar/` unpacked in a carried, git-ignored folder:
#
#   mkdir -p .carry/old && git archive OLD sidecar | tar -x -C .carry/old
#   bash bench/device/same_output.sh .carry/old [SECONDS]    # SECONDS: this call's end (590)
#
# $OUT gets same-output.txt: both saves' logs and the comparison ("ALL EQUAL" or "DIFFERENT").
set -u
old=$1
end=${2:-590}
new=$PWD
export PYTHONUNBUFFERED=1
bash bench/device/wheels.sh || exit 1
if [ ! -d /tmp/full ]; then
    PYTHONPATH=/tmp/site:$new python3 -m sidecar.devtools.checkpoint /tmp/full --size full > "$OUT/checkpoint.log" 2>&1 ||
        { tail -n 20 "$OUT/checkpoint.log"; exit 1; }
fi
report=$OUT/same-output.txt
{
    echo "new tree: $new ($(git -C "$new" rev-parse --short HEAD 2>/dev/null)); old tree: $old"
    echo "== new, from $SECONDS s"
    PYTHONPATH=/tmp/site:$new timeout $((end - SECONDS)) python3 bench/same_output.py /tmp/full /tmp/new.pt 2>&1 | grep -v Warning
    echo "== old, from $SECONDS s"
    (cd "$old" && PYTHONPATH=/tmp/site:$PWD timeout $((end - SECONDS)) python3 "$new/bench/same_output.py" /tmp/full /tmp/old.pt 2>&1 | grep -v Warning)
    echo "== compared at $SECONDS s"
    python3 bench/same_output.py --compare /tmp/old.pt /tmp/new.pt | tail -n 40
} > "$report" 2>&1
tail -n 6 "$report"
exit 0

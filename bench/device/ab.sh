#!/usr/bin/env bash
# Our server alone, at this tree and then at an older one, in one call (~4 minutes a tree): the
# arms single (with streaming first audio) and mixed, with neither the seed server nor the
# reference. An A/B of a change on one host, whose CPU speed moves the figures by a few per cent
# from lease to lease; not a committed harness run (that needs all three servers in one run:
# bench/device/harness.sh).
#
# Assumes: the `device` machine (one GPU, a call of at most 10 minutes, no network), run from
# the repository root with the wheels the image lacks carried in `.whl/` and the older tree in
# `.carry/OLD`; $OUT is the folder whose files come back.
#
#   mkdir -p .carry/OLD && git archive OLD | tar -x -C .carry/OLD
#   bash bench/device/ab.sh NEW .carry/OLD        # $OUT/new.json, $OUT/old.json and their logs
set -u
new=$1 old_tree=${2:-}
bash bench/device/wheels.sh || exit 1
export PYTHONUNBUFFERED=1
arm() {  # tree commit name seconds [--make-checkpoint]
    local tree=$1 commit=$2 name=$3 seconds=$4 start=$SECONDS; shift 4
    echo "== $name ($commit, $tree)"
    (cd "$tree" && PYTHONPATH=/tmp/site:$PWD timeout "$seconds" python3 bench/harness.py "$@" \
        --arms single,mixed --devices 0 --commit "$commit" --out "$OUT/$name.json") > "$OUT/$name.log" 2>&1
    echo "rc=$? in $((SECONDS - start)) s"; grep -v Warning "$OUT/$name.log" | tail -n 2
    for d in /tmp/bench-*; do mv "$d/server.log" "$OUT/$name-server.log" 2>/dev/null; rm -rf "$d"; done
}
arm . "$new" new 330 --make-checkpoint
[ -n "$old_tree" ] && arm "$old_tree" "$(basename "$old_tree")" old $((585 - SECONDS))
exit 0

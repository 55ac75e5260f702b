#!/usr/bin/env bash
# Small interactive passes on a CUDA stream of their own beside the bulk batch's full-size
# passes, in the runtime as the sidecar loads it (bench/two_streams.py), in one call of about
# five to seven minutes (estimated): the bulk's pass (~44,700 tokens) and small passes of 500,
# 1,000, 1,500 and 3,000 tokens, each alone and together; forward passes and whole denoising
# steps; the small stream at the bulk's priority and at the highest; the two loops launched
# from one host thread (all the bulk queued first, or interleaved), from two Python threads, and
# by the interactive lane's own loop (sidecar/runtime/interleave.py, as `--interactive-stream`
# runs it); then SM partitions (CUDA green contexts, `--partitions 8,16,24,32` unless the
# arguments say otherwise, `--partitions ''` for none): the small passes on 8 to 32 SMs, the bulk
# on the rest or the whole device, forward passes only (about 20-35 s a partition, estimated: the
# arm has not run yet). The partitions are disjoint only where cuda-python imports
# (`cuda.bindings`: cp312 wheels of cuda-bindings and cuda-pathfinder for the driver's CUDA major
# in .whl/ are installed with the rest); else torch's GreenContext.create makes them, maybe
# overlapping (`way`, `disjoint`).
#
# Assumes: the `device` machine (one GPU, a call of at most 10 minutes, no network), run from the
# repository root with `.whl/` carried. Arguments after COMMIT go to bench/two_streams.py (say
# `--kinds forward --hosts queued` for the device's share alone).
#
#   bash bench/device/two_streams.sh COMMIT [ARGS ...]
#
# $OUT gets two-streams.json (rewritten after every row, so a call cut short keeps what it
# measured; keys in bench/two_streams.py's docstring) and two-streams.log; the output ends with
# one line per row: kind, host, priority, small tokens, the small pass's p50/p99 (ms, and alone),
# the bulk's share of its rate alone and its TFLOP/s; then the partitions': SMs (small + bulk),
# where the bulk ran, the same columns, and the graphs each lane captured.
set -u
commit=${1:-unknown}
shift
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
bash bench/device/wheels.sh || exit 1
if [ ! -d /tmp/full ]; then
    python3 -m sidecar.devtools.checkpoint /tmp/full --size full > "$OUT/checkpoint.log" 2>&1 ||
        { tail -n 20 "$OUT/checkpoint.log"; exit 1; }
fi
echo "checkpoint ready at $SECONDS s"
timeout $((${CALL_S:-590} - SECONDS)) python3 bench/two_streams.py /tmp/full --commit "$commit" \
    --out "$OUT/two-streams.json" --partitions 8,16,24,32 "$@" > "$OUT/two-streams.log" 2>&1
echo "rc=$? at $SECONDS s"
grep -v Warning "$OUT/two-streams.log" | grep -v '^{' | tail -n 8 | cut -c1-300
python3 - "$OUT/two-streams.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print("bulk", r.get("bulk"), "small", r.get("small"), "load", r.get("load_s"), "s, ready", r.get("ready_s"), "s, end", r.get("seconds"), "s")
for kind, a in r.get("alone", {}).items():
    print("alone", kind, a["bulk"], {k: (v["small_p50_ms"], v["small_p99_ms"]) for k, v in a.get("small", {}).items()})
print("kind host priority tokens | small p50 p99 ms (alone p50 x) | bulk share tflops total")
for w in r.get("beside", []):
    print(w["kind"], w["host"], w["priority"], w["small_tokens"], "|", w["small_p50_ms"], w["small_p99_ms"],
          f'({w["small_p50_over_alone"]}x)', "|", w["bulk_share"], w["bulk_tflops"], w["total_tflops"],
          f'| request p50 {w["request_p50_ms"]} p99 {w["request_p99_ms"]} ms' if "requests" in w else "")
p = r.get("partitions")
if p is not None:
    print("partitions: supported", p["supported"], p.get("reason") or "", "device SMs", p.get("device_sms"), "way", p.get("way"))
    for s in p.get("splits", []):
        a = p["alone"].get(str(s["interactive_sms"]))
        print("split", s["small_sms"], "+", s["bulk_sms"], s.get("way"), "disjoint", s.get("disjoint"), "error", s["error"], "| bulk alone on the rest", a and a["bulk"], "share", a and a["bulk_partition_share"],
              "| small alone", a and {k: (v["small_p50_ms"], v["small_p99_ms"]) for k, v in a["small"].items()})
    print("small+bulk SMs, bulk on, tokens | small p50 p99 ms (alone x) | bulk share tflops total | graphs small bulk")
    for w in p.get("rows", []):
        print(f'{w["small_sms"]}+{w["bulk_sms"]}', w["bulk_on"], w["small_tokens"], "|", w["small_p50_ms"], w["small_p99_ms"],
              f'({w["small_p50_over_alone"]}x)', "|", w["bulk_share"], w["bulk_tflops"], w["total_tflops"], "|", w["small_graphs"], w["bulk_graphs"])
PY
exit 0

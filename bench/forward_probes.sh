#!/usr/bin/env bash
# The checks to make on one H200 before a harness run, in one `device` call (~4 minutes; carry .whl):
#   bash bench/forward_probes.sh            # the step at 1, 8 and 64 items (bench/profile_step.py)
#   bash bench/forward_probes.sh --kernels  # and the forward's kernels by kind at 64 items, its
#                                           # device time by operator and input shapes (--ops),
#                                           # and Inductor's generated code (in kernels.log)
#   bash bench/forward_probes.sh --norm-rope  # and the step again with attention's q/k norm and
#                                           # rotary compiled by Inductor, as before the kernel of
#                                           # sidecar/runtime/kernels/norm_rope.py (on by default): its times, and
#                                           # its logits against the default's (norm_rope_compare.log:
#                                           # bench/stack_check.py --compare); first the kernel
#                                           # alone against Inductor's, tile by tile
#                                           # (bench/norm_rope_probe.py)
#   bash bench/forward_probes.sh --projections  # and the step again twice: each layer's q/k/v
#                                           # projections as one matrix product, then q/k/v and
#                                           # gate/up (OmniVoiceModel.fuse_projections): their
#                                           # times, and whether their logits equal the default's
#                                           # bit for bit (projections_compare.log)
#   bash bench/forward_probes.sh --residual  # and the step again with each layer's projections
#                                           # added onto a copy of the residual stream (the way
#                                           # before sidecar/runtime/residual.py): its times, whether its
#                                           # logits equal the default's bit for bit
#                                           # (residual_compare.log), and its forward's kernels and
#                                           # copies (residual_kernels.log)
#   bash bench/forward_probes.sh --attention  # and attention alone over the mixed texts' packed
#                                           # segments: FlashAttention-2 varlen, cuDNN's ragged
#                                           # layout (and whether a CUDA graph takes it), dense
#                                           # groups (bench/attention_options.py, ~1 minute)
#   bash bench/forward_probes.sh --norm-rope --kernels --attention  # flags combine
# The step probe reports, per batch size: the forward, the scoring, the reveal, a whole step
# back to back, the decode, whether a step runs free of host synchronisations, and where the
# batch's bucket has two graphs (attention capped at 1,024 and at 4,096 tokens) whether they
# agree bit for bit. (A compiled scoring was probed and removed at 3b8dbe0:
# bench/results/2026-12-01-fused-scoring.json.)
# The step probe also times the step's scoring as one Triton kernel (sidecar/runtime/kernels/scoring.py) against
# the eager scoring, with the share of equal tokens (`choice_tokens_equal`).
# Results land in $OUT as JSON, the logs in $OUT/logs.tar.gz (the device tool brings back at
# most 8 files); a probe that overruns its share is cut.
# (bench/attention_options.py and Inductor's coordinate-descent tuning were probed at 0e654f6:
# bench/results/2026-12-01-forward-probes.json.)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
python3 -m sidecar.devtools.checkpoint /tmp/full --size full > /dev/null 2>&1 || exit 1
# Batches of 1, 8 and 64 of profile_step's 540-token item land in these buckets, whatever the
# others: capturing only them saves most of each run's ~30-70 s of graph capture.
buckets="--buckets 768 5120 36864"
logs=/tmp/probe-logs
mkdir -p "$logs"
trap 'tar -czf "$OUT/logs.tar.gz" -C "$logs" .' EXIT
probe() {  # name seconds command...
    local name=$1 seconds=$2 start=$SECONDS; shift 2
    echo "== $name"
    timeout "$seconds" "$@" > "$logs/$name.log" 2>&1
    echo "rc=$? in $((SECONDS - start)) s"; grep -v Warning "$logs/$name.log" | tail -n 4
}
compare() {  # log variant...: each variant's logits against the default's, at 1, 8 and 64 items
    local log=$1 variant b; shift
    for variant in "$@"; do
        for b in 1 8 64; do
            echo "$variant, batch $b"
            python3 bench/stack_check.py --compare /tmp/logits-default/logits-$b.pt \
                /tmp/logits-$variant/logits-$b.pt
        done
    done > "$logs/$log.log" 2>&1
    cat "$logs/$log.log"
}
probe step 200 python3 bench/profile_step.py /tmp/full --batch 1 8 64 $buckets --out "$OUT/step.json" \
    --save-logits /tmp/logits-default
if [[ " $* " == *" --norm-rope "* ]]; then
    probe norm_rope_kernel 150 python3 bench/norm_rope_probe.py --out "$OUT/norm_rope_probe.json"
    probe norm_rope 200 python3 bench/profile_step.py /tmp/full --batch 1 8 64 $buckets \
        --unfused-norm-rope --out "$OUT/norm_rope.json" --save-logits /tmp/logits-unfused-norm-rope
    compare norm_rope_compare unfused-norm-rope
fi
if [[ " $* " == *" --projections "* ]]; then
    probe qkv 200 python3 bench/profile_step.py /tmp/full --batch 1 8 64 $buckets \
        --fused-projections --out "$OUT/qkv.json" --save-logits /tmp/logits-qkv
    probe qkv_gate_up 200 python3 bench/profile_step.py /tmp/full --batch 1 8 64 $buckets \
        --fused-projections --fused-gate-up --out "$OUT/qkv_gate_up.json" \
        --save-logits /tmp/logits-qkv_gate_up
    compare projections_compare qkv qkv_gate_up
fi
if [[ " $* " == *" --residual "* ]]; then
    probe residual 200 python3 bench/profile_step.py /tmp/full --batch 1 8 64 $buckets \
        --residual-copy --out "$OUT/residual.json" --save-logits /tmp/logits-residual
    compare residual_compare residual
    probe residual_kernels 180 python3 bench/profile_kernels.py /tmp/full --batch 64 --ops \
        --residual-copy --out "$OUT/residual_kernels.json"
    grep '"copies"' "$logs/residual_kernels.log" | cut -c1-1500
fi
if [[ " $* " == *" --kernels "* ]]; then
    probe kernels 180 env TORCH_LOGS=output_code python3 bench/profile_kernels.py /tmp/full \
        --batch 64 --ops --out "$OUT/kernels.json"
fi
if [[ " $* " == *" --attention "* ]]; then
    probe attention 150 python3 bench/attention_options.py /tmp/full --items 56 \
        --out "$OUT/attention.json"
fi
exit 0

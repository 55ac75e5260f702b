#!/usr/bin/env bash
# cuDNN's fused attention against FlashAttention-2 varlen over the packed segments, in one call
# of about four minutes: bench/attention_kernels.py (the kernels alone, their CUDA graphs and
# whether a segment's result depends on its company; then the runtime with cuDNN's kernel:
# forward time and packing, bit for bit), then the in-model attention rate from
# bench/profile_kernels.py --attention cudnn.
#
# Assumes: the `device` machine (one Hopper GPU, Python 3.12, no network, 64 MiB carried a call),
# run from the repository root, with `.whl/` carried: what the server needs
# (bench/device/harness.sh lists it) and nvidia-cudnn-frontend 1.20.0 (a 2.5 MB wheel of
# prebuilt Python bindings; cuDNN itself is the image's, PyTorch's own).
#
#   bash bench/device/attention.sh prepare   # here: the frontend's wheel into .whl
#   bash bench/device/attention.sh run       # there (carry .whl): $OUT/attention-kernels.json,
#                                            # $OUT/kernels-cudnn.json, $OUT/attention.log
#   bash bench/device/attention.sh baseline  # there, the next call: $OUT/kernels-fa2.json, the
#                                            # same profile with FlashAttention-2 (same lease)
#   bash bench/device/attention.sh server C  # there (~6 minutes): the harness's mixed arm with
#                                            # fa2, then with cudnn (OMNIVOICE_ATTENTION), at
#                                            # commit C: $OUT/mixed-fa2.json, $OUT/mixed-cudnn.json
#   bash bench/device/attention.sh respawn C # there (~3 minutes): bench/start_arm.py with
#                                            # `serve --attention cudnn`: $OUT/respawn-cudnn.json
set -u
setup() {  # the carried wheels and the full-size checkpoint, once per machine
    if [ ! -d /tmp/site/cudnn ]; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
            --target /tmp/site .whl/*.whl || exit 1
    fi
    export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
    [ -d /tmp/full ] || python3 -m sidecar.devtools.checkpoint /tmp/full --size full > /dev/null 2>&1
}
case $1 in
prepare)
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
        -d .whl nvidia-cudnn-frontend==1.20.0
    ls -la .whl/nvidia_cudnn_frontend-*
    ;;
run)
    setup
    log=$OUT/attention.log
    python3 -c "import torch, cudnn; print('cudnn frontend', cudnn.__version__, 'library', cudnn.backend_version(), 'torch', torch.__version__)" 2>&1 | tee "$log"
    timeout 190 python3 bench/attention_kernels.py /tmp/full --items 56 --in-model cudnn \
        --out "$OUT/attention-kernels.json" 2>&1 | grep -v Warning | tee -a "$log"
    timeout 100 python3 bench/profile_kernels.py /tmp/full --batch 64 --skip-decode \
        --attention cudnn --out "$OUT/kernels-cudnn.json" 2>&1 | grep -v Warning | tail -20 | tee -a "$log"
    ;;
baseline)
    setup
    timeout 150 python3 bench/profile_kernels.py /tmp/full --batch 64 --skip-decode \
        --attention fa2 --out "$OUT/kernels-fa2.json" 2>&1 | grep -v Warning | tail -20
    ;;
server)
    setup
    for kernel in fa2 cudnn; do
        OMNIVOICE_ATTENTION=$kernel timeout 280 python3 bench/harness.py --checkpoint /tmp/full \
            --arms mixed --commit "$2" --out "$OUT/mixed-$kernel.json" > "$OUT/mixed-$kernel.log" 2>&1
        echo "mixed with $kernel: exit $?"; grep -v Warning "$OUT/mixed-$kernel.log" | tail -3
    done
    ;;
respawn)
    setup
    timeout 280 python3 bench/start_arm.py --checkpoint /tmp/full --commit "$2" --starts 2 \
        --kills 1 --server-arg=--attention --server-arg=cudnn --out "$OUT/respawn-cudnn.json" \
        > "$OUT/respawn-cudnn.log" 2>&1
    echo "exit $?"; tail -n 4 "$OUT/respawn-cudnn.log"
    ;;
*)
    echo "usage: $0 prepare|run|baseline|server COMMIT|respawn COMMIT" >&2
    exit 2
    ;;
esac

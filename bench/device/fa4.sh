#!/usr/bin/env bash
# FlashAttention 4 (the `flash-attn-4` package: CuTe DSL kernels, a Hopper forward among them)
# for `bench/probe_faster_attention.py --flash-impl FA4`.
#
# Assumes: the `device` machine (one Hopper GPU, Python 3.12, no network, 64 MiB carried a call,
# an image that already has cuda-bindings, einops, protobuf and typing-extensions), run from the
# repository root. The wheels come to ~100 MB (nvidia-cutlass-dsl's CUDA 13 libraries alone are
# 92 MB), more than one call may carry, so they are downloaded and split here, carried in two
# calls to the warm machine, and joined there.
#
#   bash bench/device/fa4.sh prepare   # here: the wheels into .whl-fa4, split into .whl-fa4a, .whl-fa4b
#   bash bench/device/fa4.sh first     # there (carry .whl-fa4a): keeps its part in /tmp/fa4parts
#   bash bench/device/fa4.sh second    # there, the next call (carry .whl-fa4b .whl): joins the
#                                      # parts, installs into /tmp/fa4site, then runs the attention
#                                      # probe ($OUT/attention.json) with FlashAttention 2 and 4
set -eu
parts=/tmp/fa4parts
case $1 in
prepare)
    rm -rf .whl-fa4 .whl-fa4a .whl-fa4b
    mkdir -p .whl-fa4 .whl-fa4a .whl-fa4b
    for wheel in flash-attn-4==4.0.0b36 nvidia-cutlass-dsl==4.8.1 nvidia-cutlass-dsl-libs-base==4.8.1 \
        nvidia-cutlass-dsl-libs-core==4.8.1 nvidia-cutlass-dsl-libs-cu13==4.8.1 \
        apache-tvm-ffi==0.1.15.post2 torch-c-dlpack-ext==0.1.5 quack-kernels==0.6.5; do
        python3 -m pip download -q --pre --no-deps --only-binary=:all: --python-version 3.12 \
            --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 \
            --platform manylinux2014_x86_64 -d .whl-fa4 "$wheel"
    done
    big=$(ls .whl-fa4/nvidia_cutlass_dsl_libs_cu13-*.whl)
    split -b 55M "$big" ".whl-fa4a/$(basename "$big").part-"
    mv .whl-fa4a/*.part-ab .whl-fa4b/
    find .whl-fa4 -name '*.whl' ! -name 'nvidia_cutlass_dsl_libs_cu13-*' -exec cp {} .whl-fa4b/ \;
    du -sh .whl-fa4a .whl-fa4b
    ;;
first)
    mkdir -p "$parts"
    cp .whl-fa4a/* "$parts/"
    ls -la "$parts"
    ;;
second)
    pip=(python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir)
    if [[ ! -d /tmp/fa4site/flash_attn ]]; then  # not yet installed on this warm machine
        cp .whl-fa4b/* "$parts/"
        for first in "$parts"/*.part-aa; do
            cat "${first%.part-aa}".part-* > "${first%.part-aa}"
            rm "${first%.part-aa}".part-*
        done
        "${pip[@]}" --target /tmp/fa4site "$parts"/*.whl
    fi
    "${pip[@]}" --target /tmp/site .whl/*.whl
    # pip --target skips .pth files: nvidia-cutlass-dsl's adds its dsl_packages (`cutlass`).
    export PYTHONPATH=/tmp/fa4site:/tmp/fa4site/nvidia_cutlass_dsl/dsl_packages:/tmp/site:$PWD
    export PYTHONUNBUFFERED=1
    python3 -c "import flash_attn.cute.interface as m; print('flash_attn.cute:', m.__file__)"
    python3 -m sidecar.devtools.checkpoint /tmp/full --size full > /dev/null 2>&1
    timeout 300 python3 bench/probe_faster_attention.py /tmp/full --items 56 --flash-impl FA4 \
        --out "$OUT/attention.json" 2>&1 | grep -v Warning | grep -v 'o = F.scaled'
    ;;
*)
    echo "usage: $0 prepare|first|second" >&2
    exit 2
    ;;
esac

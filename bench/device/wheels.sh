#!/usr/bin/env bash
# The carried wheels installed where a device script's PYTHONPATH looks: the device machine has no
# network, so what a run needs comes in as wheels in a git-ignored folder named in `carry`.
#
#   bash bench/device/wheels.sh [DIR [TARGET]]   # default: .whl into /tmp/site
#
# Each script runs it first (`|| exit 1`: nothing runs on a half-installed site).
set -u
dir=${1:-.whl} target=${2:-/tmp/site}
exec python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --target "$target" "$dir"/*.whl

#!/bin/sh
# Install omnivoice-supervisor from this checkout as a systemd service, or remove it.
#
#   sudo systemd/install.sh --model k2-fsa/OmniVoice [install-service options]
#   sudo systemd/install.sh --uninstall [--purge]
#
# Installing creates (or upgrades) a virtual environment in $PREFIX/venv (default
# /opt/omnivoice-supervisor) with this checkout in it, then runs
# `omnivoice-supervisor install-service`: user, settings file, unit, enable, restart.
# Running it again after `git pull` is the upgrade: new code, then a drained restart.
# Extra pip arguments (a CUDA wheel index, say) go in $PIP_ARGS.
set -eu

PREFIX=${PREFIX:-/opt/omnivoice-supervisor}
CHECKOUT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}

if [ "$(id -u)" != 0 ]; then
    echo "run as root: sudo $0 $*" >&2
    exit 2
fi

if [ "${1:-}" = "--uninstall" ]; then
    shift
    exec "$PREFIX/venv/bin/omnivoice-supervisor" uninstall-service "$@"
fi

if [ ! -x "$PREFIX/venv/bin/python" ]; then
    echo "+ $PYTHON -m venv $PREFIX/venv"
    "$PYTHON" -m venv "$PREFIX/venv"
fi
echo "+ $PREFIX/venv/bin/pip install $CHECKOUT"
# shellcheck disable=SC2086  # PIP_ARGS is a list of words on purpose
"$PREFIX/venv/bin/pip" install -q ${PIP_ARGS:-} "$CHECKOUT"
exec "$PREFIX/venv/bin/omnivoice-supervisor" install-service "$@"

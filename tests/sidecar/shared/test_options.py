"""The sidecar's options, declared once: the supervisor's settings, the sidecar's command line
and the runtime all take their defaults and choices from sidecar/shared/options.py."""

from __future__ import annotations

import dataclasses

import pytest

from sidecar.runtime.options import RuntimeOptions
from sidecar.serve.main import parse_args
from sidecar.shared.options import (
    ATTENTION,
    ATTENTION_KERNELS,
    INTERACTIVE_STREAM,
    SIDECAR_OPTIONS,
    STEP_TOKENS,
)
from supervisor.settings import Settings
from supervisor.supervision.gpu import CPU
from supervisor.supervision.sidecar_command import sidecar_argv, sidecar_command


def test_a_default_server_passes_every_option_at_its_declared_default() -> None:
    """What the supervisor passes by default is what the sidecar takes without a flag."""
    argv = sidecar_argv(Settings(engine="null").sidecar, CPU)
    passed = vars(parse_args(argv[len(sidecar_command()) :]))
    alone = vars(parse_args([]))
    for option in SIDECAR_OPTIONS:
        name = option.flag.removeprefix("--").replace("-", "_")
        assert option.flag in argv
        assert passed[name] == alone[name] == option.default, option.flag


def test_the_supervisors_settings_take_the_declared_defaults_and_choices() -> None:
    fields = {f.name: f for f in dataclasses.fields(Settings)}
    assert Settings(engine="null").interactive_step_tokens == STEP_TOKENS.default
    assert fields["attention"].metadata["choices"] == tuple(ATTENTION_KERNELS)
    assert fields["interactive_stream"].metadata["choices"] == INTERACTIVE_STREAM.choices


def test_the_runtime_defaults_to_the_declared_kernel_and_refuses_an_unknown_one() -> None:
    assert RuntimeOptions().attention == ATTENTION.default == next(iter(ATTENTION_KERNELS))
    assert RuntimeOptions().interactive_stream == INTERACTIVE_STREAM.default
    with pytest.raises(ValueError, match="attention must be one of fa2, cudnn"):
        RuntimeOptions(attention="flash3")


def test_the_sidecars_command_line_refuses_a_choice_not_declared() -> None:
    with pytest.raises(SystemExit):
        parse_args(["--interactive-stream", "on"])

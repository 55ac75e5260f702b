"""`RuntimeOptions` refuses what the runtime cannot run."""

from __future__ import annotations

import pytest

from sidecar.runtime.options import RuntimeOptions


def test_the_decode_options_are_checked() -> None:
    with pytest.raises(ValueError, match="decode_priority must be one of above, equal, below"):
        RuntimeOptions(decode_priority="first")
    with pytest.raises(ValueError, match="codec_dtype must be one of float32, bfloat16"):
        RuntimeOptions(codec_dtype="float16")
    with pytest.raises(ValueError, match="decode_frames_per_call must be positive"):
        RuntimeOptions(decode_frames_per_call=0)
    with pytest.raises(ValueError, match="interactive_stream must be one of off, equal, high"):
        RuntimeOptions(interactive_stream="on")
    assert RuntimeOptions(decode_priority="below", codec_dtype="bfloat16").codec_dtype == "bfloat16"

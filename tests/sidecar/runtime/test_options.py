"""`RuntimeOptions` refuses what the runtime cannot run."""

from __future__ import annotations

import pytest

from sidecar.runtime.options import RuntimeOptions


def test_the_choices_are_checked() -> None:
    with pytest.raises(ValueError, match="attention must be one of fa2, cudnn"):
        RuntimeOptions(attention="flash3")
    with pytest.raises(ValueError, match="interactive_stream must be one of off, equal, high"):
        RuntimeOptions(interactive_stream="on")
    assert RuntimeOptions(interactive_stream="high").interactive_stream == "high"

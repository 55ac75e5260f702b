"""A real null-engine sidecar process on real pipes, spoken to frame by frame; its entry point
is the test one (`python -m sidecar.devtools.faulty_sidecar`), so fault markers fire."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from sidecar.shared.protocol import FROM_SIDECAR, Tier, encode_frame, read_frame
from tests.helpers.paths import REPO_ROOT

FAULTY = "sidecar.devtools.faulty_sidecar"


class NullSidecar:
    def __init__(self, *flags: str, module: str = FAULTY) -> None:
        """`module="sidecar"`: production's entry point, with no fault hooks."""
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
        argv = [
            sys.executable,
            "-m",
            module,
            "--engine",
            "null",
            "--warmup-steps",
            "0",
            *flags,
        ]
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=REPO_ROOT
        )
        assert self.read_until("ready")["op"] == "ready"

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(encode_frame(message))
        self.proc.stdin.flush()

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        frame = read_frame(self.proc.stdout, 1 << 26, FROM_SIDECAR)
        assert frame is not None, "the sidecar closed its stdout"
        return frame  # type: ignore[return-value]

    def read_until(self, op: str, batch: int | None = None) -> dict[str, Any]:
        while True:
            frame = self.read()
            if frame["op"] == op and (batch is None or frame.get("batch") == batch):
                return frame

    def generate(
        self, batch: int, texts: list[str], num_step: int = 4, tier: Tier = Tier.BULK
    ) -> None:
        items = [
            {"id": f"b{batch}-{i}", "text": t, "num_step": num_step, "seed": i}
            for i, t in enumerate(texts)
        ]
        self.send(
            {"op": "generate", "batch": batch, "items": items, "encoding": "s16le", "tier": tier}
        )

    def close(self) -> int:
        self.send({"op": "shutdown"})
        return self.proc.wait(10)

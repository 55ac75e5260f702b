"""sidecar/runtime/codec_graphs.py's bookkeeping on the CPU: which decodes replay a graph (their
stream's, of their shape), and that a replay's audio is its own. A CUDA graph cannot run here, so
each captured entry's graph is a stand-in that does what a replay does: the eager decode of the
static input into the static output. The capture itself runs on the GPU only (the harness and
`bench/device/same_output.sh` load the runtime with graphs there)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from sidecar.runtime.codec import Codec, load_codec
from sidecar.runtime.codec_graphs import Captured, DecodeGraphs

STREAM, OTHER_STREAM = 11, 12


class StandIn:
    """What replaying a captured decode does: its static input decoded into its static output."""

    def __init__(self, decode: Callable[[torch.Tensor], torch.Tensor], captured: Captured) -> None:
        self.decode, self.captured, self.replays = decode, captured, 0

    def replay(self) -> None:
        self.captured.audio.copy_(self.decode(self.captured.codes))
        self.replays += 1


def with_stand_in(graphs: DecodeGraphs, stream: int, rows: int, frames: int) -> StandIn:
    codes = torch.zeros((rows, 8, frames), dtype=torch.long)
    captured = Captured(None, codes, graphs.decode(codes))  # type: ignore[arg-type]
    captured.graph = stand_in = StandIn(graphs.decode, captured)
    graphs.captured[stream, rows, frames] = captured
    return stand_in


def test_a_decode_replays_its_streams_graph_of_its_shape(checkpoint_dir: Path) -> None:
    codec: Codec = load_codec(checkpoint_dir / "audio_tokenizer")
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():  # the fixture's codebooks are zeros: its audio would ignore the codes
        for q in codec.quantizer.quantizers:
            q.codebook.embed.copy_(torch.randn(q.codebook.embed.shape, generator=gen))
    graphs = DecodeGraphs(codec.decode_eagerly)
    graph = with_stand_in(graphs, STREAM, 1, 48)
    first, second = (torch.randint(0, 1024, (1, 8, 48), generator=gen) for _ in range(2))
    got_first = graphs.replay(first, STREAM)
    got_second = graphs.replay(second, STREAM)
    assert graph.replays == 2 and got_first is not None and got_second is not None
    # Each replay's audio is a copy: the second did not overwrite the first.
    torch.testing.assert_close(got_first, codec.decode_eagerly(first), atol=0, rtol=0)
    torch.testing.assert_close(got_second, codec.decode_eagerly(second), atol=0, rtol=0)
    assert not torch.equal(got_first, got_second), "the test lost its power"
    # Another stream, or another shape, has no graph here: decoded eagerly by the caller.
    assert graphs.replay(first, OTHER_STREAM) is None
    assert graphs.replay(first[:, :, :32], STREAM) is None
    assert graph.replays == 2

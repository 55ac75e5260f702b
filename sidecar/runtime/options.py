"""`RuntimeOptions`: how the runtime runs the network, in one frozen object handed down whole.

`OmniVoice.load` takes it and gives it, resolved for the device and dtype, to `ModelRunner`. Only
what varies is here: what the sidecar's command line chooses (`attention`, `interactive_stream`,
declared in sidecar/shared/options.py), what depends on the device (`cuda_graphs`, `compile`),
and what the interactive lane's runner sets apart from the bulk one's (`buckets`,
`graphs_at_load`, `graph_priority`: `interactive_options` in omnivoice.py). The rest of the
production path (the stack compiled by regions, rounding as eager PyTorch does, the Triton
kernels, the decode's stream and precision) is not a switch: docs/PERFORMANCE.md says what each
part buys.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sidecar.shared.options import (
    ATTENTION,
    ATTENTION_KERNELS,
    INTERACTIVE_STREAM,
    INTERACTIVE_STREAMS,
)

# Token counts that get CUDA graphs: about four buckets an octave, eight above 32768 tokens
# where saturated batches land (finer steps there waste less padding); more graphs cost start
# time only.
DEFAULT_BUCKETS = (
    256,
    512,
    768,
    1024,
    1280,
    1536,
    2048,
    2560,
    3072,
    4096,
    5120,
    6144,
    8192,
    10240,
    12288,
    16384,
    20480,
    24576,
    32768,
    36864,
    40960,
    45056,
    49152,
    53248,
    57344,
    61440,
    65536,
)


@dataclass(frozen=True)
class RuntimeOptions:
    """How the network runs; the defaults are the production path where nothing says otherwise.

    - `cuda_graphs`: replay each forward pass from a CUDA graph captured at load (a GPU in half
      precision only: graphs need the FlashAttention varlen path).
    - `compile`: torch.compile the layer stack (and fuse the codec decoder's activations);
      None: on for a GPU in half precision, off elsewhere.
    - `buckets`: the token counts that get graphs (the interactive lane's runner the small ones;
      a test or benchmark may ask for fewer, since each graph costs start time).
    - `graphs_at_load`: buckets of at most this many tokens get their graphs at load (those of
      single requests and small batches), a larger bucket's at its first batch, which runs
      eagerly at the bucket's shapes (the graph's kernels, so the same results) before the
      capture; None: every graph at load. Each graph at load costs start time, so a respawn
      waits for 16 graphs instead of 50. The compiled stack is first traced, as before at the
      largest bucket, with a cap below the token count (a precaution: traced with the two
      equal, it might keep them equal and compile again for other shapes).
    - `attention`: the packed segments' attention kernel on a GPU in half precision: `fa2`
      (FlashAttention-2, PyTorch's own) or `cudnn` (cuDNN's fused attention on Hopper, from the
      `nvidia-cudnn-frontend` package, the `cudnn` extra; it rounds differently, inside the
      fidelity gate's band: docs/PERFORMANCE.md), chosen by `serve --attention`. One that
      cannot run there falls back to `fa2` with a warning.
    - `graph_priority`: the CUDA stream priority the graphs are captured at (lower is sooner).
      PyTorch instantiates graphs with per-node priorities, so a graph's kernels keep the
      priority of the stream that captured it wherever they are replayed, not the replaying
      stream's (`bench/two_streams.py` measures small passes at 0 and at the highest beside a
      bulk batch's).
    - `interactive_stream`: `off` (interactive members join the bulk batch's steps under the
      step budget, `sidecar.runtime.priority`), or interactive work in a stepper and runner of
      its own (small CUDA graphs captured at load), stepped from the same host loop as the bulk
      batch's full-size steps and, on a GPU, on a CUDA stream of its own at the bulk's priority
      (`equal`) or the device's highest (`high`): `sidecar/runtime/interleave.py`.
    """

    cuda_graphs: bool = True
    compile: bool | None = None
    buckets: tuple[int, ...] = DEFAULT_BUCKETS
    graphs_at_load: int | None = 4096
    attention: str = ATTENTION.default
    graph_priority: int = 0
    interactive_stream: str = INTERACTIVE_STREAM.default

    def __post_init__(self) -> None:
        for name, allowed in (
            ("attention", tuple(ATTENTION_KERNELS)),
            ("interactive_stream", INTERACTIVE_STREAMS),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"{name} must be one of {', '.join(allowed)}, not {getattr(self, name)!r}"
                )

    def resolved(self, on_gpu: bool, half: bool) -> RuntimeOptions:
        """These options for a device and precision: `compile` decided, and `cuda_graphs` on only
        where graphs can run (a GPU in half precision)."""
        compile = (on_gpu and half) if self.compile is None else self.compile
        return replace(self, compile=compile, cuda_graphs=self.cuda_graphs and on_gpu and half)


DEFAULT_OPTIONS = RuntimeOptions()  # the production path

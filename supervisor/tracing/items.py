"""A job item's trace: its root span, begun at its admission, with the trace id its view shows."""

from __future__ import annotations

from opentelemetry.trace import Span

from supervisor.jobs.storage import Claimed
from supervisor.speech.synthesis.runner import SynthesisRun
from supervisor.tracing import spans


def item_span(item: Claimed, synthesis: SynthesisRun) -> Span:
    """The item's root span (`job.item`), from its admission on; the runner ends it once the
    item has ended. Its id is `spans.item_trace_id`, so every attempt at the item shares it."""
    began, admitted = synthesis.admitted
    root = spans.root(
        "job.item",
        spans.item_trace_id(item.job_id, item.n),
        {"omnivoice.job.id": item.job_id, "omnivoice.job.item": item.n},
        start_s=began,
    )
    spans.record("admission", root, began, admitted)
    return root

"""A task's time in the scheduler and the sidecar, as spans under the request that made it.

A task keeps the context it was made in (`Task.trace`). When its batch is sent, `queue` is
recorded (admitted until sent); when its answer comes, `batch` (sent until answered: the
sidecar's pipe, its steps and its decode), with the batch's id, kind, items, estimated tokens and
whether it joined a running batch; when the batch's `done` comes, `steps` and `decode` under
`batch`, timed from the sidecar's own figures (`denoise_s`, `decode_s`, `wall_s`) and carrying
them (passes, tokens, step count) as attributes. The session calls these; off, they return at once.
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import trace
from opentelemetry.util.types import AttributeValue

from supervisor.supervision.work import Answer, Batch, Task
from supervisor.tracing import spans

# The `done` frame's figures that belong to the decode; the others go with the steps.
DECODE_STATS = ("decode_s", "codec_s", "postprocess_s", "send_s")


def sent(batch: Batch) -> None:
    if not spans.enabled():
        return
    for task in batch.tasks:
        attributes: dict[str, AttributeValue] = {
            "omnivoice.tier": task.tier.value,
            "omnivoice.kills": len(task.kills),
        }
        spans.record("queue", task.trace, task.queued_at, batch.sent_at, attributes)


def answered(batch: Batch, task: Task, message: Answer, now: float) -> None:
    if not spans.enabled():
        return
    attributes: dict[str, AttributeValue] = {
        "omnivoice.batch.id": batch.id,
        "omnivoice.batch.kind": batch.kind,
        "omnivoice.batch.tier": batch.tier.value,
        "omnivoice.batch.items": len(batch.tasks),
        "omnivoice.batch.tokens": sum(t.est_tokens for t in batch.tasks),
        "omnivoice.task.tokens": task.est_tokens,
    }
    for name, value in (message["timings"] if message["op"] == "result" else {}).items():
        attributes[f"omnivoice.sidecar.{name}"] = float(value)
    done = spans.record("batch", task.trace, batch.sent_at, now, attributes)
    if done is not None:
        task.batch_trace = trace.set_span_in_context(done)


def finished(batch: Batch, stats: Mapping[str, float], now: float) -> None:
    """The batch's `done`: its steps and decode under each task's `batch` span."""
    if not spans.enabled() or "wall_s" not in stats:
        return
    # On a busy host the sidecar may begin, even finish, before `sent_at` is read just after
    # the write: its spans never begin before the batch's.
    began = max(batch.sent_at, now - float(stats["wall_s"]))
    decoding = max(batch.sent_at, now - float(stats.get("decode_s", 0.0)))
    steps = {f"omnivoice.sidecar.{k}": float(v) for k, v in stats.items() if k not in DECODE_STATS}
    decode = {f"omnivoice.sidecar.{k}": float(stats[k]) for k in DECODE_STATS if k in stats}
    for task in batch.tasks:
        if task.batch_trace is None:
            continue
        spans.record(
            "steps", task.batch_trace, began, began + float(stats.get("denoise_s", 0.0)), steps
        )
        spans.record("decode", task.batch_trace, decoding, now, decode)

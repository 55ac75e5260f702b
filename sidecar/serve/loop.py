"""The sidecar's frame loop: load the engine, then read a frame, handle it, answer, repeat.

One frame is handled at a time, in order. While loading it sends `progress`; once the model
is loaded and warm, `ready`. A `generate` is answered with a `step` frame per denoising step
(the supervisor's heartbeat), then one `result` or `error` per item and a closing `done`. An
exception or out-of-memory in a batch fails only what it must: the batch is split in halves
and retried until the failing items stand alone, and the sidecar stays up. Only an error that
poisons the device context ends the process, so that a fresh one takes its place.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from sidecar.runtime.request import GenerationRequest, GenerationResult, VoicePrompt
from sidecar.serve import engines
from sidecar.serve.batch_run import BatchEntry, BatchRun, DenoisedGroup, ItemError, RunningBatch
from sidecar.serve.frame_pipe import FramePipe
from sidecar.serve.hooks import Hooks
from sidecar.serve.inbox import Inbox
from sidecar.serve.results import result_message
from sidecar.serve.spare import SpareDismissed, wait_for_go
from sidecar.serve.wire_arrays import decode_reference, tokens_from_wire, tokens_to_wire
from sidecar.shared.errors import CheckpointError, InvalidInput
from sidecar.shared.protocol import (
    ITEM_OPTIONS,
    EncodeVoice,
    Encoding,
    ErrorKind,
    ExitCode,
    Generate,
    Item,
    Message,
    ProtocolError,
    Tier,
    VoicePayload,
    encode_frame,
)

log = logging.getLogger("sidecar")

WARMUP_TEXT = "Warm up."


class Sidecar:
    def __init__(
        self, channel: FramePipe, args: argparse.Namespace, hooks: Hooks | None = None
    ) -> None:
        self.channel = channel
        self.args = args
        self.device = args.device
        self.hooks = hooks or Hooks()  # production's do nothing (sidecar/serve/hooks.py)
        self.engine: engines.Engine | None = None
        self.steps = 0
        self.waited_s = 0.0  # how long the frame loop waited for the frame it handles now
        # Decode and answer batches in order while the frame loop denoises the next one: each
        # tier's batches in a thread of their own, so an interactive one never waits for a bulk
        # one's decode.
        self.finishers = {
            tier: ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"finisher-{tier.value}")
            for tier in Tier
        }
        self.inbox: Inbox | None = None  # frames, read once the engine is ready
        # Say `denoised` once the device is past a batch's steps. Threads of their own, so that
        # the finisher queues a batch's codec kernels at once, and the word does not wait for
        # the decoding of the batches before it; one a tier, so that an interactive batch's
        # word (and its finisher's `done`, which waits for it) never waits for a bulk batch's
        # device work.
        self.watchers = {
            tier: ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"watcher-{tier.value}")
            for tier in Tier
        }

    # ------------------------------------------------------------ lifecycle

    def run(self) -> int:
        """Load, then serve frames until `shutdown` or the end of stdin."""
        code = self.load()
        if code is not None:
            return code
        self.inbox = inbox = Inbox(self.channel)
        while True:
            began = time.monotonic()
            try:
                message = inbox.get()
                self.waited_s = time.monotonic() - began
            except ProtocolError as exc:
                log.error("bad frame from the supervisor: %s", exc)
                self.send_error(None, None, ErrorKind.PROTOCOL, str(exc))
                return ExitCode.PROTOCOL
            if message is None:
                log.info("stdin closed; exiting")
                self.drain()
                return ExitCode.OK
            op = message["op"]
            if op == "shutdown":
                log.info("shutdown requested")
                self.drain()
                return ExitCode.OK
            getattr(self, f"handle_{op}")(message)

    def load(self) -> int | None:
        """Load and warm the engine; send `ready`. Returns an exit code if that failed."""
        self.channel.send({"op": "progress", "stage": "start"})
        self.hooks.on_load(lambda kind, text: self.send_error(None, None, ErrorKind(kind), text))
        dtype = engines.resolve_dtype(self.args.dtype, self.device)
        started = time.monotonic()
        try:
            park = (lambda: wait_for_go(self.channel, self.progress)) if self.args.park else None
            spec = engines.EngineSpec(
                self.args.engine,
                self.args.model,
                self.device,
                dtype,
                self.args.attention,
                self.args.interactive_stream,
            )
            self.engine = engines.load_engine(spec, self.progress, park)
            if self.args.warmup_steps > 0:
                self.progress("warmup")
                warm = GenerationRequest(text=WARMUP_TEXT, num_step=self.args.warmup_steps, seed=0)
                self.engine.generate([warm], on_step=lambda step, n: self.progress("warmup"))
        except SpareDismissed:  # a spare, never told to go
            return ExitCode.OK
        except (CheckpointError, InvalidInput, FileNotFoundError, ImportError) as exc:
            log.error("cannot load %r: %s", self.args.model, exc)
            self.send_error(None, None, ErrorKind.LOAD_FAILED, f"{type(exc).__name__}: {exc}")
            return ExitCode.LOAD_ERROR
        self.channel.send(
            {
                "op": "ready",
                "device": self.device,
                "model": self.args.model,
                "engine": self.args.engine,
                "sample_rate": int(self.engine.sample_rate),
                "memory": engines.memory_stats(self.device),
            }
        )
        log.info(
            "ready on %s (%s, %s) in %.1f s",
            self.device,
            self.args.engine,
            dtype,
            time.monotonic() - started,
        )
        return None

    def progress(self, stage: str) -> None:
        self.channel.send({"op": "progress", "stage": stage})

    def send_error(
        self,
        batch: int | None,
        item_id: str | None,
        kind: ErrorKind,
        message: str,
        bulk_answer: bool = False,
    ) -> None:
        self.channel.send(
            {"op": "error", "batch": batch, "id": item_id, "kind": kind.value, "message": message},
            bulk_answer,
        )

    # ------------------------------------------------------------ ops

    def handle_ping(self, message: Message) -> None:
        nonce = message["nonce"]  # type: ignore[typeddict-item]
        self.channel.send(
            {"op": "pong", "nonce": nonce, "memory": engines.memory_stats(self.device)}
        )

    def handle_generate(self, message: Generate) -> None:
        """Denoise the batch here, with every interactive batch that arrives meanwhile joining
        it at a step (`BatchRun`); each batch goes to a finisher thread to decode and answer as
        soon as its tokens exist.

        The frame loop is free again as soon as the tokens exist, so the next batch (already
        waiting in the pipe) denoises on the GPU while this one decodes and its audio is sent.
        Every answer of a batch (errors, results, `done`) goes through its finisher, in order:
        interactive batches through one of their own, so they never wait for a bulk decode.
        """
        assert self.engine is not None
        run = BatchRun(self, self.engine.stepper(self.args.step_tokens))
        run.add(message, Tier(message["tier"]), waited_s=self.waited_s)
        run.run()

    def engine_stats(self) -> dict[str, float]:
        """The runtime's forward-pass counters (passes, tokens, useful FLOPs, graph hits and
        misses), so that each batch reports its own and the supervisor can add them up."""
        stats = self.engine.stats() if self.engine is not None else {}
        return {k: float(v) for k, v in stats.items() if k != "capture_s"}

    def batch_denoised(self, batch: RunningBatch, groups: list[DenoisedGroup]) -> None:
        """Hand a batch whose tokens exist to its finisher (and the watcher, for `denoised`)."""
        # Host wall times: `denoise_s` here, `decode_s` in the finisher. Against the device time
        # of the forward passes they say where a batch's time went (docs/PERFORMANCE.md).
        stats: dict[str, float] = {
            "items": batch.num_items,
            "steps": batch.steps,
            "denoise_s": time.monotonic() - batch.started,
            # The frame loop waiting for this batch to arrive (no work queued behind the last
            # one). The device may still have been finishing the last batch meanwhile: its
            # idle time between batches is the runtime's `gap_s`.
            "wait_s": batch.waited_s,
        }
        stats.update({f"runtime_{k}": v for k, v in batch.counters.items()})
        said = self.watchers[batch.tier].submit(self.say_denoised, batch.id, groups, batch.tier)
        self.finish(self.answer_batch, batch, groups, stats, said, tier=batch.tier)

    def say_denoised(self, batch: int, groups: list[DenoisedGroup], tier: Tier) -> None:
        """In the watcher thread of the batch's tier: `denoised` once the device has made the
        batch's tokens; the supervisor may then send a batch more (its finisher's `done` waits
        for this)."""
        assert self.engine is not None
        self.hooks.on_denoised([f for group in groups for e in group.entries for f in e.faults])
        self.engine.wait_denoised([p for group in groups for p in group.pending])
        self.channel.send({"op": "denoised", "batch": batch}, bulk_answer=tier is Tier.BULK)

    def finish(self, fn: Callable[..., None], *args: object, tier: Tier = Tier.BULK) -> None:
        """Run fn in the finisher thread of the batch's tier. An exception there is a bug that
        would leave a batch unanswered, so the process exits and the pool replaces it
        (re-queueing the batch)."""

        def guarded() -> None:
            try:
                fn(*args)
            except BaseException as exc:
                code = (
                    ExitCode.DEVICE_FATAL
                    if isinstance(exc, Exception) and engines.is_device_fatal(exc)
                    else ExitCode.INTERNAL
                )
                log.critical(
                    "finishing a batch failed; exiting:\n%s",
                    "".join(traceback.format_exception(exc)).rstrip(),
                )
                os._exit(code)

        self.finishers[tier].submit(guarded)

    def drain(self) -> None:
        """Wait until every batch handed to the finishers has been answered."""
        for pool in [*self.finishers.values(), *self.watchers.values()]:
            pool.submit(lambda: None).result()
        self.channel.flush()

    def handle_encode_voice(self, message: EncodeVoice) -> None:
        self.drain()  # answers stay in batch order; encodes are rare, so no overlap is lost
        batch, item_id = message["batch"], message["id"]
        assert self.engine is not None
        try:
            audio, sample_rate = decode_reference(message)
            prompt = self.engine.encode_voice(
                audio, sample_rate, message["ref_text"], message["preprocess"]
            )
        except Exception as exc:
            self.send_errors(batch, self.item_errors([item_id], exc))
        else:
            voice: VoicePayload = {
                "tokens": tokens_to_wire(prompt.tokens),
                "ref_text": prompt.ref_text,
                "ref_rms": prompt.ref_rms,
            }
            self.channel.send({"op": "encoded", "batch": batch, "id": item_id, "voice": voice})
        self.channel.send({"op": "done", "batch": batch, "stats": {"items": 1}})

    # ------------------------------------------------------------ generation

    def to_entry(self, item: Item) -> BatchEntry:
        text, faults = self.hooks.item(item["text"])
        options = {key: item[key] for key in ITEM_OPTIONS if key in item}  # type: ignore[literal-required]
        options["text"] = text
        voice = item.get("voice")
        if voice is not None:
            options["voice"] = VoicePrompt(
                tokens=tokens_from_wire(voice["tokens"]),
                ref_text=voice["ref_text"],
                ref_rms=voice["ref_rms"],
            )
        return BatchEntry(item["id"], GenerationRequest(**options), faults, item.get("attempt", 1))

    def answer_batch(
        self,
        batch: RunningBatch,
        groups: list[DenoisedGroup],
        stats: dict[str, float],
        said: Future[None],
    ) -> None:
        """In a finisher thread: decode each group, send every answer, then `done` (after
        the watcher's `denoised`, which `said` waits for).

        `decode_s` is the finisher's whole time on the batch; of it, the engine reports its codec
        and post-processing (`codec_s`, `postprocess_s`) and `send_s` is the checks, encoding
        and writing of the results. Under load they say what keeps the finisher busy."""
        assert self.engine is not None
        decode_started = time.monotonic()
        stats.update(codec_s=0.0, postprocess_s=0.0, send_s=0.0)
        later = batch.tier is Tier.BULK  # its frames wait while others are queued
        self.send_errors(batch.id, batch.failed, later)
        for group in groups:
            self.decode_group(batch.id, group, batch.encoding, stats, batch.tier)
        # The batch's device times, now that its audio is decoded (the device is past its
        # steps): the frame loop did not wait for them, so the next batch started sooner.
        for key, seconds in self.engine.device_times().items():
            stats[f"runtime_{key}"] = seconds
        stats["decode_s"] = time.monotonic() - decode_started
        stats["wall_s"] = time.monotonic() - batch.started
        stats.update(engines.memory_stats(self.device))
        said.result()  # raises what the watcher met (a device error: the process then exits)
        self.channel.send({"op": "done", "batch": batch.id, "stats": stats}, later)

    def decode_group(
        self,
        batch: int,
        group: DenoisedGroup,
        encoding: Encoding,
        timings: dict[str, float],
        tier: Tier = Tier.BULK,
    ) -> None:
        """Decode a group's items together; if that fails, each alone, so one item fails only itself."""
        assert self.engine is not None
        try:
            self.hooks.on_decode([fault for entry in group.entries for fault in entry.faults])
            results = self.engine.decode(group.pending, timings, tier)
        except Exception as exc:
            if engines.is_device_fatal(exc):
                raise
            if len(group.entries) == 1:
                errors = self.item_errors([group.entries[0].id], exc)
                self.send_errors(batch, errors, tier is Tier.BULK)
                return
            log.warning(
                "decoding %d items of batch %d failed (%s: %s); one at a time",
                len(group.entries),
                batch,
                type(exc).__name__,
                exc,
            )
            for entry, pending in zip(group.entries, group.pending):
                alone = DenoisedGroup([entry], [pending], group.started)
                self.decode_group(batch, alone, encoding, timings, tier)
            return
        sending = time.monotonic()
        wall = sending - group.started
        for entry, result in zip(group.entries, results):
            self.send_result(batch, entry, result, encoding, wall, tier)
        timings["send_s"] = timings.get("send_s", 0.0) + time.monotonic() - sending

    def item_errors(self, item_ids: list[str], exc: BaseException) -> list[ItemError]:
        if isinstance(exc, InvalidInput):
            kind = ErrorKind.INVALID_INPUT
        elif engines.is_out_of_memory(exc):
            kind = ErrorKind.OUT_OF_MEMORY
        else:
            kind = ErrorKind.INTERNAL
            log.error(
                "item %s failed:\n%s", item_ids, "".join(traceback.format_exception(exc)).rstrip()
            )
        text = f"{type(exc).__name__}: {exc}" if kind is not ErrorKind.INVALID_INPUT else str(exc)
        return [(item_id, kind, text) for item_id in item_ids]

    def send_errors(self, batch: int, errors: list[ItemError], bulk_answer: bool = False) -> None:
        for item_id, kind, text in errors:
            self.send_error(batch, item_id, kind, text, bulk_answer)

    def send_result(
        self,
        batch: int,
        entry: BatchEntry,
        result: GenerationResult,
        encoding: Encoding,
        wall: float,
        tier: Tier = Tier.BULK,
    ) -> None:
        audio = self.hooks.on_output(entry.faults, result.audio, result.sample_rate, entry.attempt)
        checks = self.args.qa_thresholds if self.args.engine != "null" else None
        message = result_message(batch, entry, result, audio, encoding, wall, checks)
        try:
            frame = encode_frame(message, self.channel.max_frame_bytes)
        except ProtocolError as exc:
            self.send_error(
                batch,
                entry.id,
                ErrorKind.TOO_LARGE,
                f"the audio does not fit in one frame: {exc}",
                tier is Tier.BULK,
            )
            return
        self.channel.write_raw(frame, tier is Tier.BULK)

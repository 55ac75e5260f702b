"""Continuous batching: requests join a running batch between two denoising steps, and are done
as soon as their own last step is.

Every chunk of every request is a *member* with its own step and token state. Each `step` runs
one forward pass over the members chosen for it, then reveals each one's positions for its own
step. Which members run is the priority rule: while an interactive request has members, every
one of them runs, and bulk members (oldest first) fill what is left of `step_tokens`; the other
bulk members wait at their step, their tokens kept on the device. Without interactive members
every member runs (`sidecar.runtime.priority`). When the members change, the batch's device
state is built again from each member's step and tokens (`BatchState`'s `start`); a member that
is done rides along, revealing nothing, until they change for another reason. A member's tokens
are the same whatever it ran beside and at whatever step it joined: nothing a member computes
depends on the others.

On a GPU the host queues each step without waiting for the device. A request that joins between
two steps starts after the steps already queued, and the host (about a millisecond a step) would
run ahead of the device (several a pass) until the device's launch queue is full, tens of steps.
So while an interactive member runs, the host queues at most `queued_steps` steps ahead
(`INTERACTIVE_QUEUED_STEPS` where the runtime steps interactive work in the bulk batch): it
waits for the device's event of the oldest beyond them. Steps of bulk members alone stay
unbounded: there the run-ahead hides the host's preparation of the next batch.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

import torch

from sidecar.runtime.generate import BatchState, Prompt, useful_flops
from sidecar.runtime.model import OmniVoiceModel
from sidecar.runtime.priority import choose
from sidecar.runtime.prompting import PreparedRequest, Prompter
from sidecar.runtime.request import GenerationRequest
from sidecar.runtime.runner import ModelRunner
from sidecar.shared.errors import InvalidInput
from sidecar.shared.tiers import Tier

StepCallback = Callable[[int, int], None]  # (steps run so far, steps in all)
# Two: the device runs one step while the next waits queued, so the host's work for the step
# after (a new batch state when the members change, a few milliseconds) seldom leaves it idle,
# and a joining request waits for those two (bench/join_host.py measures both).
INTERACTIVE_QUEUED_STEPS = 2


@dataclass
class Denoised:
    """One request's generated tokens (one [C, T] tensor per chunk), waiting to be decoded."""

    item: PreparedRequest
    tokens: list[torch.Tensor]
    ready: torch.cuda.Event | None = None  # on a GPU: recorded after the tokens' last step


@dataclass(eq=False)
class _Group:
    """The requests added together (one `add`): they are done, and decoded, together."""

    key: Hashable
    items: list[PreparedRequest]
    texts: list[list[str]]  # each request's chunk texts
    tier: Tier
    on_step: StepCallback | None
    finished: dict[tuple[int, int], torch.Tensor] = field(default_factory=dict)
    steps: int = 0

    @property
    def num_chunks(self) -> int:
        return sum(len(chunks) for chunks in self.texts)

    @property
    def num_steps(self) -> int:
        """Steps to run in all: a second round for chunks that wait for their chunk 0."""
        rounds = 2 if any(it.is_long and it.ref_tokens is None for it in self.items) else 1
        return rounds * max((it.request.num_step for it in self.items), default=0)

    def result(self, ready: torch.cuda.Event | None) -> list[Denoised]:
        return [
            Denoised(item, [self.finished[i, ci] for ci in range(len(chunks))], ready)
            for i, (item, chunks) in enumerate(zip(self.items, self.texts))
        ]


@dataclass(eq=False)
class _Member:
    group: _Group
    item: int
    chunk: int
    prompt: Prompt
    step: int = 0
    tokens: torch.Tensor | None = None  # its target after `step` steps (None: all MASK)

    @property
    def cost(self) -> int:
        """Tokens it adds to a forward pass: its conditional row and its target's row."""
        return int(self.prompt.input_ids.shape[1]) + self.prompt.target_len

    @property
    def done(self) -> bool:
        return self.step >= self.prompt.num_step

    @property
    def tier(self) -> Tier:
        return self.group.tier


class Stepper:
    """The running batch of one device: `add` requests, then `step` until not `busy`."""

    def __init__(
        self,
        prompter: Prompter,
        model: OmniVoiceModel,
        runner: ModelRunner,
        step_tokens: int,
        max_members: int,
        queued_steps: int = 0,
    ) -> None:
        """`queued_steps`: while an interactive member runs, the most steps the host queues
        ahead of the device (0: no bound; see the module's docstring)."""
        self.prompter, self.model, self.runner = prompter, model, runner
        self.step_tokens = step_tokens
        self.max_members = max_members
        # A step beside an interactive member stays within the largest CUDA graph.
        self.max_tokens = max(runner.bucket_sizes) if runner.use_graphs else 1 << 62
        self.groups: list[_Group] = []
        self.members: list[_Member] = []
        self.running: list[_Member] = []  # the members `state` holds, in its order
        self.state: BatchState | None = None
        self.iteration = 0  # of `state`
        self.builds = 0  # device states built: how often the members changed
        self.queued_steps = queued_steps
        # The device's events after the steps queued with an interactive member (a GPU's only).
        on_gpu = model.codebook_layer_offsets.device.type == "cuda"
        self.new_event: Callable[[], torch.cuda.Event] | None = torch.cuda.Event if on_gpu else None
        self.queued: deque[torch.cuda.Event] = deque()

    @property
    def busy(self) -> bool:
        return bool(self.groups)

    @property
    def holds_bulk(self) -> bool:
        """A group of the bulk tier is not yet done."""
        return any(group.tier is Tier.BULK for group in self.groups)

    def add(
        self,
        key: Hashable,
        requests: Sequence[GenerationRequest],
        tier: Tier = Tier.BULK,
        on_step: StepCallback | None = None,
    ) -> list[Exception | None]:
        """Add requests as one group; they join at the next step. Returns, for each request,
        why it was refused (`Prompter.prepare`'s InvalidInput), or None; a refused request is
        left out of the group (and out of its `Denoised` list)."""
        items: list[PreparedRequest] = []
        refused: list[Exception | None] = []
        for request in requests:
            try:
                items.append(self.prompter.prepare(request))
                refused.append(None)
            except (InvalidInput, TypeError, ValueError) as exc:  # what a request may hold
                refused.append(exc)
        if not items:
            return refused
        group = _Group(key, items, [self.prompter.chunk_texts(it) for it in items], tier, on_step)
        self.groups.append(group)
        for i, chunks in enumerate(group.texts):
            for ci in range(len(chunks)):
                if not group.items[i].waits_for_chunk0(ci):
                    self._join(group, i, ci, None)
        return refused

    def abandon(self) -> list[Hashable]:
        """Drop every group (after a failed step): their keys, oldest first."""
        keys = [group.key for group in self.groups]
        self.groups, self.members, self.running, self.state = [], [], [], None
        self.queued.clear()
        self.runner.end_batch()
        return keys

    def _join(self, group: _Group, i: int, ci: int, chunk0: torch.Tensor | None) -> None:
        prompt = self.prompter.chunk_prompt(group.items[i], group.texts[i], ci, chunk0)
        self.members.append(_Member(group, i, ci, prompt))

    @torch.inference_mode()
    def step(self) -> list[tuple[Hashable, list[Denoised]]]:
        """Run one denoising step of the chosen members; returns the groups it finished.
        (In inference mode: the runner's CUDA graphs' inputs are inference tensors.)"""
        chosen = self._choose()
        if not self._runs(chosen):
            self._build(chosen)
        state = self.state
        assert state is not None
        if max(state.k[self.iteration]) > 0:  # a step that reveals nothing changes nothing
            tokens, confidence = state.choose(state.logits(), self.iteration)
            state.reveal(tokens, confidence, self.iteration)
            self.runner.stats.useful_flops += useful_flops(
                self.model.cfg, state.packed.segment_lens, state.packed.num_targets
            )
        self.iteration += 1
        stepped = [m for m in self.running if not m.done]  # riders (done before) do not count
        for member in stepped:
            member.step += 1
        for group in dict.fromkeys(m.group for m in stepped):
            group.steps += 1
            if group.on_step is not None:
                group.on_step(group.steps, group.num_steps)
        if any(m.tier is Tier.INTERACTIVE for m in stepped):
            self._pace()
        return self._collect(stepped)

    def _pace(self) -> None:
        """Note the step just queued; wait until at most `queued_steps` are queued."""
        if not self.queued_steps or self.new_event is None:
            return
        event = self.new_event()
        event.record()
        self.queued.append(event)
        began = time.perf_counter()
        while len(self.queued) > self.queued_steps:
            self.queued.popleft().synchronize()  # lets the interpreter's lock go meanwhile
        self.runner.stats.paced_s += time.perf_counter() - began

    def _runs(self, chosen: list[_Member]) -> bool:
        """Whether the batch state built last runs `chosen`: the same members, or the same but
        for some that are done. A done member rides along until the members change otherwise,
        revealing nothing (its schedule has ended): a step costs it its tokens' share of a
        pass, far less than building the state again, which leaves the device idle while the
        host prepares it. Each leave of a request would otherwise cost one."""
        left = [m for m in self.running if not m.done]
        return [id(m) for m in chosen] == [id(m) for m in left]

    def _choose(self) -> list[_Member]:
        """The members the next step runs (`sidecar.runtime.priority`)."""
        return choose(self.members, self.step_tokens, self.max_members, self.max_tokens)

    def _build(self, chosen: list[_Member]) -> None:
        """Take each running member's tokens out of the old state; build one for `chosen`."""
        began = time.perf_counter()
        self._release()
        start = [(m.step, m.tokens) for m in chosen]
        self.state = BatchState(self.model, [m.prompt for m in chosen], self.runner, start)
        self.running, self.iteration = chosen, 0
        self.builds += 1
        self.runner.stats.build_s += time.perf_counter() - began

    def _release(self) -> None:
        if self.state is not None:
            for index, member in enumerate(self.running):
                member.tokens = self.state.item_tokens(index)
            self.runner.end_batch()
        self.state, self.running = None, []

    def _collect(self, stepped: list[_Member]) -> list[tuple[Hashable, list[Denoised]]]:
        """Take the members this step finished out; their groups' waiting chunks join; return
        finished groups."""
        assert self.state is not None
        finished = [m for m in stepped if m.done]
        for member in finished:
            member.tokens = self.state.item_tokens(self.running.index(member))
            member.group.finished[member.item, member.chunk] = member.tokens
            self.members.remove(member)
        for member in [m for m in finished if m.chunk == 0]:
            group, i = member.group, member.item
            for ci in range(1, len(group.texts[i])):
                if group.items[i].waits_for_chunk0(ci):
                    self._join(group, i, ci, member.tokens)
        done = [g for g in self.groups if len(g.finished) == g.num_chunks]
        if not self.members:
            self._release()
        if not done:
            return []
        ready = None
        if self.model.codebook_layer_offsets.device.type == "cuda":
            ready = torch.cuda.Event()
            ready.record()  # on the denoising stream, after the last step of their tokens
        for group in done:
            self.groups.remove(group)
        return [(group.key, group.result(ready)) for group in done]


def run_to_end(stepper: Stepper) -> list[tuple[Hashable, list[Denoised]]]:
    """Step until every group is done; the groups in the order they finished."""
    finished: list[tuple[Hashable, list[Denoised]]] = []
    while stepper.busy:
        finished += stepper.step()
    return finished

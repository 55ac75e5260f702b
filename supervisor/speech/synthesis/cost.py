"""What a speech request costs, counted on what the model will read and the answer will hold.

A request's `input` is first read as the model will read it (`synthesis.script.read`: SSML, a
dialogue script, the lexicon, normalisation), and the limits apply to that, never only to what
the client sent:

    input_too_long   the text the model reads is over EXPANSION × --max-input-chars characters
                     (a lexicon, <say-as>, <sub> or the normaliser may lengthen a text; four
                     times is room for any honest use, and a bound on what chunking and the
                     model are handed)
    audio_too_long   the estimated audio, every pause counted (SSML breaks, dialogue pauses,
                     the silence before the first word, the 0.2 s of padding around each chunk), is over --max-request-audio-s (600 s),
                     or over the whole queue's admission limit (--max-queue-audio-s per usable
                     sidecar): such a request is refused, never admitted whole

Speeds are clamped where they are multiplied (`spans.clamp_speed`), so no nesting of rates
makes one word last minutes. The estimate is the reference duration rule, the same the sidecar
generates by, so a chunk's audio is its estimate and its padding; the silence is exactly what
was asked for. (A `chunk_mode: "none"` text that the runtime splits itself gains 0.1 s of
silence at each of its own joins, one per 30 s at most: uncounted, 2 s in 600.)

The bound on memory: an answer held whole in the supervisor (a whole file, a loudness-adjusted
one, a result being cached) is at most `answer_bytes(--max-request-audio-s + CHUNK_PAD_S)`:
600.2 s at the highest `sample_rate` (48 kHz) in 16-bit samples, 57.6 MB; libav works on it in
slices (`formats.slices`), so the supervisor's peak is a few copies of that (RELIABILITY.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from sidecar.shared.duration import FRAME_RATE, target_tokens
from supervisor.errors import InvalidRequest
from supervisor.settings import SpeechSettings
from supervisor.speech.audio import delivery
from supervisor.speech.request.schemas import SpeechRequest
from supervisor.speech.text.spans import Script, clamp_speed

EXPANSION = 4  # the text the model reads may be this many times --max-input-chars
BYTES_PER_SAMPLE = 2  # 16-bit samples, before any compression
CHUNK_PAD_S = 0.2  # the sidecar pads each chunk with 0.1 s of zeros at both ends (fade_and_pad)
MODEL_RATE = 24_000  # Hz: the audio the sidecar returns


@dataclass(frozen=True)
class Cost:
    """A request's size as the server will make it."""

    chars: int  # of the text the model reads
    chunks: int  # tasks it becomes
    speech_s: float  # estimated audio the model makes
    silence_s: float  # stitched in: breaks, dialogue pauses, the lead

    @property
    def padding_s(self) -> float:
        """The zeros the sidecar puts around each chunk."""
        return CHUNK_PAD_S * self.chunks

    @property
    def audio_s(self) -> float:
        return self.speech_s + self.silence_s + self.padding_s


def silence_s(script: Script) -> float:
    """The silence a script asks for, in seconds."""
    return script.lead_s + sum(span.pause_s for span in script.spans)


def chars(script: Script) -> int:
    return sum(len(span.text) for span in script.spans)


def span_speed(request: SpeechRequest, span_speed: float) -> float:
    """The speed a span is read at: the request's times the span's, within the model's range."""
    return clamp_speed(request.speed * span_speed)


def check_text(script: Script, settings: SpeechSettings) -> None:
    """A 400 (input_too_long) if the text the model reads is too long."""
    limit = EXPANSION * settings.max_input_chars
    read = chars(script)
    if read > limit:
        error = InvalidRequest(
            f"'input' becomes {read} characters once read as the model reads it (SSML, lexicon, "
            f"normalisation, dialogue); the limit is {limit} ({EXPANSION} × --max-input-chars). "
            "Send a shorter text, or split it into several requests (a job takes many).",
            param="input",
        )
        error.code = "input_too_long"
        raise error


def estimate(script: Script, request: SpeechRequest) -> Cost:
    """The cost of a script read whole span by span, without a voice prompt: what a job item
    is checked against when it is submitted (when it runs, its chunks are checked again)."""
    if request.duration is not None:
        speech = float(request.duration)
    else:
        frames = sum(
            target_tokens(span.text, speed=span_speed(request, span.speed)) for span in script.spans
        )
        speech = frames / FRAME_RATE
    return Cost(chars(script), len(script.spans), speech, silence_s(script))


def check(cost: Cost, settings: SpeechSettings, capacity: int = 1) -> None:
    """A 400 (audio_too_long) if the request would make more audio than one request may, or more
    than the whole queue admits: it could never be admitted, so it is not admitted whole."""
    own = settings.max_request_audio_s
    queue = settings.max_queue_audio_s * max(1, capacity)
    # One chunk's padding is allowed over: `duration` 600 (its largest) is one chunk of 600 s.
    if cost.audio_s <= min(own, queue) + CHUNK_PAD_S:
        return
    which = (
        f"--max-request-audio-s ({own:g} s)"
        if own <= queue
        else f"the queue's whole admission limit ({queue:g} s)"
    )
    error = InvalidRequest(
        f"this request would make about {cost.audio_s:.0f} s of audio ({cost.speech_s:.0f} s "
        f"spoken, {cost.silence_s:.0f} s of pauses, in {cost.chunks} chunks); the limit is "
        f"{which}. Send less text, fewer or shorter pauses, or a faster speed.",
        param="input",
    )
    error.code = "audio_too_long"
    raise error


def answer_bytes(audio_s: float) -> int:
    """The most an answer of audio_s seconds takes uncompressed, at the highest sample rate."""
    return int(audio_s * delivery.SAMPLE_RATES[1] * BYTES_PER_SAMPLE)

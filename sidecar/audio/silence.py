"""Silence removal and long-reference trimming as the reference does them: pydub's 16-bit
arithmetic, emulated in numpy."""

from __future__ import annotations

import itertools
import math

import numpy as np

SILENCE_THRESH_DBFS = -50.0
_MAX_AMPLITUDE = 32768.0  # pydub's max_possible_amplitude for 16-bit samples


# ---------------------------------------------------------------------------------------------
# 16-bit silence detection, emulating pydub (AudioSegment slicing, audioop.rms, pydub.silence).
# The reference runs silence handling through pydub, so the cut points depend on its exact
# millisecond arithmetic; every rounding below mirrors a specific line of it.
# ---------------------------------------------------------------------------------------------


def _to_int16(audio: np.ndarray) -> np.ndarray:
    """Float -> 16-bit as the reference does it: scale, clip, then truncate toward zero."""
    scaled = np.asarray(audio, dtype=np.float32) * np.float32(_MAX_AMPLITUDE)
    return scaled.clip(-32768, 32767).astype(np.int16)


def _from_int16(samples: np.ndarray) -> np.ndarray:
    return samples.astype(np.float32) / np.float32(_MAX_AMPLITUDE)


class _Pcm:
    """Mono 16-bit samples with pydub's millisecond view of them."""

    def __init__(self, samples: np.ndarray, rate: int) -> None:
        self.samples = samples
        self.rate = rate
        # Prefix sums of the squared samples, as far as an rms() call has needed them.
        self._cumsq = np.zeros(1, np.int64)

    def __len__(self) -> int:
        # pydub: round(1000 * frames / rate) -- Python's round, so ties go to even.
        return round(1000 * (float(len(self.samples)) / self.rate))

    def _frame(self, ms: float) -> int:
        if ms < 0:
            ms = len(self) - abs(ms)
        return int(ms * (self.rate / 1000.0))

    def _bounds(self, start_ms: float, end_ms: float) -> tuple[int, int, int]:
        """(first frame, last frame + 1 of real data, length after pydub's zero fill)."""
        length_ms = len(self)
        s = self._frame(min(start_ms, length_ms))
        e = self._frame(min(end_ms, length_ms))
        n = len(self.samples)
        real_end = max(s, min(e, n))
        # Because len() is rounded, a slice up to len() may ask for a few frames past the end;
        # pydub fills those with zeros -- but only when the slice holds at least one real frame.
        return s, real_end, (e - s if real_end > s else 0)

    def slice(self, start_ms: float, end_ms: float | None = None) -> _Pcm:
        s, real_end, total = self._bounds(start_ms, len(self) if end_ms is None else end_ms)
        data = self.samples[s:real_end]
        if total > len(data):
            data = np.concatenate([data, np.zeros(total - len(data), np.int16)])
        return _Pcm(data, self.rate)

    def rms(self, start_ms: int, end_ms: int) -> int:
        """audioop.rms of self[start_ms:end_ms]: integer part of sqrt(mean square)."""
        s, real_end, total = self._bounds(start_ms, end_ms)
        if total == 0:
            return 0
        cumsq = self._squares_upto(real_end)
        ssq = float(cumsq[real_end] - cumsq[s])
        return int(math.sqrt(ssq / float(total)))

    def _squares_upto(self, end: int) -> np.ndarray:
        """Prefix sums of the squared samples through sample `end` (at least), extended by
        doubling: finding an edge's silence reads only the clip's first chunks.

        In int64 they are exact, and equal to audioop's double accumulation for any window
        under ~2^23 samples (every window used here is)."""
        have = len(self._cumsq) - 1
        if end > have:
            upto = min(len(self.samples), max(end, 2 * have))
            sq = self.samples[have:upto].astype(np.int64)
            np.multiply(sq, sq, out=sq)
            cumsq = np.empty(upto + 1, np.int64)
            cumsq[: have + 1] = self._cumsq
            np.cumsum(sq, out=cumsq[have + 1 :])
            cumsq[have + 1 :] += self._cumsq[-1]
            self._cumsq = cumsq
        return self._cumsq

    def window_rms(self, starts_ms: np.ndarray, width_ms: int) -> np.ndarray:
        """`rms(s, s + width_ms)` for many window starts at once, with the same arithmetic."""
        length_ms = len(self)
        ratio = self.rate / 1000.0
        # int(min(ms, length) * ratio), as _frame does, for whole-millisecond starts.
        s = np.trunc(np.minimum(starts_ms, length_ms) * ratio).astype(np.int64)
        e = np.trunc(np.minimum(starts_ms + width_ms, length_ms) * ratio).astype(np.int64)
        real_end = np.maximum(s, np.minimum(e, len(self.samples)))
        total = np.where(real_end > s, e - s, 0)
        cumsq = self._squares_upto(int(real_end.max(initial=0)))
        ssq = (cumsq[real_end] - cumsq[s]).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            rms = np.floor(np.sqrt(ssq / total.astype(np.float64)))
        return np.where(total > 0, rms, 0).astype(np.int64)

    def reversed(self) -> _Pcm:
        return _Pcm(self.samples[::-1].copy(), self.rate)


def _dbfs(rms: int) -> float:
    # pydub's ratio_to_db uses math.log(x, 10), not log10; keep it for identical comparisons.
    return -math.inf if rms == 0 else 20 * math.log(rms / _MAX_AMPLITUDE, 10)


def _detect_silence(
    pcm: _Pcm, min_silence_ms: int, thresh_dbfs: float, seek_ms: int
) -> list[list[int]]:
    """pydub.silence.detect_silence: silent [start, end] ranges in ms."""
    seg_len = len(pcm)
    if seg_len < min_silence_ms:
        return []
    thresh = 10 ** (float(thresh_dbfs) / 20) * _MAX_AMPLITUDE
    last_start = seg_len - min_silence_ms
    starts = list(range(0, last_start + 1, seek_ms))
    if last_start % seek_ms:
        starts.append(last_start)  # pydub makes sure the tail is examined too
    silent_starts = [
        int(i)
        for i in np.asarray(starts)[pcm.window_rms(np.asarray(starts), min_silence_ms) <= thresh]
    ]
    if not silent_starts:
        return []

    ranges: list[list[int]] = []
    prev = silent_starts[0]
    range_start = prev
    for i in silent_starts[1:]:
        continuous = i == prev + seek_ms
        has_gap = i > prev + min_silence_ms
        if not continuous and has_gap:
            ranges.append([range_start, prev + min_silence_ms])
            range_start = i
        prev = i
    ranges.append([range_start, prev + min_silence_ms])
    return ranges


def _detect_nonsilent(
    pcm: _Pcm, min_silence_ms: int, thresh_dbfs: float, seek_ms: int
) -> list[list[int]]:
    """pydub.silence.detect_nonsilent: non-silent [start, end] ranges in ms."""
    silent = _detect_silence(pcm, min_silence_ms, thresh_dbfs, seek_ms)
    seg_len = len(pcm)
    if not silent:
        return [[0, seg_len]]
    if silent[0][0] == 0 and silent[0][1] == seg_len:
        return []
    ranges: list[list[int]] = []
    prev_end = 0
    for start, end in silent:
        ranges.append([prev_end, start])
        prev_end = end
    if silent[-1][1] != seg_len:
        ranges.append([prev_end, seg_len])
    if ranges[0] == [0, 0]:
        ranges.pop(0)
    return ranges


def _split_on_silence(
    pcm: _Pcm, min_silence_ms: int, thresh_dbfs: float, keep_ms: int, seek_ms: int
) -> list[_Pcm]:
    """pydub.silence.split_on_silence: non-silent pieces, each padded by keep_ms of context."""
    ranges = [
        [s - keep_ms, e + keep_ms]
        for s, e in _detect_nonsilent(pcm, min_silence_ms, thresh_dbfs, seek_ms)
    ]
    for a, b in itertools.pairwise(ranges):
        if b[0] < a[1]:  # the padded ranges overlap: split the shared stretch at its midpoint
            a[1] = (a[1] + b[0]) // 2
            b[0] = a[1]
    seg_len = len(pcm)
    return [pcm.slice(max(s, 0), min(e, seg_len)) for s, e in ranges]


def _quiet_rms(thresh_dbfs: float) -> int:
    """The largest integer rms whose `_dbfs` is below thresh_dbfs: comparing rms values with it
    is the same test as comparing their dBFS, one value at a time, with thresh_dbfs."""
    rms = int(10 ** (thresh_dbfs / 20) * _MAX_AMPLITUDE) + 1
    while rms > 0 and _dbfs(rms) >= thresh_dbfs:
        rms -= 1
    while _dbfs(rms + 1) < thresh_dbfs:
        rms += 1
    return rms


def _leading_silence_ms(pcm: _Pcm, thresh_dbfs: float, chunk_ms: int = 10) -> int:
    """pydub.silence.detect_leading_silence: ms of leading chunks quieter than thresh_dbfs.

    pydub measures one chunk at a time; here blocks of chunks at once, doubling, so a clip that
    starts with sound reads only its first block."""
    seg_len = len(pcm)
    quiet = _quiet_rms(thresh_dbfs)
    trim, block = 0, 32
    while trim < seg_len:
        starts = np.arange(trim, min(seg_len, trim + block * chunk_ms), chunk_ms)
        loud = np.flatnonzero(pcm.window_rms(starts, chunk_ms) > quiet)
        if loud.size:
            return int(starts[loud[0]])
        trim, block = int(starts[-1]) + chunk_ms, 2 * block
    return min(trim, seg_len)


def _trim_edges(pcm: _Pcm, lead_ms: int, trail_ms: int, thresh_dbfs: float) -> _Pcm:
    """Cut leading/trailing silence, keeping lead_ms / trail_ms of it (reference remove_silence_edges)."""
    start = max(0, _leading_silence_ms(pcm, thresh_dbfs) - lead_ms)
    pcm = pcm.slice(start).reversed()
    start = max(0, _leading_silence_ms(pcm, thresh_dbfs) - trail_ms)
    return pcm.slice(start).reversed()


# ---------------------------------------------------------------------------------------------
# Public operations (1-D float32 arrays)
# ---------------------------------------------------------------------------------------------


def remove_silence(
    audio: np.ndarray, sample_rate: int, mid_sil_ms: int, lead_sil_ms: int, trail_sil_ms: int
) -> np.ndarray:
    """Shorten internal silences and trim the edges, on 16-bit samples as the reference does.

    Internal silences (-50 dBFS, 10 ms steps) longer than mid_sil_ms keep mid_sil_ms of context on
    each side of the sound around them (mid_sil_ms = 0 skips this); lead/trail_sil_ms of the edge
    silence stay. The result is quantised to 16 bits; an all-silent input gives an empty array.
    (pydub would also resample rates below 11025 Hz when joining pieces; not reproduced.)
    """
    pcm = _Pcm(_to_int16(np.ravel(audio)), sample_rate)
    if mid_sil_ms > 0:
        pieces = _split_on_silence(pcm, mid_sil_ms, SILENCE_THRESH_DBFS, mid_sil_ms, seek_ms=10)
        joined = np.concatenate([p.samples for p in pieces]) if pieces else np.zeros(0, np.int16)
        pcm = _Pcm(joined, sample_rate)
    pcm = _trim_edges(pcm, lead_sil_ms, trail_sil_ms, SILENCE_THRESH_DBFS)
    return _from_int16(pcm.samples)


def trim_long_audio(
    audio: np.ndarray,
    sample_rate: int,
    max_duration_s: float = 15.0,
    min_duration_s: float = 3.0,
    trim_threshold_s: float = 20.0,
) -> np.ndarray:
    """Cut a clip longer than trim_threshold_s at a pause, to at most max_duration_s.

    The cut goes at the latest start of a sound (-40 dBFS, 100 ms silences) that is <= max;
    if that is under min_duration_s, at min(max, length). A trimmed clip comes back 16-bit
    quantised (it went through the same 16-bit path as the reference); others are untouched.
    """
    audio = np.ravel(audio)
    if audio.shape[-1] / sample_rate <= trim_threshold_s:
        return audio
    pcm = _Pcm(_to_int16(audio), sample_rate)
    nonsilent = _detect_nonsilent(pcm, min_silence_ms=100, thresh_dbfs=-40.0, seek_ms=10)
    if not nonsilent:
        return audio
    max_ms = int(max_duration_s * 1000)
    min_ms = int(min_duration_s * 1000)
    best = 0
    for start, end in nonsilent:
        if best < start <= max_ms:
            best = start
        if end > max_ms:
            break
    if best < min_ms:
        best = min(max_ms, len(pcm))
    return _from_int16(pcm.slice(0, best).samples)

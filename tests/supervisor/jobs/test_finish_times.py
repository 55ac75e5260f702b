"""supervisor/jobs/finish_times.py: the finish-time simulation behind the deadline outlook: deadline
order, `not_before`, the risk to a deadline, an item's audio estimate."""

from __future__ import annotations

import pytest

from supervisor.jobs.finish_times import PendingJob, at_risk, finishes, item_audio_s


def job(
    job_id: str,
    seq: int,
    audio_s: float,
    not_before: float | None = None,
    deadline: float | None = None,
) -> PendingJob:
    return PendingJob(job_id, seq, not_before, deadline, audio_s)


def test_jobs_finish_in_deadline_order_then_submission_order() -> None:
    jobs = [job("late", 1, 10, deadline=500), job("none", 2, 10), job("early", 3, 10, deadline=100)]
    done = finishes(jobs, now=0, rate=2.0, ahead_s=4)  # 4 s of interactive audio first: 2 s
    assert done == {"early": 7.0, "late": 12.0, "none": 17.0}


def test_a_job_waits_for_its_not_before_and_takes_over_when_its_deadline_is_earlier() -> None:
    jobs = [job("bulk", 1, 100), job("news", 2, 10, not_before=20, deadline=40)]
    done = finishes(jobs, now=0, rate=1.0)
    assert done == {"news": 30.0, "bulk": 110.0}  # bulk pauses for news from 20 to 30
    assert finishes([job("later", 1, 5, not_before=50)], now=0, rate=1.0) == {"later": 55.0}


def test_a_deadline_is_at_risk_when_the_estimate_ends_after_it_or_it_passed() -> None:
    assert at_risk(100.0, 101.0, now=0) and not at_risk(100.0, 99.0, now=0)
    assert not at_risk(100.0, None, now=50) and at_risk(100.0, None, now=150)
    assert not at_risk(None, 1e9, now=0)


def test_an_items_audio_estimate_follows_its_text_speed_and_duration() -> None:
    short, long = item_audio_s("Hello there."), item_audio_s("Hello there. " * 20)
    assert 0 < short < long
    assert item_audio_s("Hello there. " * 20, speed=2.0) == pytest.approx(long / 2, rel=0.05)
    assert item_audio_s("anything", duration=7.5) == 7.5

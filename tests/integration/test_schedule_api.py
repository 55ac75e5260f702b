"""Scheduled jobs against a live server on the tiny checkpoint: not_before, deadline order, the
deadline outlook, and signed callbacks to a real receiver on 127.0.0.1.

One server serves the module (`--max-batch-size 1`, so a job's items run one after another),
once with each job store: SQLite, then PostgreSQL (a real server, tests/helpers/pg_cluster.py). The
warm-up test starts a server of its own, with SQLite: the warm-up is the pool's and the runner's,
the store only answers `next_start`, which the schedule tests above cover on both.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import os
import re
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from supervisor.commands import install_service as service
from supervisor.commands import synth_timer
from supervisor.jobs.intake import WINDOW_BATCHES
from tests.helpers.callback_receivers import OK, Webhook, close, gzip_answer, serve, webhook
from tests.helpers.callback_receivers import Receiver as RawReceiver
from tests.helpers.job_helpers import ended, job, submit, wait_job
from tests.helpers.live_server import KEY, LiveServer, live
from tests.helpers.texts import LONG

SECRET = "whsec-test"
SENTENCE = "Please stand clear of the closing doors."


@pytest.fixture
def receiver() -> Iterator[Webhook]:
    """A receiver that answers 500 twice, then 200."""
    with webhook([500, 500]) as server:
        yield server


@pytest.fixture(scope="module")
def pinned() -> Iterator[Webhook]:
    """A receiver on 127.0.0.3 whose port alone the module's server allows."""
    with webhook(host="127.0.0.3") as server:
        yield server


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(
    request: pytest.FixtureRequest,
    checkpoint_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
    pinned: Webhook,
) -> Iterator[LiveServer]:
    """The module's server, once per job store: the tests using it run against both. No result
    cache: these jobs repeat one sentence, and items answered from the cache would finish at
    once, out of the order under test. Callbacks may go to any port of 127.0.0.1, to 127.0.0.2
    on its default ports, and to `pinned`'s port of 127.0.0.3."""
    store = (
        "sqlite"
        if request.param == "sqlite"
        else request.getfixturevalue("pg_cluster").new_database()
    )
    allow = ("127.0.0.1:*", "127.0.0.2", f"127.0.0.3:{pinned.server_address[1]}")
    flags = (
        "--max-batch-size",
        "1",
        *(f"--callback-allow={host}" for host in allow),
        "--callback-secret",
        SECRET,
        "--callback-backoff-s",
        "0.3",
        "--cache-max-bytes",
        "0",
        "--store",
        store,
    )
    with live(tmp_path_factory.mktemp("schedule"), *flags, checkpoint=checkpoint_dir) as running:
        yield running


def at(seconds_from_now: float) -> str:
    when = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=seconds_from_now)
    return when.isoformat()


def unix(rfc3339: str) -> float:
    return dt.datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def post(server: LiveServer, body: dict[str, Any]) -> Any:
    return server.request("POST", "/v1/jobs", json=body)


def items(count: int, text: str = SENTENCE) -> list[dict[str, Any]]:
    return [{"id": f"i{n}", "input": text, "response_format": "wav"} for n in range(count)]


def test_bad_schedule_fields_are_400s_naming_the_field(server: LiveServer) -> None:
    cases = [
        ({"not_before": "2026-12-01T06:00:00"}, "not_before", "invalid_request"),
        ({"deadline": "tomorrow"}, "deadline", "invalid_request"),
        ({"not_before": at(60), "deadline": at(30)}, "deadline", "invalid_request"),
        ({"callback_url": "http://10.0.0.1/hook"}, "callback_url", "callback_not_allowed"),
        ({"callback_url": "http://localhost/hook"}, "callback_url", "callback_not_allowed"),
        ({"callback_url": "file:///etc/passwd"}, "callback_url", "invalid_request"),
        ({"callback_url": "http://127.0.0.2:8080/hook"}, "callback_url", "callback_not_allowed"),
        ({"callback_url": "http://127.0.0.3:1/hook"}, "callback_url", "callback_not_allowed"),
        ({"callback_url": "http://[127.0.0.1]/hook"}, "callback_url", "invalid_request"),
        ({"callback_url": " http://127.0.0.1:9/hook"}, "callback_url", "invalid_request"),
        ({"callback_url": "http://127.0.0.1:9/a\tb"}, "callback_url", "invalid_request"),
        (
            {"callback_url": "http://127.0.0.1:9/\r\nX-Injected: 1"},
            "callback_url",
            "invalid_request",
        ),
        ({"callback_url": "http://127.0.0.1:9/\x00"}, "callback_url", "invalid_request"),
        ({"start_at": at(60)}, "start_at", "invalid_request"),
    ]
    before = len(server.request("GET", "/v1/jobs?limit=100").json()["data"])
    for fields, param, code in cases:
        reply = post(server, {"items": items(1), **fields})
        assert reply.status_code == 400, (fields, reply.text)
        error = reply.json()["error"]
        assert (error["param"], error["code"], error["type"]) == (
            param,
            code,
            "invalid_request_error",
        ), fields
    assert len(server.request("GET", "/v1/jobs?limit=100").json()["data"]) == before


def test_a_job_waits_for_not_before_then_runs(server: LiveServer) -> None:
    not_before = at(4)
    created = submit_with(server, items(2), not_before=not_before)
    assert created["not_before"] is not None
    assert unix(created["not_before"]) == pytest.approx(unix(not_before), abs=0.001)
    time.sleep(1.5)  # a window in which nothing may start it: three runner passes, 0.5 s apart
    waiting = job(server, created["id"])
    assert waiting["state"] == "queued"
    assert [item["attempts"] for item in waiting["items"]] == [0, 0]
    done = wait_job(server, created["id"], ended, 120, "the scheduled job")
    assert done["state"] == "completed"
    first_start = min(item["started_at"] for item in done["items"])
    assert first_start >= unix(not_before)


def submit_with(server: LiveServer, job_items: list[dict[str, Any]], **fields: Any) -> Any:
    reply = post(server, {"items": job_items, **fields})
    assert reply.status_code == 202, reply.text
    return reply.json()


def test_two_jobs_submitted_in_the_wrong_order_finish_in_deadline_order(
    server: LiveServer,
) -> None:
    """The early job comes while the late one runs. How much of the late one may finish first is
    what the runner had handed out when the early one came: its window. The sidecar is stopped
    (SIGSTOP, far inside the heartbeat deadline) while the early job is submitted, so no item
    finishes meanwhile and that window holds still to be counted; without the stop, an item
    finishing during the POST let the runner hand out one more, and the count raced."""
    late = submit_with(server, items(12), deadline=at(3600))
    wait_job(
        server,
        late["id"],
        lambda j: any(i["started_at"] for i in j["items"]),
        120,
        "the later job's first item to start",
    )
    (sidecar,) = [s["pid"] for s in server.health()["sidecars"] if s["pid"]]
    os.kill(sidecar, signal.SIGSTOP)
    try:
        # Stopped, the sidecar finishes nothing: the runner fills its window and hands out no more.
        wait_job(
            server,
            late["id"],
            lambda j: j["progress"]["running"] == WINDOW_BATCHES,
            30,
            "the runner's window to fill",
        )
        early = submit_with(server, items(2), deadline=at(1800))
        progress = job(server, late["id"])["progress"]
        handed_out = progress["total"] - progress["queued"]
    finally:
        os.kill(sidecar, signal.SIGCONT)
    assert handed_out < 12  # some of the late job was still queued when the early one came
    late_done = wait_job(server, late["id"], ended, 180, "the job with the later deadline")
    early_done = job(server, early["id"])
    assert early_done["state"] == "completed" and late_done["state"] == "completed"
    early_end = max(item["finished_at"] for item in early_done["items"])
    late_end = max(item["finished_at"] for item in late_done["items"])
    assert early_end < late_end
    # In arrival order, the whole late job would run first; in deadline order, its window alone.
    assert sum(item["finished_at"] < early_end for item in late_done["items"]) <= handed_out


def metric(server: LiveServer, name: str) -> float | None:
    for line in server.request("GET", "/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def test_a_deadline_that_cannot_be_met_is_reported_at_risk_before_it_passes(
    server: LiveServer,
) -> None:
    # A batch measured first, so the server has a throughput to estimate from.
    wait_job(server, submit(server, items(1))["id"], ended, 120, "a first job")
    # How long 100 long items take here: the estimate for a job held back an hour.
    start = time.time() + 3600
    probe = submit_with(server, items(100, LONG), not_before=at(3600))
    work_s = unix(probe["estimated_finish"]) - start
    assert server.request("DELETE", f"/v1/jobs/{probe['id']}").status_code == 200
    assert work_s > 2, work_s
    deadline = time.time() + work_s / 2
    created = submit_with(server, items(100, LONG), deadline=at(work_s / 2))
    answered_at = time.time()
    try:
        assert created["deadline_at_risk"] is True
        assert unix(created["estimated_finish"]) > unix(created["deadline"])
        assert answered_at < deadline  # reported before the deadline passed
        assert metric(server, "omnivoice_jobs_deadline_at_risk") >= 1
        slack = metric(server, "omnivoice_jobs_deadline_slack_seconds")
        assert slack is not None and slack < 0
        roomy = submit_with(server, items(1), deadline=at(86400))
        assert roomy["deadline_at_risk"] is False and roomy["estimated_finish"] is not None
    finally:
        server.request("DELETE", f"/v1/jobs/{created['id']}")
    roomy_done = wait_job(server, roomy["id"], ended, 120, "the job with a far deadline")
    assert roomy_done["estimated_finish"] is None and roomy_done["deadline_at_risk"] is False


def verify(headers: dict[str, str], body: bytes) -> int:
    """The receiver's check of X-OmniVoice-Signature; returns its timestamp."""
    header = {k.lower(): v for k, v in headers.items()}["x-omnivoice-signature"]
    fields = dict(part.split("=", 1) for part in header.split(","))
    expected = hmac.new(SECRET.encode(), f"{fields['t']}.".encode() + body, hashlib.sha256)
    assert hmac.compare_digest(fields["v1"], expected.hexdigest())
    return int(fields["t"])


def test_a_callback_answered_500_twice_is_delivered_once_signed(
    server: LiveServer, receiver: Webhook
) -> None:
    created = submit_with(server, items(2), callback_url=receiver.url)
    assert created["callback"] == {
        "state": "pending",
        "attempts": 0,
        "last_status": None,
        "last_error": None,
    }
    done = wait_job(
        server, created["id"], lambda j: j["callback"]["state"] != "pending", 120, "the callback"
    )
    assert done["callback"] == {
        "state": "delivered",
        "attempts": 3,
        "last_status": 200,
        "last_error": None,
    }
    time.sleep(1.5)  # three more runner passes: nothing more is sent
    assert [status for status, _, _ in receiver.got] == [500, 500, 200]
    ((headers, body),) = receiver.accepted()
    assert abs(verify(headers, body) - time.time()) < 300
    summary = json.loads(body)
    assert summary["id"] == created["id"] and summary["state"] == "completed"
    assert summary["progress"]["done"] == 2 and "items" not in summary


def test_a_cancelled_jobs_callback_says_cancelled(server: LiveServer, receiver: Webhook) -> None:
    receiver.answers.clear()
    created = submit_with(server, items(3), not_before=at(3600), callback_url=receiver.url)
    assert server.request("DELETE", f"/v1/jobs/{created['id']}").status_code == 200
    wait_job(
        server,
        created["id"],
        lambda j: j["callback"]["state"] == "delivered",
        60,
        "the callback of the cancelled job",
    )
    ((headers, body),) = receiver.accepted()
    verify(headers, body)
    assert json.loads(body)["state"] == "cancelled"


def test_a_host_on_the_allow_list_with_a_port_gets_callbacks_on_that_port_only(
    server: LiveServer, pinned: Webhook
) -> None:
    port = pinned.server_address[1]
    refused = post(server, {"items": items(1), "callback_url": f"http://127.0.0.3:{port + 1}/h"})
    assert refused.status_code == 400 and "port" in refused.json()["error"]["message"]
    created = submit_with(server, items(1), callback_url=pinned.url)
    wait_job(
        server,
        created["id"],
        lambda j: j["callback"]["state"] != "pending",
        120,
        "the callback to the allowed port",
    )
    assert job(server, created["id"])["callback"]["state"] == "delivered"
    assert any(json.loads(body)["id"] == created["id"] for _, body in pinned.accepted())


def test_a_gzip_answer_of_a_gibibyte_leaves_the_servers_memory_alone(server: LiveServer) -> None:
    """The receiver answers 200 with 1 MiB of gzip that inflates to 1 GiB: the callback is
    delivered, and the server's resident memory (psutil, sampled every 10 ms from the submission
    to the delivery) stays within 64 MiB of where it was; reading and inflating it takes 2 GiB."""
    receiver = serve(RawReceiver("127.0.0.1", gzip_answer()))
    process, peak, done = psutil.Process(server.proc.pid), [0], threading.Event()

    def sample() -> None:
        while not done.wait(0.01):
            peak[0] = max(peak[0], process.memory_info().rss)

    before = process.memory_info().rss
    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        created = submit_with(server, items(1), callback_url=receiver.url())
        finished = wait_job(
            server,
            created["id"],
            lambda j: j["callback"]["state"] != "pending",
            120,
            "the gzip-answered callback",
        )
    finally:
        done.set()
        sampler.join()
        close(receiver)
    assert finished["callback"] == {
        "state": "delivered",
        "attempts": 1,
        "last_status": 200,
        "last_error": None,
    }
    print(f"resident memory grew {(peak[0] - before) / 2**20:.1f} MiB at most")
    assert peak[0] - before < 64 * 2**20, f"grew {(peak[0] - before) / 2**20:.1f} MiB"


def test_slow_receivers_on_one_host_leave_a_healthy_hosts_callback_alone(tmp_path: Path) -> None:
    """A server of its own (the null engine: jobs end at once), 2 callbacks at once per host, 3
    in all, a 3 s deadline, one attempt each. Eight jobs call back a receiver on 127.0.0.5 that
    trickles its answer without end; one job submitted after them calls back a healthy one on
    127.0.0.4. The healthy callback is delivered at its first attempt while at least four slow
    ones have no attempt recorded yet (without the per-host bound the slow ones would hold
    every slot, and the healthy one would wait for them all); each slow one then ends `failed`
    after its one attempt, at the deadline."""
    slow = serve(RawReceiver("127.0.0.5", OK, every_s=0.2, endless=True))
    healthy = serve(RawReceiver("127.0.0.4", OK))
    flags = (
        "--callback-allow=127.0.0.5:*",
        "--callback-allow=127.0.0.4:*",
        "--callback-secret",
        SECRET,
        "--callback-host-concurrency",
        "2",
        "--callback-concurrency",
        "3",
        "--callback-timeout-s",
        "3",
        "--callback-attempts",
        "1",
    )
    try:
        with live(tmp_path, *flags) as server:
            slow_jobs = [
                submit_with(server, items(1), callback_url=slow.url())["id"] for _ in range(8)
            ]
            healthy_job = submit_with(server, items(1), callback_url=healthy.url())["id"]
            done = wait_job(
                server,
                healthy_job,
                lambda j: j["callback"]["state"] != "pending",
                60,
                "the healthy host's callback",
            )
            waiting = sum(job(server, j)["callback"]["attempts"] == 0 for j in slow_jobs)
            print(f"healthy delivered with {waiting} of 8 slow callbacks not yet attempted")
            assert done["callback"] == {
                "state": "delivered",
                "attempts": 1,
                "last_status": 200,
                "last_error": None,
            }
            assert waiting >= 4, f"only {waiting} slow callbacks still waiting"
            for job_id in slow_jobs:
                ended_slow = wait_job(
                    server,
                    job_id,
                    lambda j: j["callback"]["state"] != "pending",
                    60,
                    "a slow host's callback",
                )
                assert ended_slow["callback"] == {
                    "state": "failed",
                    "attempts": 1,
                    "last_status": None,
                    "last_error": "no answer within --callback-timeout-s (3 s)",
                }
    finally:
        close(slow)
        close(healthy)
    assert slow.requests == 8 and healthy.requests == 1


def exec_start(unit: str, instance: str, state_dir: Path) -> list[str]:
    """The unit's ExecStart= as systemd runs it: continuation joined, specifiers and $$ expanded."""
    line = re.search(r"^ExecStart=((?:.*\\\n)*.*)$", unit, re.M)
    assert line is not None
    text = line.group(1).replace("\\\n", " ").replace("%i", instance).replace("%S", str(state_dir))
    return shlex.split(text.replace("%%", "%").replace("$$", "$"))


def test_the_timer_units_command_writes_the_days_files(server: LiveServer, tmp_path: Path) -> None:
    """No systemd as PID 1 here: the service's own command line runs as systemd would run it."""
    manifests = tmp_path / "etc"
    manifests.mkdir()
    (manifests / "news.jsonl").write_text("\n".join(json.dumps(item) for item in items(2)) + "\n")
    unit = synth_timer.render_service(service.installed_command(), manifest_dir=str(manifests))
    argv = exec_start(unit, "news", tmp_path / "state")
    environ = {**os.environ, "OMNIVOICE_SERVER": server.url, "OMNIVOICE_API_KEY": KEY}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=environ)
    assert done.returncode == 0, done.stdout + done.stderr
    day = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")
    out = tmp_path / "state" / "omnivoice-synth" / "news" / day
    assert sorted(path.name for path in out.glob("*.wav")) == ["i0.wav", "i1.wav"]


def sidecar_state(server: LiveServer) -> str:
    state: str = server.health()["sidecars"][0]["state"]
    return state


def test_a_reaped_sidecar_is_ready_before_not_before_and_reaped_again_after(
    checkpoint_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The warm-up's first start crashes while loading (a test fault, once): the pool's usual
    backoff starts another, the waiting job reports it, and the sidecar is still ready in time."""
    token = tmp_path / "data" / "test-faults" / "warm-up-crash"
    monkeypatch.setenv("OMNIVOICE_TEST_FAULT_LOAD", f"crash@{token}")
    with live(tmp_path, "--idle-reap-s", "2", checkpoint=checkpoint_dir, faults=True) as server:
        server.wait_for(lambda h: h["sidecars"][0]["state"] == "reaped", 60, "the idle reap")
        token.write_text("")  # the next sidecar start, the warm-up's, crashes
        not_before = time.time() + 45
        created = submit_with(server, items(1), not_before=at(not_before - time.time()))
        assert created["warm_up"] is None  # 45 s ahead: not yet
        seen: list[tuple[float, str]] = []
        reports: list[dict[str, Any]] = []
        while time.time() < not_before - 0.5:
            seen.append((time.time(), sidecar_state(server)))
            report = job(server, created["id"])["warm_up"]
            if report is not None:
                reports.append(report)
            time.sleep(0.2)  # a sample of the sidecar's state every 0.2 s until not_before
        ready_at = [at_ for at_, state in seen if state in ("ready", "busy")]
        assert ready_at, f"no sidecar was ready before not_before: {seen[-5:]}"
        first_ready = ready_at[0]
        # Once ready, it stays up for the job (no idle reap inside the window).
        assert all(state != "reaped" for at_, state in seen if at_ > first_ready)
        assert not token.exists(), "the warm-up's first start did not crash"
        assert reports and reports[-1]["state"] == "ready" and reports[-1]["restarts"] == 1
        assert "status 70" in reports[-1]["last_error"]
        done = wait_job(server, created["id"], ended, 120, "the scheduled job")
        assert done["warm_up"] is None
        started = min(item["started_at"] for item in done["items"])
        assert not_before <= started < not_before + 2, started - not_before
        print(
            f"warm-up: ready {not_before - first_ready:.1f} s before not_before (one crashed "
            f"start included); first item started {started - not_before:.2f} s after it"
        )
        # After the window, idle reaping applies again.
        server.wait_for(lambda h: h["sidecars"][0]["state"] == "reaped", 60, "the reap after it")
        assert "keeping a sidecar ready for it" in server.log.read_text()

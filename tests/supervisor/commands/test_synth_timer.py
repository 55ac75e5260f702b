"""The scheduled synth units: the committed files are the templates, `install-service --timer`
writes what `systemd-analyze verify` accepts without a word (the instance's calendar drop-in
included), and bad names and calendars are refused. The unit's command line itself runs against
a live server in tests/integration/test_schedule_api.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from supervisor.commands import synth_timer
from tests.helpers.paths import REPO_ROOT
from tests.helpers.systemd import systemd_analyze

SYSTEMD_DIR = REPO_ROOT / "systemd"


def install(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "supervisor",
            "install-service",
            "--files-only",
            "--unit-dir",
            str(tmp_path),
            "--env-file",
            str(tmp_path / "omnivoice-supervisor"),
            *extra,
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )


def test_the_committed_units_are_the_templates() -> None:
    command = "/opt/omnivoice-supervisor/venv/bin/omnivoice-supervisor"
    assert (SYSTEMD_DIR / synth_timer.SERVICE).read_text() == synth_timer.render_service(command)
    assert (SYSTEMD_DIR / synth_timer.TIMER).read_text() == synth_timer.render_timer()


def test_the_timer_catches_up_and_the_service_runs_synth_once() -> None:
    timer = synth_timer.render_timer()
    assert re.search(r"^Persistent=true$", timer, re.M)
    assert re.search(r"^OnCalendar=\*-\*-\* 05:50:00$", timer, re.M)
    assert re.search(r"^WantedBy=timers.target$", timer, re.M)
    service = synth_timer.render_service("/usr/bin/omnivoice-supervisor")
    assert re.search(r"^Type=oneshot$", service, re.M)
    assert "/etc/omnivoice-synth/%i.jsonl" in service and "synth" in service


def test_install_timer_writes_units_that_systemd_analyze_verify_accepts(tmp_path: Path) -> None:
    analyze = systemd_analyze()
    done = install(tmp_path, "--port", "9200", "--timer", "news", "--on-calendar", "Mon..Fri 05:50")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "put the manifest at /etc/omnivoice-synth/news.jsonl" in done.stdout
    dropin = tmp_path / "omnivoice-synth@news.timer.d" / "calendar.conf"
    assert dropin.read_text() == "[Timer]\nOnCalendar=\nOnCalendar=Mon..Fri 05:50\n"
    env = tmp_path / "omnivoice-synth"
    assert "OMNIVOICE_SERVER=http://127.0.0.1:9200\n" in env.read_text()
    assert env.stat().st_mode & 0o777 == 0o600, "it may hold an API key"
    service = (tmp_path / synth_timer.SERVICE).read_text()
    assert f"EnvironmentFile=-{env}" in service
    units = [
        str(tmp_path / "omnivoice-synth@news.service"),
        str(tmp_path / "omnivoice-synth@news.timer"),
    ]
    done = subprocess.run([analyze, "verify", *units], capture_output=True, text=True)
    assert (done.returncode, done.stdout + done.stderr) == (0, "")
    # verify reads the instance's drop-in too: a calendar it cannot parse is reported.
    dropin.write_text("[Timer]\nOnCalendar=\nOnCalendar=bogus 99\n")
    done = subprocess.run([analyze, "verify", *units], capture_output=True, text=True)
    assert "bogus 99" in done.stderr


def test_bad_timer_names_and_calendars_are_refused(tmp_path: Path) -> None:
    systemd_analyze()
    for extra, says in [
        (("--timer", "../news"), "must be 1 to 64 letters"),
        (("--timer", "news", "--on-calendar", "every full moon"), "--on-calendar"),
        (("--on-calendar", "daily"), "give both"),
    ]:
        done = install(tmp_path, *extra)
        assert done.returncode == 2 and says in done.stdout, (extra, done.stdout)
    assert not (tmp_path / synth_timer.TIMER).exists()

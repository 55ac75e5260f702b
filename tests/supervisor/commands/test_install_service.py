"""The systemd unit: the committed file is the template, `install-service --files-only` writes what
`systemd-analyze verify` accepts without a single warning, and the hardening score stays in bounds."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from supervisor.commands import install_service as service
from supervisor.settings import Settings
from tests.helpers.paths import REPO_ROOT
from tests.helpers.systemd import systemd_analyze

COMMITTED_UNIT = REPO_ROOT / "systemd" / "omnivoice-supervisor.service"
# `systemd-analyze security` exposure, 0 (locked down) to 10 (exposed), times ten. The unit scores
# 1.7 with systemd 252; the gate at 2.0 leaves room for a small relaxation, never for losing the
# system-call filter (3.0 without it) or the empty capability set (3.7). The device policy does
# not move the score (only PrivateDevices= does), so the line checks below guard it.
SECURITY_THRESHOLD = 20


def installed_unit(tmp_path: Path, *extra: str) -> Path:
    return install_files(tmp_path, *extra)[0]


def install_files(tmp_path: Path, *extra: str) -> tuple[Path, str]:
    """install-service --files-only into tmp_path: the unit's path and what it printed."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "supervisor",
            "install-service",
            "--files-only",
            "--unit-dir",
            str(tmp_path),
            "--env-file",
            str(tmp_path / "env"),
            *extra,
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return tmp_path / service.UNIT, done.stdout


def test_a_model_or_data_directory_under_tmp_is_warned_about(tmp_path: Path) -> None:
    """Issue 49.5: the README's own /tmp/tiny is invisible to a unit with PrivateTmp=yes."""
    model = tmp_path / "tiny"
    model.mkdir()
    _, said = install_files(tmp_path, "--model", str(model), "--data-dir", "/var/tmp/ov")
    warning = [line for line in said.splitlines() if line.startswith("warning: ")]
    assert len(warning) == 1, said
    assert f"model {model}" in warning[0] and "data /var/tmp/ov" in warning[0]
    assert "PrivateTmp=yes" in warning[0]
    _, said = install_files(tmp_path, "--model", "k2-fsa/OmniVoice", "--data-dir", "/srv/ov")
    assert "warning" not in said  # a hub id is no path; /srv is seen


def test_a_path_under_home_is_named_with_the_protect_home_it_gets(tmp_path: Path) -> None:
    """The trial of issue 49: the ProtectHome= line said one of four paths was under /home or
    /root, not which; a hub id is no path, wherever the command runs."""
    unit, said = install_files(tmp_path, "--model", "k2-fsa/OmniVoice", "--data-dir", "/home/ov/d")
    [line] = [line for line in said.splitlines() if "ProtectHome=" in line]
    assert "data /home/ov/d" in line and "ProtectHome=read-only" in line, said
    assert "model" not in line
    assert "ProtectHome=read-only" in unit.read_text()


def test_the_committed_unit_is_the_template() -> None:
    assert COMMITTED_UNIT.read_text() == service.render_unit(), (
        "systemd/omnivoice-supervisor.service differs from supervisor/commands/install_service.py; regenerate it with\n"
        "python -c 'from supervisor.commands.install_service import render_unit; print(render_unit(), end=\"\")' > systemd/omnivoice-supervisor.service"
    )


def test_the_unit_keeps_the_conventions() -> None:
    unit = service.render_unit()
    for line in (
        "Type=notify",
        "NotifyAccess=main",
        "KillMode=mixed",
        "Restart=on-failure",
        "DevicePolicy=closed",
        "DeviceAllow=char-nvidia rw",
        "DeviceAllow=char-nvidiactl rw",
        "DeviceAllow=char-nvidia-uvm rw",
        "StateDirectory=omnivoice-supervisor",
        "LogsDirectory=omnivoice-supervisor",
        "User=omnivoice",
        "EnvironmentFile=-/etc/default/omnivoice-supervisor",
        "OOMPolicy=continue",
    ):
        assert re.search(rf"^{re.escape(line)}$", unit, re.M), line
    assert not re.search(r"^PrivateDevices=", unit, re.M), "PrivateDevices=yes hides the GPUs"
    seconds = {key: int(value) for key, value in re.findall(r"^(\w+Sec)=(\d+)s?$", unit, re.M)}
    assert seconds["TimeoutStopSec"] > Settings.drain_s + Settings.stop_timeout_s, (
        "systemd would SIGKILL a drain in progress"
    )
    assert (
        seconds["WatchdogSec"] >= 10
        and seconds["StartLimitIntervalSec"] > 0
        and "StartLimitBurst=5" in unit
    )


def test_install_files_only_writes_the_unit_and_a_settings_file_serve_accepts(
    tmp_path: Path,
) -> None:
    unit = installed_unit(
        tmp_path, "--model", "/srv/models/omnivoice", "--port", "9200", "--data-dir", "/srv/voices"
    )
    text = unit.read_text()
    assert (
        f"ExecStart={service.installed_command()} serve" in text
        and "ReadWritePaths=/srv/voices" in text
    )
    env_file = tmp_path / "env"
    assert env_file.stat().st_mode & 0o777 == 0o600, "the settings file may hold API keys"
    values = dict(
        line.split("=", 1)
        for line in env_file.read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert values == {
        "OMNIVOICE_MODEL": "/srv/models/omnivoice",
        "OMNIVOICE_PORT": "9200",
        "OMNIVOICE_DATA_DIR": "/srv/voices",
    }
    commented = dict(
        line[1:].split("=", 1)
        for line in env_file.read_text().splitlines()
        if re.match(r"#OMNIVOICE_\w+=", line)
    )
    settings = Settings.from_sources(
        environ={**commented, **values}
    )  # every default, spelled as a variable, parses back
    assert (settings.model, settings.port, settings.drain_s, settings.host) == (
        "/srv/models/omnivoice",
        9200,
        60.0,
        "127.0.0.1",
    )
    env_file.write_text("OMNIVOICE_MODEL=mine\n")
    installed_unit(tmp_path, "--model", "other")
    assert env_file.read_text() == "OMNIVOICE_MODEL=mine\n", (
        "an existing settings file is never overwritten"
    )


def test_systemd_analyze_verify_prints_nothing(tmp_path: Path) -> None:
    """verify exits 0 on values it cannot parse (it only prints 'ignoring'), so any output fails."""
    analyze = systemd_analyze()
    unit = installed_unit(tmp_path)
    if not os.access(service.installed_command(), os.X_OK):
        pytest.fail(
            f"{service.installed_command()} is missing: install the package (pip install -e .) first"
        )
    done = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True)
    assert (done.returncode, done.stdout + done.stderr) == (0, "")

    broken = tmp_path / "broken" / service.UNIT
    broken.parent.mkdir()
    broken.write_text(unit.read_text().replace("KillMode=mixed", "KillMode=mixd"))
    done = subprocess.run([analyze, "verify", str(broken)], capture_output=True, text=True)
    assert done.returncode == 0 and "ignoring: mixd" in done.stderr, (
        "verify passes it, and only its output tells"
    )


def test_systemd_analyze_security_score_within_the_threshold() -> None:
    """The unit as shipped (an installation under /home or /root gets ProtectHome=read-only: 1.9)."""
    analyze = systemd_analyze()
    done = subprocess.run(
        [
            analyze,
            "security",
            "--offline=true",
            f"--threshold={SECURITY_THRESHOLD}",
            "--no-pager",
            str(COMMITTED_UNIT),
        ],
        capture_output=True,
        text=True,
    )
    score = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", done.stdout)
    assert score is not None, done.stdout + done.stderr
    assert done.returncode == 0, (
        f"exposure {score.group(1)} is above {SECURITY_THRESHOLD / 10}:\n{done.stdout}"
    )

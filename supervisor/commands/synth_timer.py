"""Recurring `synth` runs under systemd: the templated service and timer, and their installation.

    omnivoice-synth@NAME.timer    fires on its calendar (OnCalendar=; Persistent=true: a run
                                  missed while the machine was off happens at the next boot)
    omnivoice-synth@NAME.service  runs `omnivoice-supervisor synth /etc/omnivoice-synth/NAME.jsonl`
                                  into /var/lib/omnivoice-synth/NAME/<UTC date>/, one folder a day

The template timer's calendar is a default; `install-service --timer NAME --on-calendar SPEC`
gives an instance its own in a drop-in (`omnivoice-synth@NAME.timer.d/calendar.conf`). Which
server to use and its key come from /etc/default/omnivoice-synth (OMNIVOICE_SERVER,
OMNIVOICE_API_KEY). `systemd/omnivoice-synth@.service` and `.timer` in the repository are these
templates rendered with the default command (a test keeps them identical and runs
`systemd-analyze verify` on them).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable

SERVICE = "omnivoice-synth@.service"
TIMER = "omnivoice-synth@.timer"
MANIFEST_DIR = "/etc/omnivoice-synth"
ENV_FILE = "/etc/default/omnivoice-synth"
DEFAULT_CALENDAR = "*-*-* 05:50:00"
# A unit instance name that is also a plain file name (the manifest's and the output folder's).
INSTANCE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")

SERVICE_TEMPLATE = """\
# omnivoice-synth@NAME: one `omnivoice-supervisor synth` run over {manifest_dir}/NAME.jsonl,
# started by omnivoice-synth@NAME.timer. Written by `omnivoice-supervisor install-service
# --timer NAME`; docs/DEPLOYMENT.md ("Scheduled read-outs") explains it.

[Unit]
Description=OmniVoice scheduled synthesis of manifest %i
Documentation=https://github.com/k2-fsa/OmniVoice
Wants=network-online.target
# When the server runs on this machine too, a run at boot waits until it has started.
After=network-online.target omnivoice-supervisor.service

[Service]
Type=oneshot
# One folder per run day (UTC), so a recurring manifest makes fresh files every day. The
# paths reach the shell as positional parameters: no part of them is read as shell code.
ExecStart=/bin/sh -c 'exec "$$0" synth "$$1" --out "$$2/$$(date -u +%%Y-%%m-%%d)"' \\
    {command} {manifest_dir}/%i.jsonl %S/omnivoice-synth/%i
# OMNIVOICE_SERVER (default http://127.0.0.1:9194) and OMNIVOICE_API_KEY.
EnvironmentFile=-{env_file}
Environment=PYTHONUNBUFFERED=1
User={user}
Group={user}
SyslogIdentifier=omnivoice-synth
# synth waits for its jobs; a day's read-out that has not finished in 12 hours has failed.
TimeoutStartSec=12h

StateDirectory=omnivoice-synth omnivoice-synth/%i
StateDirectoryMode=0750
UMask=0027

NoNewPrivileges=yes
CapabilityBoundingSet=
AmbientCapabilities=
ProtectSystem=strict
ProtectHome={protect_home}
PrivateTmp=yes
PrivateDevices=yes
PrivateIPC=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
MemoryDenyWriteExecute=yes
SystemCallArchitectures=native
SystemCallFilter=@system-service
SystemCallErrorNumber=EPERM
"""

TIMER_TEMPLATE = """\
# omnivoice-synth@NAME.timer: runs omnivoice-synth@NAME.service on a calendar. The calendar
# below is the default; an instance's own is in omnivoice-synth@NAME.timer.d/calendar.conf.

[Unit]
Description=OmniVoice scheduled synthesis of manifest %i, on its calendar
Documentation=https://github.com/k2-fsa/OmniVoice

[Timer]
OnCalendar={calendar}
# A run missed while the machine was off (or the timer stopped) happens as soon as it is back.
Persistent=true
AccuracySec=1s

[Install]
WantedBy=timers.target
"""


def render_service(
    command: str,
    user: str = "omnivoice",
    env_file: str = ENV_FILE,
    protect_home: str = "yes",
    manifest_dir: str = MANIFEST_DIR,
) -> str:
    return SERVICE_TEMPLATE.format(
        command=command,
        user=user,
        env_file=env_file,
        manifest_dir=manifest_dir,
        protect_home=protect_home,
    )


def render_timer(calendar: str = DEFAULT_CALENDAR) -> str:
    return TIMER_TEMPLATE.format(calendar=calendar)


def calendar_dropin(calendar: str) -> str:
    """An instance's own calendar: the empty OnCalendar= drops the template's."""
    return f"[Timer]\nOnCalendar=\nOnCalendar={calendar}\n"


def check_calendar(calendar: str) -> str | None:
    """What systemd says is wrong with a calendar expression, or None (also when it cannot ask)."""
    try:
        done = subprocess.run(
            ["systemd-analyze", "calendar", calendar], capture_output=True, text=True
        )
    except FileNotFoundError:
        return None
    return None if done.returncode == 0 else (done.stderr.strip() or "not a calendar expression")


def instance_paths(unit_dir: str, name: str) -> tuple[str, str]:
    """(the instance's calendar drop-in, its manifest)."""
    return (
        os.path.join(unit_dir, f"omnivoice-synth@{name}.timer.d", "calendar.conf"),
        os.path.join(MANIFEST_DIR, f"{name}.jsonl"),
    )


def install_timer(  # noqa: PLR0913  keyword-only flags of synth --install-timer, and the two effects tests replace
    name: str,
    calendar: str | None,
    *,
    command: str,
    user: str,
    unit_dir: str,
    env_file: str,
    server: str,
    protect_home: str,
    files_only: bool,
    write_file: Callable[[str, str, int], None],
    run: Callable[..., int],
) -> int:
    """Write the template units, the instance's calendar and the synth settings file (if absent);
    unless files_only, enable and start the instance's timer. 2: a bad name or calendar."""
    if not INSTANCE.fullmatch(name):
        print(
            f"install-service: --timer {name!r} must be 1 to 64 letters, digits, '.', '_' or "
            "'-' (it names the manifest and the output folder)"
        )
        return 2
    if calendar is not None:
        problem = check_calendar(calendar)
        if problem:
            print(f"install-service: --on-calendar {calendar!r}: {problem}")
            return 2
    service = render_service(command, user, env_file, protect_home)
    write_file(os.path.join(unit_dir, SERVICE), service, 0o644)
    write_file(os.path.join(unit_dir, TIMER), render_timer(), 0o644)
    dropin, manifest = instance_paths(unit_dir, name)
    if calendar is not None:
        write_file(dropin, calendar_dropin(calendar), 0o644)
    if os.path.exists(env_file):
        print(f"kept {env_file} as it is")
    else:  # it holds an API key: root's alone (systemd reads it as root)
        write_file(env_file, SYNTH_ENV.format(server=server), 0o600)
    if not os.path.exists(manifest):
        print(f"put the manifest at {manifest} (JSON lines, docs/JOBS.md); until then a run fails")
    if files_only:
        return 0
    run("systemctl", "daemon-reload")
    run("systemctl", "enable", "--now", f"omnivoice-synth@{name}.timer")
    run("systemctl", "--no-pager", "list-timers", f"omnivoice-synth@{name}.timer", check=False)
    return 0


SYNTH_ENV = """\
# Settings of the scheduled synth runs (omnivoice-synth@NAME.service), read at each run.
# The server the runs submit to:
OMNIVOICE_SERVER={server}
# Its API key, if it has keys (one of those in /etc/default/omnivoice-supervisor):
#OMNIVOICE_API_KEY=
"""

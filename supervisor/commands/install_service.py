"""`install-service` and `uninstall-service`: the systemd unit, its settings file and its user.

The unit text lives here, so an installed package can write it; `systemd/omnivoice-supervisor.
service` in the repository is this template rendered with the default paths (a test keeps the
two identical, and CI runs `systemd-analyze verify` and `security` on it). Installing:

    1. a system user and group (`omnivoice`), in the video and render groups where they exist
    2. the settings file (/etc/default/omnivoice-supervisor, OMNIVOICE_* variables), if absent
    3. the unit, pointing at this installation's `omnivoice-supervisor` command
    4. systemctl daemon-reload, enable, restart (which waits for READY=1)

`--files-only` does steps 2 and 3 alone (packagers, configuration management, tests).
`--timer NAME [--on-calendar SPEC]` also installs the scheduled synth units and enables
`omnivoice-synth@NAME.timer` (supervisor/commands/synth_timer.py).
Uninstalling stops (drains) and disables the service and removes the unit; `--purge` also
removes the settings file, the state, cache and log directories, and the user.
"""

from __future__ import annotations

import dataclasses
import grp
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

from supervisor.commands import synth_timer
from supervisor.settings import Settings, env_of

NAME = "omnivoice-supervisor"
UNIT = f"{NAME}.service"
UNIT_DIR = "/etc/systemd/system"
ENV_FILE = f"/etc/default/{NAME}"
USER = "omnivoice"
DEFAULT_COMMAND = f"/opt/{NAME}/venv/bin/{NAME}"
DEVICE_GROUPS = ("video", "render")  # owners of /dev/dri and, on some distributions, /dev/nvidia*

UNIT_TEMPLATE = """\
# omnivoice-supervisor: OpenAI-compatible OmniVoice text-to-speech server.
# Written by `omnivoice-supervisor install-service`; settings go in {env_file}.
# docs/DEPLOYMENT.md explains every choice below.

[Unit]
Description=OmniVoice text-to-speech server (OpenAI-compatible API)
Documentation=https://github.com/k2-fsa/OmniVoice
Wants=network-online.target
After=network-online.target nvidia-persistenced.service
# At most 5 starts in 10 minutes; then the unit stays failed until someone looks.
StartLimitIntervalSec=600
StartLimitBurst=5

[Service]
Type=notify
NotifyAccess=main
# The driver's UVM module must be loaded before the device filter below resolves char-nvidia-uvm.
# '+': as root, outside the sandbox; '-': a machine without the tool (no GPU) is not an error.
ExecStartPre=-+/usr/bin/nvidia-modprobe -u -c=0
ExecStart={command} serve
EnvironmentFile=-{env_file}
Environment=PYTHONUNBUFFERED=1
Environment=HOME=%S/omnivoice-supervisor
Environment=HF_HOME=%C/omnivoice-supervisor/huggingface
Environment=TRITON_CACHE_DIR=%C/omnivoice-supervisor/triton
Environment=TORCHINDUCTOR_CACHE_DIR=%C/omnivoice-supervisor/inductor
User={user}
Group={user}
SyslogIdentifier=omnivoice-supervisor

# READY=1 comes once a sidecar has loaded the model; the server extends the start timeout itself
# while loading goes on (EXTEND_TIMEOUT_USEC), so 120 s only bounds a start that makes no progress.
TimeoutStartSec=120s
# The event loop pings every 15 s; a loop blocked for 30 s is aborted (SIGABRT) and restarted.
WatchdogSec=30s
Restart=on-failure
RestartSec=5s
# SIGTERM drains: up to OMNIVOICE_DRAIN_S (60 s) of work in flight, then the sidecars stop.
# Keep this above the drain; systemd SIGKILLs whatever is left after it.
TimeoutStopSec=90s
# SIGTERM to the supervisor only (it stops its sidecars itself); SIGKILL to every process left.
KillMode=mixed
# A sidecar killed by the kernel's OOM killer is the supervisor's to replace, not a unit failure.
OOMPolicy=continue
LimitNOFILE=65536

StateDirectory=omnivoice-supervisor
CacheDirectory=omnivoice-supervisor
LogsDirectory=omnivoice-supervisor
StateDirectoryMode=0750
UMask=0077

NoNewPrivileges=yes
CapabilityBoundingSet=
AmbientCapabilities=
ProtectSystem=strict
ProtectHome={protect_home}
{read_write_paths}PrivateTmp=yes
PrivateIPC=yes
PrivateMounts=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
ProtectProc=invisible
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
RemoveIPC=yes
SystemCallArchitectures=native
SystemCallFilter=@system-service
SystemCallErrorNumber=EPERM
# GPUs: never PrivateDevices=yes (it hides them). Only the pseudo devices plus NVIDIA's groups
# from /proc/devices; MemoryDenyWriteExecute= stays off because CUDA and Triton JIT-compile.
DevicePolicy=closed
DeviceAllow=char-nvidiactl rw
DeviceAllow=char-nvidia rw
DeviceAllow=char-nvidia-uvm rw
DeviceAllow=char-nvidia-caps rw

[Install]
WantedBy=multi-user.target
"""


def installed_command() -> str:
    """This installation's console script, next to the interpreter running us."""
    return str(Path(sys.executable).parent / NAME)


def render_unit(
    command: str = DEFAULT_COMMAND,
    user: str = USER,
    env_file: str = ENV_FILE,
    read_write: tuple[str, ...] = (),
    protect_home: str = "yes",
) -> str:
    paths = "".join(f"ReadWritePaths={path}\n" for path in read_write)
    return UNIT_TEMPLATE.format(
        command=command,
        user=user,
        env_file=env_file,
        read_write_paths=paths,
        protect_home=protect_home,
    )


def render_env_file(values: dict[str, str]) -> str:
    """Every setting as a commented-out line with its help; `values` are written out for real."""
    lines = [
        f"# {NAME} settings, read by systemd at each start (EnvironmentFile=).",
        "# One VARIABLE=value per line; '#' starts a comment. After a change:",
        f"#   systemctl restart {NAME}",
        "",
    ]
    for f in dataclasses.fields(Settings):
        name = env_of(f)
        lines.append(f"# {f.metadata['help']}")
        if name in values:
            lines.append(f"{name}={values[name]}")
        elif f.name == "api_keys":
            # No keys is the variable unset: an empty value is refused, so it has no line to
            # uncomment as it stands, only a pattern to fill in.
            lines.append(f"# {name}=KEY[,KEY...]  (unset: no keys, an open server)")
        else:
            lines.append(f"#{name}={_as_variable(f.default)}")
    return "\n".join(lines) + "\n"


def _as_variable(default: object) -> str:
    if isinstance(default, tuple):
        return ",".join(default)
    if isinstance(default, bool):
        return str(default).lower()
    return "" if default is None else str(default)


def write_file(path: str, text: str, mode: int) -> None:
    """Atomically: a temporary file beside it, then a rename."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    temporary = f"{path}.tmp"
    with open(temporary, "w") as f:
        f.write(text)
    os.chmod(temporary, mode)
    os.replace(temporary, path)
    print(f"wrote {path}")


def run(*argv: str, check: bool = True) -> int:
    print("+ " + " ".join(argv))
    return subprocess.run(argv, check=check).returncode


def ensure_user(user: str) -> None:
    try:
        pwd.getpwnam(user)
        print(f"user {user} exists")
    except KeyError:
        run(
            "useradd",
            "--system",
            "--user-group",
            "--home-dir",
            f"/var/lib/{NAME}",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
            "--comment",
            "OmniVoice TTS server",
            user,
        )
    groups = [g for g in DEVICE_GROUPS if _group_exists(g)]
    if groups:
        run("usermod", "--append", "--groups", ",".join(groups), user)


def _group_exists(name: str) -> bool:
    try:
        grp.getgrnam(name)
    except KeyError:
        return False
    return True


HOMES = ("/home", "/root", "/run/user")  # the unit's ProtectHome= hides these
PRIVATE_TMP = ("/tmp", "/var/tmp")  # the unit's PrivateTmp=yes gives the service its own


def lying_under(roots: tuple[str, ...], **paths: str) -> list[str]:
    """Which of the named paths (a model directory, the venv, the data directory) lie under one
    of `roots`, each as its name and path (and the real path, where a link leads there); a hub
    id (no such path) is none."""
    found = []
    for what, path in paths.items():
        if not path or not (os.path.isabs(path) or os.path.exists(path)):
            continue
        real = Path(path).resolve()
        if any(real.is_relative_to(root) for root in roots):
            found.append(f"{what} {path}" + (f" (= {real})" if str(real) != path else ""))
    return found


def checked_paths(command: str, model: str | None, data_dir: str | None) -> str:
    """The unit's ProtectHome= for where the installation, model and data directory lie, saying
    which one where it is not `yes`; a warning for any of them under /tmp, which the service
    never sees."""
    paths = {"installation": command, "python": sys.executable}
    paths |= {"model": model or "", "data": data_dir or ""}
    hidden = lying_under(PRIVATE_TMP, **paths)
    if hidden:
        them = "them" if len(hidden) > 1 else "it"
        print(
            f"warning: {'; '.join(hidden)}: under /tmp, which the service does not see "
            f"(PrivateTmp=yes gives it a /tmp of its own): move {them} (under /opt or /srv, say)"
        )
    in_home = lying_under(HOMES, **paths)
    if not in_home:
        return "yes"
    print(f"{'; '.join(in_home)}: under /home or /root, so the unit has ProtectHome=read-only")
    return "read-only"


def install(  # noqa: PLR0913  keyword-only, one per flag of install-service, passed by name
    *,
    model: str | None,
    host: str | None,
    port: int | None,
    data_dir: str | None,
    user: str,
    unit_dir: str,
    env_file: str,
    files_only: bool,
    start: bool,
    timer: str | None = None,
    on_calendar: str | None = None,
) -> int:
    if timer is None and on_calendar is not None:
        print("install-service: --on-calendar is the calendar of a --timer NAME; give both")
        return 2
    command = installed_command()
    if not os.access(command, os.X_OK):
        print(
            f"install-service: {command} is not executable; run this from the installed omnivoice-supervisor"
        )
        return 2
    if not files_only and os.geteuid() != 0:
        print("install-service: run as root (it creates a user and writes to /etc)")
        return 2
    if not files_only:
        ensure_user(user)
    given = {"model": model, "host": host, "port": port, "data_dir": data_dir}
    values = {
        env_of(f): str(given[f.name]) for f in dataclasses.fields(Settings) if given.get(f.name)
    }
    if os.path.exists(env_file):
        print(
            f"kept {env_file} as it is"
            + (f" (set {', '.join(values)} there yourself)" if values else "")
        )
    else:  # read by systemd as root, and it may hold API keys: root's alone
        write_file(env_file, render_env_file(values), 0o600)
    protect_home = checked_paths(command, model, data_dir)
    unit = render_unit(command, user, env_file, (data_dir,) if data_dir else (), protect_home)
    write_file(os.path.join(unit_dir, UNIT), unit, 0o644)
    if timer is not None:
        timer_done = synth_timer.install_timer(
            timer,
            on_calendar,
            command=command,
            user=user,
            unit_dir=unit_dir,
            env_file=os.path.join(os.path.dirname(env_file), "omnivoice-synth"),
            server=f"http://{host or '127.0.0.1'}:{port or 9194}",
            protect_home=protect_home,
            files_only=files_only,
            write_file=write_file,
            run=run,
        )
        if timer_done != 0:
            return timer_done
    if files_only:
        return 0
    run("systemctl", "daemon-reload")
    run("systemctl", "enable", UNIT)
    if not start:
        print(f"enabled; start it with: systemctl start {NAME}")
        return 0
    print(
        "starting: systemctl waits for READY=1, which comes once the model is loaded (minutes on a first download)"
    )
    if run("systemctl", "restart", UNIT, check=False) != 0:
        print(f"the service did not start; see: journalctl -u {NAME} -n 100")
        return 1
    run("systemctl", "--no-pager", "status", UNIT, check=False)
    return 0


def uninstall(*, user: str, unit_dir: str, env_file: str, purge: bool) -> int:
    if os.geteuid() != 0:
        print("uninstall-service: run as root")
        return 2
    path = os.path.join(unit_dir, UNIT)
    if os.path.exists(path):
        if shutil.which("systemctl"):
            run("systemctl", "disable", "--now", UNIT, check=False)  # --now: stop, which drains
            if run("systemctl", "is-failed", "--quiet", UNIT, check=False) == 0:
                run("systemctl", "reset-failed", UNIT, check=False)
        os.unlink(path)
        print(f"removed {path}")
        if shutil.which("systemctl"):
            run("systemctl", "daemon-reload", check=False)
    else:
        print(f"{path} is not there; nothing to stop or disable")
    leftovers = [
        p
        for p in (env_file, f"/var/lib/{NAME}", f"/var/cache/{NAME}", f"/var/log/{NAME}")
        if os.path.exists(p)
    ]
    if not purge:
        if leftovers:
            print(f"kept {', '.join(leftovers)} and user {user} (--purge removes them)")
        return 0
    for leftover in leftovers:
        if os.path.isdir(leftover):
            shutil.rmtree(leftover)
        else:
            os.unlink(leftover)
        print(f"removed {leftover}")
    try:
        pwd.getpwnam(user)
    except KeyError:
        return 0
    run("userdel", user, check=False)
    return 0

"""`install-service` and `uninstall-service`: their flags, handed to
supervisor/commands/install_service.py."""

from __future__ import annotations

import argparse


def cmd_install_service(args: argparse.Namespace) -> int:
    from supervisor.commands.install_service import install

    return install(
        model=args.model,
        host=args.host,
        port=args.port,
        data_dir=args.data_dir,
        user=args.user,
        unit_dir=args.unit_dir,
        env_file=args.env_file,
        files_only=args.files_only,
        start=args.start,
        timer=args.timer,
        on_calendar=args.on_calendar,
    )


def cmd_uninstall_service(args: argparse.Namespace) -> int:
    from supervisor.commands.install_service import uninstall

    return uninstall(
        user=args.user, unit_dir=args.unit_dir, env_file=args.env_file, purge=args.purge
    )


def add_service(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from supervisor.commands import install_service as service
    from supervisor.commands import synth_timer

    p = sub.add_parser(
        "install-service",
        help="install, enable and start the systemd unit (as root)",
        description="Creates the user, writes the settings file (if absent) and the unit, then "
        "systemctl daemon-reload, enable and restart. docs/DEPLOYMENT.md has the details.",
    )
    p.add_argument(
        "--model", metavar="DIR_OR_HF_ID", help="OMNIVOICE_MODEL for a new settings file"
    )
    p.add_argument("--host", help="OMNIVOICE_HOST for a new settings file (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="OMNIVOICE_PORT for a new settings file (default 9194)")
    p.add_argument(
        "--data-dir",
        metavar="DIR",
        help="OMNIVOICE_DATA_DIR outside the state directory (shared storage); made writable in the unit",
    )
    p.add_argument(
        "--no-start", dest="start", action="store_false", help="enable, but do not start or restart"
    )
    p.add_argument(
        "--files-only",
        action="store_true",
        help="only write the settings file and the unit: no user, no systemctl",
    )
    p.add_argument(
        "--timer",
        metavar="NAME",
        help="also install omnivoice-synth@.service and .timer and enable omnivoice-synth@NAME."
        "timer: synth over /etc/omnivoice-synth/NAME.jsonl on a calendar",
    )
    p.add_argument(
        "--on-calendar",
        metavar="SPEC",
        help="the --timer's OnCalendar= (systemd.time(7)), e.g. '*-*-* 05:50:00' "
        f"(default {synth_timer.DEFAULT_CALENDAR!r})",
    )
    p.set_defaults(func=cmd_install_service)
    u = sub.add_parser(
        "uninstall-service", help="stop (drain), disable and remove the systemd unit (as root)"
    )
    u.add_argument(
        "--purge",
        action="store_true",
        help="also remove the settings file, state, cache, logs and the user",
    )
    u.set_defaults(func=cmd_uninstall_service)
    for q in (p, u):
        q.add_argument(
            "--user", default=service.USER, help="the service's user (default: %(default)s)"
        )
        q.add_argument(
            "--unit-dir",
            default=service.UNIT_DIR,
            help="where the unit goes (default: %(default)s)",
        )
        q.add_argument(
            "--env-file", default=service.ENV_FILE, help="the settings file (default: %(default)s)"
        )

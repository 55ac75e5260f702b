"""python -m supervisor: the omnivoice-supervisor command."""

from supervisor.cli import main

raise SystemExit(main())

"""What the CLI's subcommands run: serve, stop, synth, install-service."""

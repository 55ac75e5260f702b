"""Supervision: the arbiter, one session per sidecar, the scheduler."""

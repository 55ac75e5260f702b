"""Code both processes import: the standard library and msgpack only.

tests/integration/test_boundaries.py checks every module here, and that the supervisor loads no other
sidecar module."""

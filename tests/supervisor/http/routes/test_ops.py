"""supervisor/http/routes/ops.py: what /health shows a client without a key (the whole route runs
in tests/integration/test_hardening.py; a spare's entry needs a GPU or --spare-sidecars on)."""

from __future__ import annotations

from supervisor.http.routes.ops import hide_pids


def test_no_pid_is_shown_without_a_key_not_even_a_spare_s() -> None:
    spare = {"pid": 12, "state": "parked", "memory_bytes": 1 << 30}
    sidecars = [{"id": "gpu0", "pid": 11, "spare": spare}, {"id": "gpu1", "pid": 13, "spare": None}]
    hide_pids(sidecars)
    assert sidecars == [
        {
            "id": "gpu0",
            "pid": None,
            "spare": {"pid": None, "state": "parked", "memory_bytes": 1 << 30},
        },
        {"id": "gpu1", "pid": None, "spare": None},
    ]
    assert spare["pid"] == 12  # the pool's own entry is not changed under it

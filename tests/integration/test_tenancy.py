"""API keys as tenants against one real server, once with each job store (SQLite, then a real
PostgreSQL): alice and bob each see only their own jobs, voices and lexicons; the admin key sees
all; a shared voice is everyone's to use; the result cache and idempotency keys are per key; and
alice's callbacks are signed with her own secret, checked by a real receiver.

The null engine (no model) makes the audio: ownership is the supervisor's, not the model's.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.callback_receivers import Webhook, webhook
from tests.helpers.job_helpers import ended
from tests.helpers.live_server import LiveServer, live, tone_wav
from tests.helpers.waits import wait_until

ALICE, BOB, ADMIN = "sk-alice", "sk-bob", "sk-ops"
ALICE_SECRET, SERVER_SECRET = "whsec-alice", "whsec-server"
KEY_FILE = f"""# tenants
{ALICE} name=alice callback-secret={ALICE_SECRET}
{BOB} name=bob
{ADMIN} name=ops admin
shared-voices: narrator
"""


@pytest.fixture(scope="module")
def receiver() -> Iterator[Webhook]:
    with webhook() as server:
        yield server


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    store = (
        "sqlite"
        if request.param == "sqlite"
        else request.getfixturevalue("pg_cluster").new_database()
    )
    folder = tmp_path_factory.mktemp("tenancy")
    (folder / "keys").write_text(KEY_FILE)
    flags = (
        "--api-key-file",
        str(folder / "keys"),
        "--store",
        store,
        "--callback-allow",
        "127.0.0.1:*",
        "--callback-secret",
        SERVER_SECRET,
        "--callback-backoff-s",
        "0.2",
    )
    with live(folder, *flags) as running:
        yield running


def call(server: LiveServer, key: str, method: str, path: str, **kw: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}", **kw.pop("headers", {})}
    return server.request(method, path, auth=False, headers=headers, **kw)


def submit(server: LiveServer, key: str, text: str, **fields: Any) -> httpx.Response:
    item = {"id": "a", "input": text, "response_format": "wav", "seed": 7}
    headers = fields.pop("headers", {})
    return call(server, key, "POST", "/v1/jobs", json={"items": [item], **fields}, headers=headers)


def wait_ended(server: LiveServer, key: str, job_id: str) -> dict[str, Any]:
    def settled() -> dict[str, Any] | None:
        body: dict[str, Any] = call(server, key, "GET", f"/v1/jobs/{job_id}").json()
        callback = body["callback"]
        return (
            body if ended(body) and (callback is None or callback["state"] != "pending") else None
        )

    return wait_until(settled, 120, f"job {job_id} to end, its callback settled")


def test_another_keys_job_is_not_found_and_the_admin_sees_every_job(server: LiveServer) -> None:
    created = submit(server, ALICE, "Alice's own words.", headers={"Idempotency-Key": "night-1"})
    assert created.status_code == 202, created.text
    job_id = created.json()["id"]
    assert wait_ended(server, ALICE, job_id)["state"] == "completed"
    mine = [f"/v1/jobs/{job_id}", f"/v1/jobs/{job_id}/items/0/audio"]
    for path in mine:
        assert call(server, ALICE, "GET", path).status_code == 200
        assert call(server, ADMIN, "GET", path).status_code == 200
        other = call(server, BOB, "GET", path)
        assert other.status_code == 404 and other.json()["error"]["code"] == "job_not_found", path
    assert call(server, BOB, "GET", f"/v1/jobs/{job_id}/items/0/captions.srt").status_code == 404
    assert call(server, BOB, "DELETE", f"/v1/jobs/{job_id}").status_code == 404
    listed = {
        key: [j["id"] for j in call(server, key, "GET", "/v1/jobs?limit=100").json()["data"]]
        for key in (ALICE, BOB, ADMIN)
    }
    assert job_id in listed[ALICE] and job_id in listed[ADMIN] and job_id not in listed[BOB]
    assert call(server, BOB, "GET", f"/v1/jobs?after={job_id}").json()["data"] == []
    assert call(server, ALICE, "GET", f"/v1/jobs/{job_id}").json()["owner"] == "alice"

    # The same Idempotency-Key and body: alice's is replayed to her, never to bob.
    again = submit(server, ALICE, "Alice's own words.", headers={"Idempotency-Key": "night-1"})
    assert again.json()["id"] == job_id and again.headers["Idempotent-Replayed"] == "true"
    bobs = submit(server, BOB, "Alice's own words.", headers={"Idempotency-Key": "night-1"})
    assert bobs.status_code == 202 and bobs.json()["id"] != job_id
    assert "idempotent-replayed" not in bobs.headers
    assert call(server, BOB, "GET", f"/v1/jobs/{bobs.json()['id']}").status_code == 200
    # The admin's list says whose each job is.
    owners = {j["id"]: j["owner"] for j in call(server, ADMIN, "GET", "/v1/jobs").json()["data"]}
    assert owners[job_id] == "alice" and owners[bobs.json()["id"]] == "bob"


def signed_with(secret: str, headers: dict[str, str], body: bytes) -> bool:
    """The receiver's check: X-OmniVoice-Signature is t=<unix>,v1=HMAC-SHA256(secret, "<t>.<body>")."""
    fields = dict(part.split("=", 1) for part in headers["x-omnivoice-signature"].split(","))
    expected = hmac.new(secret.encode(), f"{fields['t']}.".encode() + body, hashlib.sha256)
    return hmac.compare_digest(expected.hexdigest(), fields["v1"])


def test_each_keys_callbacks_are_signed_with_its_own_secret(
    server: LiveServer, receiver: Webhook
) -> None:
    alices = submit(server, ALICE, "Called back.", callback_url=receiver.url).json()["id"]
    bobs = submit(server, BOB, "Called back.", callback_url=receiver.url).json()["id"]
    for key, job_id in ((ALICE, alices), (BOB, bobs)):
        assert wait_ended(server, key, job_id)["callback"]["state"] == "delivered"
    got = {
        body_id: (headers, body)
        for headers, body in receiver.accepted()
        for body_id in [httpx.Response(200, content=body).json()["id"]]
    }
    alice_headers, alice_body = got[alices]
    assert signed_with(ALICE_SECRET, alice_headers, alice_body)
    assert not signed_with(SERVER_SECRET, alice_headers, alice_body)  # nobody else's secret
    bob_headers, bob_body = got[bobs]
    assert signed_with(SERVER_SECRET, bob_headers, bob_body)  # bob has none: the server's
    assert not signed_with(ALICE_SECRET, bob_headers, bob_body)


def test_a_jobs_own_callback_secret_signs_its_callback_and_is_never_shown(
    server: LiveServer, receiver: Webhook
) -> None:
    secret = "job-own-secret-0123456789"
    job_id = submit(
        server,
        ALICE,
        "Called back with my own secret.",
        callback_url=receiver.url,
        callback_secret=secret,
    ).json()["id"]
    assert wait_ended(server, ALICE, job_id)["callback"]["state"] == "delivered"
    headers, body = next((h, b) for h, b in receiver.accepted() if job_id.encode() in b)
    assert signed_with(secret, headers, body)
    assert not signed_with(ALICE_SECRET, headers, body)  # in place of its key's, not beside it
    shown = [
        body,
        call(server, ALICE, "GET", f"/v1/jobs/{job_id}").content,
        call(server, ADMIN, "GET", "/v1/jobs").content,
        call(server, ADMIN, "GET", "/health").content,
    ]
    assert not any(secret.encode() in text for text in shown)
    assert secret not in server.log.read_text()
    refused = submit(server, ALICE, "x", callback_url=receiver.url, callback_secret="short")
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "callback_secret"


def test_the_key_file_is_the_servers_and_its_keys_are_not_shown(server: LiveServer) -> None:
    health = call(server, ADMIN, "GET", "/health").json()
    assert health["settings"]["api_keys"] == 4  # the three of the file and live()'s own
    assert ALICE_SECRET not in str(health) and ALICE not in str(health)


def speak(server: LiveServer, key: str, **fields: Any) -> httpx.Response:
    body = {"input": "A few words.", "response_format": "wav", **fields}
    return call(server, key, "POST", "/v1/audio/speech", json=body)


def design(server: LiveServer, key: str, name: str) -> httpx.Response:
    form = {"name": name, "type": "prompt", "prompt": "female, low pitch"}
    return call(server, key, "POST", "/v1/audio/voices", data=form)


def names(server: LiveServer, key: str, path: str) -> set[str]:
    return {entry["name"] for entry in call(server, key, "GET", path).json()["data"]}


def test_a_voice_is_its_keys_and_a_shared_voice_everyones(server: LiveServer) -> None:
    assert design(server, ALICE, "alices").status_code == 201
    assert speak(server, ALICE, voice="alices").status_code == 200
    assert call(server, BOB, "GET", "/v1/audio/voices/alices").status_code == 404
    assert "alices" not in names(server, BOB, "/v1/audio/voices")
    assert {"alices", "alloy"} <= names(server, ALICE, "/v1/audio/voices")
    used = speak(server, BOB, voice="alices")
    assert used.status_code == 400 and used.json()["error"]["code"] == "voice_not_found"
    item = {"input": "Hers.", "voice": "alices"}
    job = call(server, BOB, "POST", "/v1/jobs", json={"items": [item]})
    assert job.status_code == 400 and job.json()["error"]["code"] == "voice_not_found"
    assert call(server, BOB, "DELETE", "/v1/audio/voices/alices").status_code == 404
    taken = design(server, BOB, "alices")  # names are the server's: taken, nothing more
    assert taken.status_code == 409 and "female" not in taken.text
    assert call(server, ADMIN, "GET", "/v1/audio/voices/alices").status_code == 200
    assert speak(server, ADMIN, voice="alices").status_code == 200

    refused = design(server, BOB, "narrator")  # a shared voice's name: an admin's to make
    assert refused.status_code == 403
    assert refused.json()["error"]["type"] == "permission_error"
    assert design(server, ADMIN, "narrator").status_code == 201
    for key in (ALICE, BOB):
        assert "narrator" in names(server, key, "/v1/audio/voices")
        assert speak(server, key, voice="narrator").status_code == 200
    assert call(server, BOB, "DELETE", "/v1/audio/voices/narrator").status_code == 403
    assert call(server, ADMIN, "DELETE", "/v1/audio/voices/narrator").status_code == 200
    assert call(server, ALICE, "DELETE", "/v1/audio/voices/alices").status_code == 200


def test_a_lexicon_is_its_keys_and_an_admin_manages_every_one(server: LiveServer) -> None:
    path = "/v1/audio/lexicons/brands"
    entries = {"language": "en", "entries": {"SQL": "sequel"}}
    assert call(server, ALICE, "PUT", path, json=entries).status_code == 201
    assert call(server, BOB, "GET", path).status_code == 404
    assert "brands" not in names(server, BOB, "/v1/audio/lexicons")
    used = speak(server, BOB, lexicon="brands")
    assert used.status_code == 400 and used.json()["error"]["code"] == "lexicon_not_found"
    assert speak(server, ALICE, lexicon="brands").status_code == 200
    assert call(server, BOB, "PUT", path, json=entries).status_code == 409
    assert call(server, BOB, "DELETE", path).status_code == 404
    assert call(server, ALICE, "GET", path).json()["entries"] == {"SQL": "sequel"}  # untouched
    replaced = {"language": "en", "entries": {"SQL": "S Q L"}}
    assert call(server, ADMIN, "PUT", path, json=replaced).status_code == 200
    assert call(server, ALICE, "GET", path).json()["entries"] == {"SQL": "S Q L"}  # still hers
    assert call(server, ALICE, "DELETE", path).status_code == 200
    assert call(server, ADMIN, "GET", path).status_code == 404


def test_the_result_cache_is_each_keys_own_and_so_is_a_purge(server: LiveServer) -> None:
    said = {"input": "What alice said, seeded.", "seed": 11}
    assert speak(server, ALICE, **said).headers["x-cache"] == "miss"
    assert speak(server, ALICE, **said).headers["x-cache"] == "hit"
    assert speak(server, BOB, **said).headers["x-cache"] == "miss"  # no oracle of alice's text
    assert speak(server, BOB, **said).headers["x-cache"] == "hit"  # bob's own entry
    purged = call(server, BOB, "DELETE", "/v1/cache").json()
    assert purged["deleted"] >= 1 and purged["bytes"] > 0  # bob's entries (his jobs' too)
    assert speak(server, ALICE, **said).headers["x-cache"] == "hit"
    assert speak(server, BOB, **said).headers["x-cache"] == "miss"
    assert call(server, ADMIN, "DELETE", "/v1/cache").json()["deleted"] >= 2  # everyone's
    assert speak(server, ALICE, **said).headers["x-cache"] == "miss"


def clone_cache_counts(server: LiveServer) -> tuple[float, float]:
    """(hits, misses) of the clone-prompt cache, from /metrics as the admin reads it."""
    scraped = call(server, ADMIN, "GET", "/metrics").text.splitlines()
    counts = [
        float(line.split()[-1])
        for name in ("hits", "misses")
        for line in scraped
        if line.startswith(f"omnivoice_clone_prompt_cache_{name}_total ")
    ]
    assert len(counts) == 2, counts
    return counts[0], counts[1]


def test_the_clone_prompt_cache_is_each_keys_own(server: LiveServer) -> None:
    """Issue 48 medium 7: keyed by clip and transcript alone, a hit told bob that alice had
    cloned that exact clip."""
    clip = {"file": ("ref.wav", tone_wav(1.3, hz=330.0), "audio/wav")}
    form = {"input": "Cloned once.", "transcript": "A reference.", "response_format": "wav"}

    def clone(key: str) -> tuple[float, float]:
        before = clone_cache_counts(server)
        answer = call(server, key, "POST", "/v1/audio/clone", data=form, files=clip)
        assert answer.status_code == 200, answer.text
        after = clone_cache_counts(server)
        return after[0] - before[0], after[1] - before[1]

    assert clone(ALICE) == (0, 1)
    assert clone(ALICE) == (1, 0)
    assert clone(BOB) == (0, 1)  # alice's clone is not bob's hit
    assert clone(BOB) == (1, 0)


def test_cache_shared_makes_one_cache_for_every_key(tmp_path: Path) -> None:
    (tmp_path / "keys").write_text(KEY_FILE)
    with live(tmp_path, "--api-key-file", str(tmp_path / "keys"), "--cache-shared") as server:
        said = {"input": "Said once, for all.", "seed": 12}
        assert speak(server, ALICE, **said).headers["x-cache"] == "miss"
        assert speak(server, BOB, **said).headers["x-cache"] == "hit"
        assert call(server, BOB, "DELETE", "/v1/cache").json()["deleted"] == 0  # not bob's
        assert call(server, ADMIN, "DELETE", "/v1/cache").json()["deleted"] == 1


def test_a_tenants_key_sees_neither_the_servers_paths_nor_its_metrics(server: LiveServer) -> None:
    """Before: any valid key saw api_key_file, data_dir and pid_file in /health, and the whole
    server's counters in /metrics."""
    for key in (ALICE, BOB):
        health = call(server, key, "GET", "/health").json()
        assert health["status"] == "ok" and "api_keys" in health["settings"]
        hidden = {"api_key_file", "data_dir", "pid_file", "cache_dir"} & set(health["settings"])
        assert not hidden and "connections" not in health
        metrics = call(server, key, "GET", "/metrics")
        assert metrics.status_code == 403, metrics.text
        assert metrics.json()["error"]["type"] == "permission_error"
    health = call(server, ADMIN, "GET", "/health").json()
    assert health["settings"]["api_key_file"] and health["settings"]["data_dir"]
    assert health["connections"]["open"] >= 1
    assert call(server, ADMIN, "GET", "/metrics").status_code == 200

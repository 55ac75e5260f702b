"""API keys as tenants: the key file's format, checked strictly at start, and the owner each key
gets; and the SQLite job store's owners, on a database made before owners existed."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import msgpack
import pytest

from supervisor.jobs.sqlite_schema import DB_NAME
from supervisor.jobs.sqlite_store import SqliteJobStore
from supervisor.jobs.storage import NewItem
from supervisor.settings import Settings, SettingsError
from supervisor.speech.stores.voices import SavedVoice
from supervisor.tenants import OPEN, Tenant, owner_of, parse_key_file

KEY_FILE = """# plain keys, as before
sk-plain
sk-alice name=alice callback-secret=whsec-alice
sk-ops name=ops admin
sk-alice-next name=alice callback-secret=whsec-alice
shared-voices: narrator, news-reader
"""


def test_a_key_file_names_keys_marks_admins_and_shares_voices() -> None:
    parsed = parse_key_file(KEY_FILE)
    assert parsed.keys == ("sk-plain", "sk-alice", "sk-ops", "sk-alice-next")
    assert parsed.tenants["sk-plain"] == Tenant(hashlib.sha256(b"sk-plain").hexdigest()[:16])
    assert parsed.tenants["sk-alice"] == Tenant("alice", False, "whsec-alice")
    assert parsed.tenants["sk-alice-next"] == parsed.tenants["sk-alice"]  # one tenant, two keys
    assert parsed.tenants["sk-ops"] == Tenant("ops", admin=True)
    assert parsed.shared_voices == {"narrator", "news-reader"}
    assert "sk-plain" not in owner_of("sk-plain")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("sk-a name=a\nsk-a name=b\n", "line 2: this key is also on an earlier line"),
        ("sk-a admin=yes\n", "line 1: 'admin=yes' is not an option"),
        ("sk-a root\n", "line 1: 'root' is not an option"),
        ("sk-a name=x name=y\n", "'name=y' is not an option"),
        ("sk-a name=\n", "'name=' is not an option"),
        ("sk-a name=a.b\n", "line 1: name 'a.b': 1 to 64 letters"),
        ("sk-a my secret key\n", "'my' is not an option"),
        ("sk-a name=a admin\nsk-b name=a\n", "the keys named 'a' differ"),
        ("shared-voices:\nsk-a\n", "line 1: 'shared-voices:' names no voice"),
        ("sk-a\nshared-voices: good bad/name\n", "line 2: 'bad/name' is not a voice name"),
        ("# nothing\n\n", "it holds no key"),
    ],
)
def test_a_bad_key_file_is_refused_naming_its_line(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_key_file(text)


def test_keys_from_the_flag_and_the_file_are_tenants_alike(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text(KEY_FILE)
    settings = Settings(engine="null", api_keys=("sk-flag", "sk-alice"), api_key_file=str(keys))
    assert settings.api_keys == ("sk-flag", "sk-alice", "sk-plain", "sk-ops", "sk-alice-next")
    tenancy = settings.tenancy
    assert tenancy.by_key["sk-flag"] == Tenant(owner_of("sk-flag"))
    assert tenancy.by_key["sk-alice"].owner == "alice"  # the file names a key the flag gave too
    assert tenancy.for_owner("ops").admin and tenancy.for_owner("gone") == Tenant("gone")
    assert Settings(engine="null").tenancy.for_owner("anyone") == OPEN  # no keys: one open tenant
    keys.write_text("sk-a nmae=a\n")
    with pytest.raises(SettingsError, match=r"--api-key-file \(OMNIVOICE_API_KEY_FILE\) .*line 1"):
        Settings(engine="null", api_key_file=str(keys))


def test_serve_refuses_a_bad_key_file_in_one_line_with_exit_2(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text("sk-good\nsk-bad adm1n\n")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OMNIVOICE_")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "supervisor",
            "serve",
            "--engine",
            "null",
            "--api-key-file",
            str(keys),
            "--data-dir",
            str(tmp_path / "data"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=environ,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "line 2: 'adm1n' is not an option" in lines[0] and "sk-good" not in lines[0]


def legacy_voice() -> bytes:
    """A voice as saved before owners existed: no owner in it."""
    old = msgpack.unpackb(SavedVoice("old", 1, "prompt", prompt="calm", seed=3).to_file())
    del old["owner"]
    return bytes(msgpack.packb(old))


def items() -> list[NewItem]:
    return [NewItem({"input": "An item."}, "i0", "wav")]


def test_an_old_sqlite_store_gives_its_jobs_and_keys_to_the_default_owner(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / DB_NAME)  # the jobs table as the first release made it
    db.execute(
        "CREATE TABLE jobs (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, "
        "idempotency_key TEXT UNIQUE, body_sha256 TEXT NOT NULL, created_at REAL NOT NULL, "
        "cancelled_at REAL)"
    )
    db.execute(
        "INSERT INTO jobs (id, idempotency_key, body_sha256, created_at) "
        "VALUES ('job_old', 'nightly-1', 'sha', 1)"
    )
    db.commit()
    db.close()
    store = SqliteJobStore(tmp_path)
    try:
        assert store.job("job_old", owner="default") is not None
        assert store.job("job_old", owner="alice") is None and store.job("job_old") is not None
        assert store.create(items(), "sha", "nightly-1") == ("job_old", False)  # default's key
        job_id, created = store.create(items(), "sha", "nightly-1", owner="alice")
        assert created and job_id != "job_old"
        assert store.create(items(), "sha", "nightly-1", owner="alice") == (job_id, False)
        assert [j["id"] for j in store.jobs_page(10, owner="alice")[0]] == [job_id]
        assert [j["id"] for j in store.jobs_page(10)[0]] == [job_id, "job_old"]
        assert not store.cancel(job_id, owner="default") and store.cancel(job_id, owner="alice")
        assert store.item(job_id, 0, owner="bob") is None and store.item(job_id, 0) is not None
        assert [(c.job_id, c.owner) for c in store.queued(10)] == []  # cancelled: none queued
    finally:
        store.close()


def test_a_postgresql_store_of_version_2_gives_its_rows_to_the_default_owner(pg_url: str) -> None:
    import psycopg

    from supervisor.database import MIGRATIONS, Database
    from supervisor.jobs.postgres_store import PostgresJobStore
    from supervisor.speech.stores.pg_voices import PgVoiceStore

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        for version in (1, 2):
            conn.execute(MIGRATIONS[version - 1].encode())
            conn.execute("INSERT INTO schema_version VALUES (%s)", (version,))
        conn.execute(
            "INSERT INTO jobs (id, idempotency_key, body_sha256, created_at) "
            "VALUES ('job_old', 'nightly-1', 'sha', 1)"
        )
        conn.execute(
            "INSERT INTO items (job_id, n, request, format, state) "
            "VALUES ('job_old', 0, '{\"input\": \"Old.\"}', 'wav', 'queued')"
        )
        conn.execute(
            "INSERT INTO voices (name, created_at, data) VALUES ('old', 1, %s)", (legacy_voice(),)
        )
    db = Database.open(pg_url, "new")
    try:
        store = PostgresJobStore(db, 3.0)
        assert store.job("job_old", owner="default") is not None
        assert store.job("job_old", owner="alice") is None
        assert store.create(items(), "sha", "nightly-1") == ("job_old", False)
        job_id, created = store.create(items(), "sha", "nightly-1", owner="alice")
        assert created and store.create(items(), "sha", "nightly-1", owner="alice") == (
            job_id,
            False,
        )
        assert [j["id"] for j in store.jobs_page(10, owner="alice")[0]] == [job_id]
        assert [j["id"] for j in store.jobs_page(10)[0]] == [job_id, "job_old"]
        assert store.item("job_old", 0, owner="alice") is None
        assert not store.cancel("job_old", owner="alice") and store.cancel(
            "job_old", owner="default"
        )
        assert [(c.job_id, c.owner) for c in store.queued(10)] == [(job_id, "alice")]
        voices = PgVoiceStore(db, pg_url)
        try:
            assert voices.get("old") is not None and voices.get("old").owner == "default"  # type: ignore[union-attr]
            voices.add(SavedVoice("hers", 2, "prompt", prompt="calm", seed=4, owner="alice"))
            voices.reload_all()
            assert voices.get("hers").owner == "alice"  # type: ignore[union-attr]
        finally:
            voices.close()
    finally:
        db.close()


def test_voices_and_lexicons_saved_before_owners_are_the_default_owners(tmp_path: Path) -> None:
    from supervisor.speech.stores.lexicons import LexiconStore
    from supervisor.speech.stores.voices import VoiceStore

    (tmp_path / "voices").mkdir()
    (tmp_path / "voices" / "old.voice").write_bytes(legacy_voice())
    alices = SavedVoice("hers", 2, "prompt", prompt="calm", seed=4, owner="alice")
    (tmp_path / "voices" / "hers.voice").write_bytes(alices.to_file())
    voices = VoiceStore(tmp_path / "voices")
    assert (voices.get("old").owner, voices.get("hers").owner) == ("default", "alice")  # type: ignore[union-attr]
    forged = msgpack.packb({**msgpack.unpackb(legacy_voice()), "name": "bad", "owner": "../x"})
    (tmp_path / "voices" / "bad.voice").write_bytes(forged)
    assert VoiceStore(tmp_path / "voices").get("bad") is None  # skipped, never served

    (tmp_path / "lexicons").mkdir()
    record = {"name": "old", "language": "en", "entries": {"a": "b"}, "updated_at": 1}
    (tmp_path / "lexicons" / "old.json").write_text(json.dumps(record))
    (tmp_path / "lexicons" / "bad.json").write_text(
        json.dumps({**record, "name": "bad", "owner": 7})
    )
    lexicons = LexiconStore(tmp_path / "lexicons")
    assert lexicons.get("old").owner == "default" and lexicons.get("bad") is None  # type: ignore[union-attr]


def test_cache_entries_are_named_for_their_owner_and_purged_by_owner(tmp_path: Path) -> None:
    from supervisor.speech.request.schemas import speech_request
    from supervisor.speech.request.voice import Voice
    from supervisor.speech.stores import result_cache
    from supervisor.speech.stores.result_cache import CachedResult, ResultCache

    settings = Settings(engine="null")
    speech = speech_request({"input": "Hello.", "seed": 1}, settings.speech)
    alices = result_cache.key("ckpt", speech, Voice(), settings.speech, "speech", "alice")
    bobs = result_cache.key("ckpt", speech, Voice(), settings.speech, "speech", "bob")
    assert alices != bobs and alices.split(".")[0] == bobs.split(".")[0]
    shared = Settings(engine="null", cache_shared=True)
    assert "." not in result_cache.key("ckpt", speech, Voice(), shared.speech, "speech", "alice")
    cache = ResultCache(tmp_path, 10_000)
    cache.load()
    for name in (alices, bobs, "f00d"):
        cache.put(name, CachedResult(b"x" * 10, {}))
    assert cache.purge("bob")[0] == 1 and cache.get(bobs) is None and cache.get(alices)
    assert cache.purge()[0] == 2 and cache.sizes == {}

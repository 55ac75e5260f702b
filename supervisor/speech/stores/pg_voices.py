"""Saved voices in PostgreSQL, seen by every server within moments of a change.

Each voice is a row `voices(name, created_at, data, owner)`, `data` the same msgpack a voice
file holds (metadata and the clone prompt, or the design prompt and seed), `owner` its API key's
(supervisor.tenants; the default owner's for a voice saved before owners existed). Requests read voices from memory
(a request never waits on the database); the memory follows the table:

    add / delete    the row is inserted or deleted and `NOTIFY omnivoice_voices, '<name>'` sent
                    in the same transaction, so a listener hears of it only once it is committed
    a listener      one thread per server, on its own connection, `LISTEN`s and reloads the
                    named voice (added: its row; deleted: no row, so it leaves memory)
    a listen        at start and after a lost connection (the database restarted, the network
                    dropped) the thread LISTENs first, then loads every voice, so no change
                    falls between the load and the first notification

A voice's prompt is carried in each request that uses it (sidecars keep no per-name cache), so
this map is the only cache of saved voices to invalidate.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace

import psycopg
from psycopg.errors import UniqueViolation

from supervisor.database import CONNECT_TIMEOUT_S, Connection, Database, StoreUnavailable
from supervisor.errors import Conflict, Unavailable
from supervisor.speech.stores.voices import SavedVoice

log = logging.getLogger("omnivoice.voices")

CHANNEL = "omnivoice_voices"
RECONNECT_S = 1.0  # between attempts to listen again
READY_S = 10.0  # at start, how long the listener gets to connect and load before we load alone
WAKE_S = 1.0  # how often the listener looks whether it should stop
RETRY_S = 5  # Retry-After of a change refused while the database cannot be reached


def taken(name: str) -> Conflict:
    return Conflict(
        f"a voice named {name!r} exists already; delete it first to replace it", param="name"
    )


def unavailable(done: str, exc: StoreUnavailable) -> Unavailable:
    error = Unavailable(
        f"the voice could not be {done}: {exc}; voices already saved still work",
        retry_after_s=RETRY_S,
    )
    error.code = "voice_store_unavailable"
    return error


class PgVoiceStore:
    def __init__(self, db: Database, conninfo: str) -> None:
        self.db = db
        self.conninfo = conninfo
        self.voices: dict[str, SavedVoice] = {}
        self._stop = threading.Event()
        self._loaded = threading.Event()  # the listener listens, and has loaded every voice
        self._listener = threading.Thread(target=self.listen, name="voices-listen", daemon=True)
        self._listener.start()
        if not self._loaded.wait(READY_S):
            self.reload_all()  # serve what there is; the listener catches up when it connects

    # ------------------------------------------------------------ what requests read

    def get(self, name: str) -> SavedVoice | None:
        return self.voices.get(name)

    def list(self) -> list[SavedVoice]:
        return sorted(self.voices.values(), key=lambda v: (v.created_at, v.name))

    def check_free(self, name: str) -> None:
        if name in self.voices:
            raise taken(name)

    # ------------------------------------------------------------ changes

    def add(self, saved: SavedVoice) -> SavedVoice:
        """Insert a new voice; Conflict if the name is taken (also on another server)."""
        self.check_free(saved.name)
        saved.check()

        def insert(conn: Connection) -> None:
            conn.execute(
                "INSERT INTO voices (name, created_at, data, owner) VALUES (%s, %s, %s, %s)",
                (saved.name, saved.created_at, saved.to_file(), saved.owner),
            )
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, saved.name))

        try:
            self.db.run(insert, retry=False)
        except UniqueViolation:
            raise taken(saved.name) from None
        except StoreUnavailable as exc:
            raise unavailable("saved", exc) from None
        self.voices[saved.name] = saved
        log.info("saved voice %r (%s)", saved.name, saved.type)
        return saved

    def delete(self, name: str) -> bool:
        def remove(conn: Connection) -> bool:
            gone = conn.execute("DELETE FROM voices WHERE name = %s", (name,)).rowcount
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, name))
            return bool(gone)

        try:
            deleted = self.db.run(remove)
        except StoreUnavailable as exc:
            raise unavailable("deleted", exc) from None
        self.voices.pop(name, None)
        if deleted:
            log.info("deleted voice %r", name)
        return deleted

    # ------------------------------------------------------------ following the table

    def reload_all(self) -> None:
        rows = self.db.run(
            lambda conn: conn.execute("SELECT name, data, owner FROM voices").fetchall()
        )
        voices: dict[str, SavedVoice] = {}
        for row in rows:
            voice = self.parse(row["name"], bytes(row["data"]), row["owner"])
            if voice is not None:
                voices[voice.name] = voice
        self.voices = voices  # one assignment: a request sees the old map or the new one
        log.info("%d saved voice(s) in the database", len(voices))

    def reload(self, name: str) -> None:
        row = self.db.run(
            lambda conn: conn.execute(
                "SELECT name, data, owner FROM voices WHERE name = %s", (name,)
            ).fetchone()
        )
        voice = None if row is None else self.parse(name, bytes(row["data"]), row["owner"])
        if voice is None:
            self.voices.pop(name, None)
        else:
            self.voices[name] = voice

    @staticmethod
    def parse(name: str, data: bytes, owner: str) -> SavedVoice | None:
        """The row's voice, its owner the row's (a voice saved before owners existed has none
        in its data); None if the row does not read back as one."""
        try:
            voice = replace(SavedVoice.from_file(data), owner=owner)
            voice.check()
        except ValueError as exc:
            log.warning("skipping the voice %r in the database: not readable (%s)", name, exc)
            return None
        return voice if voice.name == name else None

    def listen(self) -> None:
        """The listener thread: hear of changes; after a lost connection, catch up in full."""
        caught_up = True
        while not self._stop.is_set():
            try:
                with psycopg.connect(
                    self.conninfo,
                    autocommit=True,
                    connect_timeout=CONNECT_TIMEOUT_S,
                    application_name=f"omnivoice {self.db.owner}"[:63],
                ) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    # Loaded after LISTEN: a change committed in between is in the load, or its
                    # notification is queued on this connection. Nothing falls in a gap.
                    self.reload_all()
                    self._loaded.set()
                    if not caught_up:
                        log.info("listening to voice changes again")
                    caught_up = True
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=WAKE_S):
                            self.reload(note.payload)
            except (psycopg.Error, StoreUnavailable) as exc:
                if caught_up:
                    log.warning("voice changes: connection lost (%s); reconnecting", exc)
                caught_up = False
                self._stop.wait(RECONNECT_S)

    def close(self) -> None:
        self._stop.set()
        self._listener.join(WAKE_S + 5)

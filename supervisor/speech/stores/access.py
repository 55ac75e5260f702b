"""What one API key may use and manage of the saved voices and lexicons (supervisor.tenants).

A key uses its own voices and lexicons and the shared voices (the key file's `shared-voices:`);
an admin key uses all. A key manages (deletes, replaces) its own, except a shared voice, which
only admin keys manage. Another key's voice or lexicon does not exist for this key: a 404, or
"not found" where a request names it. Names are the server's, not each key's: a name another
key's voice or lexicon holds is taken (409) for this key too, and says nothing more.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, replace

from supervisor.errors import Conflict, Forbidden
from supervisor.speech.request.schemas import SpeechRequest
from supervisor.speech.stores import lexicons
from supervisor.speech.stores.lexicons import Lexicon, LexiconStore
from supervisor.speech.stores.voices import SavedVoice, Voices
from supervisor.tenants import Tenant


@dataclass(frozen=True)
class VoiceAccess:
    """The saved voices as one tenant sees them; `get` is what resolve_voice looks up."""

    store: Voices
    tenant: Tenant
    shared: frozenset[str]

    def uses(self, voice: SavedVoice) -> bool:
        return self.tenant.sees(voice.owner) or voice.name in self.shared

    def get(self, name: str) -> SavedVoice | None:
        found = self.store.get(name)
        return found if found is not None and self.uses(found) else None

    def list(self) -> builtins.list[SavedVoice]:
        return [voice for voice in self.store.list() if self.uses(voice)]

    def check_new(self, name: str) -> None:
        """A 403 for a shared voice's name (unless an admin's), a 409 for a name taken."""
        if name in self.shared and not self.tenant.admin:
            raise Forbidden(
                f"{name!r} is a shared voice's name: only an admin key may make it", param="name"
            )
        if self.store.get(name) is not None and self.get(name) is None:
            raise Conflict(f"the voice name {name!r} is taken; choose another", param="name")
        self.store.check_free(name)

    def may_manage(self, voice: SavedVoice) -> bool:
        """Whether this tenant may delete the voice it sees: its own, not shared (an admin: any)."""
        return self.tenant.admin or voice.name not in self.shared

    def check_manage(self, voice: SavedVoice) -> None:
        """A 403 unless this tenant may delete the voice it sees: its own, not shared."""
        if not self.may_manage(voice):
            raise Forbidden(
                f"{voice.name!r} is a shared voice: only an admin key may delete it", param="name"
            )


@dataclass(frozen=True)
class LexiconAccess:
    """The lexicons as one tenant sees them."""

    store: LexiconStore
    tenant: Tenant

    def get(self, name: str) -> Lexicon | None:
        found = self.store.get(name)
        return found if found is not None and self.tenant.sees(found.owner) else None

    def list(self) -> builtins.list[Lexicon]:
        return [
            lexicon
            for _, lexicon in sorted(self.store.lexicons.items())
            if self.tenant.sees(lexicon.owner)
        ]

    def for_request(self, request: SpeechRequest) -> Lexicon | None:
        """The request's lexicon; a 400 on 'lexicon' if this tenant has none by that name."""
        if request.lexicon is None:
            return None
        found = self.get(request.lexicon)
        if found is None:
            raise lexicons.not_found(request.lexicon)
        return found

    def put(self, lexicon: Lexicon) -> tuple[Lexicon, bool]:
        """Save a lexicon (one it replaces keeps its owner): (what was saved, whether it
        replaced one). A name another tenant's lexicon holds is a 409."""
        saved = lexicon

        def settle(existing: Lexicon | None) -> Lexicon:
            nonlocal saved
            if existing is not None and not self.tenant.sees(existing.owner):
                raise Conflict(
                    f"the lexicon name {lexicon.name!r} is taken; choose another", param="name"
                )
            saved = lexicon if existing is None else replace(lexicon, owner=existing.owner)
            return saved

        replaced = self.store.put(lexicon, settle)
        return saved, replaced

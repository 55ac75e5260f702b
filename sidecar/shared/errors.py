"""The runtime's exception tree.

    OmniVoiceError
    ├── CheckpointError     a checkpoint that is missing, incomplete or malformed
    └── InvalidInput        a request the runtime cannot honour (also a ValueError)
        ├── InvalidInstruct     a voice-design item outside the vocabulary
        └── InvalidAudio        reference audio that is unreadable, empty or silent

Each message is written for the person who sent the request: it names the bad piece and,
where there is a fixed set of valid values, lists them.
"""


class OmniVoiceError(Exception):
    """Base of every error the runtime raises on purpose."""


class CheckpointError(OmniVoiceError):
    """The checkpoint cannot be loaded; the message names the missing or malformed piece."""


class InvalidInput(OmniVoiceError, ValueError):
    """A request the runtime cannot honour."""


class InvalidInstruct(InvalidInput):
    """A voice-design instruct with an unknown, conflicting or duplicated item."""


class InvalidAudio(InvalidInput):
    """Reference audio that cannot be used for a clone prompt."""

"""The names of the audio formats the server writes, in the order the docs list them.

Below the settings, which offer them for --default-response-format, and the speech code
(supervisor/speech/audio/formats.py), which writes each of them.
"""

from __future__ import annotations

FORMATS = ("mp3", "opus", "aac", "flac", "wav", "pcm", "mulaw", "alaw")

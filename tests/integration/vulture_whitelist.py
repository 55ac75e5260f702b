"""Names that `vulture --min-confidence 80` takes for unused, and why each is used; read by
tests/integration/test_dead_code.py as one more source file, where naming a name is using it.

- AudioStream: supervisor/speech/formats.py imports it for type checking only and names it in a
  string (`cast("AudioStream", ...)`), which vulture does not read.
"""

from av.audio.stream import AudioStream

USED = (AudioStream,)

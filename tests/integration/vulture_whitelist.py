"""Names that `vulture --min-confidence 80` takes for unused, and why each is used; read by
tests/integration/test_dead_code.py as one more source file, where naming a name is using it.

- AudioStream: supervisor/speech/audio/formats.py imports it for type checking only and names it in a
  string (`cast("AudioStream", ...)`), which vulture does not read.
- timeout_millis: the argument of `SpanExporter.force_flush` (supervisor/tracing/setup.py), which
  OpenTelemetry's span processors pass by name; a file's flush has nothing to wait for.
"""

from av.audio.stream import AudioStream

timeout_millis = 30000

USED = (AudioStream, timeout_millis)

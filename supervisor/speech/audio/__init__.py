"""Audio out: one chunk's audio as it is handed on (`chunk_audio`), PCM encoded to the response
formats (`formats`), loudness, and what a request asks of its output (`delivery`)."""

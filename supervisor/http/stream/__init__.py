"""The WebSocket speech session's parts (`/v1/audio/speech/stream`, routes/speech_stream.py).

access      who may open a session, and how many are open
session     a session's state: its config, the text waiting, the segments being made, sending
reader      the client's messages: a key, a config, text, the end of an utterance, a close
config      a `session.config` checked as a speech request, and the session's own fields
producer    each segment made as a speech request of its own, AHEAD of the one being sent
writer      each segment's messages and audio, in order
"""

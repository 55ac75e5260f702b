"""The frame loop: the entry point, the pipes, the OmniVoice and ASR loops, and the engines."""

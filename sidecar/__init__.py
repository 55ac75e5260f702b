"""The child process: stdio frame loop and the OmniVoice runtime (torch lives here only)."""

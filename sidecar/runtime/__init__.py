"""The OmniVoice runtime as a library: checkpoint loading, the model, the codec, generation.

Importing this package imports nothing heavy; torch comes in with the modules that need it.
"""

"""Triton kernels of the runtime's hot path, each checked against the eager code it replaces."""

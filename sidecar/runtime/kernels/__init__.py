"""Kernels of the runtime's hot path: Triton kernels, each checked against the eager code it
replaces, and cuDNN's attention over packed segments (optional: `RuntimeOptions.attention`)."""

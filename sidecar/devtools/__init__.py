"""Developer tools: test checkpoints, the reference parity check, and injected test faults."""

"""Audio around the model: reading, resampling, shaping, quality checks and the ASR round trip."""

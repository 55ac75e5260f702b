"""Jobs: the durable store, the runner, and what a job carries."""

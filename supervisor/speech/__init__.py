"""Speech: a request from its body to encoded audio."""

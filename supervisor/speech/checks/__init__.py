"""What is checked of the audio made: which checks failed (`quality`), the ASR round trip behind
its deadline (`asr_round_trip`) and the words timed by the ASR sidecar (`word_timestamps`)."""

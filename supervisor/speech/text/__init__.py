"""What a request's text becomes before the model reads it, on the text alone: SSML and dialogue
scripts read into spans, numbers and the like spelled out (`normalize`, with its per-language
tables in `normalize_rules`), cut into chunks (`chunking`) and, arriving piece by piece, into
sentences (`segmenter`)."""

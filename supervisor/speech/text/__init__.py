"""What happens to a request's text before it is chunked: SSML and dialogue scripts read into
spans (`script`), numbers and the like spelled out (`normalize`), with the per-language tables
that needs (`rules`)."""

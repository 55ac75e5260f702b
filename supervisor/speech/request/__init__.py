"""A speech request as it arrives and what it means: the typed request and its checks (`schemas`,
`field_checks`), other systems' field names (`aliases`), `instructions` read as voice design, and
the voice it speaks with (`voice`)."""

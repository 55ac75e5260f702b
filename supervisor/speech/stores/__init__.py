"""What is kept between requests: saved voices (on disk, `voices`; in PostgreSQL, `pg_voices`),
lexicons, what a key may use of them (`access`), finished answers (`result_cache`) and identical
requests in flight made once (`single_flight`)."""

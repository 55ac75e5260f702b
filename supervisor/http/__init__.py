"""HTTP: the Starlette app, auth, limits, the OpenAPI document, the routes."""

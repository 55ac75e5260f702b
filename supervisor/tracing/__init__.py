"""A timeline for every request, through OpenTelemetry (docs/DEPLOYMENT.md, Tracing)."""

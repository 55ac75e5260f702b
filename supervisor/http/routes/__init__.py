"""HTTP route handlers, one module per group of routes."""

from __future__ import annotations

from starlette.requests import Request

from supervisor.services import Services


def services(request: Request) -> Services:
    svc: Services = request.app.state.services
    return svc

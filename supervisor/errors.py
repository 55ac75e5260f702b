"""The supervisor's exception tree. Each class knows its HTTP status and OpenAI error type.

    ServerError                 500 server_error        something failed on our side
    ├── InvalidRequest          400 invalid_request_error   the request itself is wrong
    │   ├── NotFound            404                     no such voice, model or route
    │   ├── Conflict            409                     a voice by that name exists already
    │   ├── PayloadTooLarge     413                     the body or an upload is over its limit
    │   ├── UnsupportedMedia    415                     a body or upload of a type we do not take
    │   └── Unprocessable       422                     well-formed, but the audio cannot be used
    ├── Unauthorized            401 invalid_request_error   missing or unknown API key
    ├── Forbidden               403 permission_error    a valid key asking for what only an admin key may do
    ├── Overloaded              429 rate_limit_error    the admission queue is full (Retry-After)
    ├── Unavailable             503 server_error        starting, draining, or no device left (Retry-After)
    ├── InsufficientStorage     507 server_error        the server's storage is full or failing (Retry-After)
    ├── RequestTimeout          504 server_error        not done within its request_timeout_s; the rest is cancelled
    └── TaskFailed              500 server_error        a sidecar could not produce the audio
        ├── QualityFailed       500                     the audio failed its quality checks after every retry
        ├── SidecarLost         500                     the sidecar died and the task cannot be retried
        └── PoisonRequest       500                     the request crashed a sidecar by itself; never retried

Every request ends with a result or one of these; `to_body` renders the OpenAI shape
{"error": {"message", "type", "param", "code"}}. `headers` adds Retry-After where there is one,
and `x-should-retry: false` where a retry cannot help but the official client would retry
(it retries 409 and every 5xx).
"""

from __future__ import annotations

import math
from typing import TypedDict

from supervisor.qa_summary import QaSummary


class ErrorObject(TypedDict):
    """OpenAI's error object."""

    message: str
    type: str
    param: str | None
    code: str | None


class ErrorBody(TypedDict):
    error: ErrorObject


class ServerError(Exception):
    """Base of every error a request can end with."""

    status = 500
    type = "server_error"
    code: str | None = "internal_error"
    retryable: bool | None = None  # None: leave it to the client's own rules

    def __init__(
        self, message: str, *, param: str | None = None, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.retry_after_s = retry_after_s

    def to_body(self) -> ErrorBody:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def headers(self) -> dict[str, str]:
        headers = {}
        if self.retry_after_s is not None:
            headers["Retry-After"] = str(max(1, math.ceil(self.retry_after_s)))
        if self.retryable is not None:
            headers["x-should-retry"] = "true" if self.retryable else "false"
        return headers


class InvalidRequest(ServerError):
    """The request cannot be honoured as sent; retrying it unchanged will fail again."""

    status = 400
    type = "invalid_request_error"
    code = "invalid_request"


class NotFound(InvalidRequest):
    """The path names a voice, model or route that does not exist."""

    status = 404
    code = "not_found"


class Conflict(InvalidRequest):
    """The resource exists already (a voice name is taken)."""

    status = 409
    code = "conflict"
    retryable = False


class PayloadTooLarge(InvalidRequest):
    """The request body, or an uploaded file, is larger than the server accepts."""

    status = 413
    code = "request_too_large"


class UnsupportedMedia(InvalidRequest):
    """A body or an uploaded file in a format this route does not take."""

    status = 415
    code = "unsupported_media_type"


class Unprocessable(InvalidRequest):
    """Well-formed, but unusable: reference audio that cannot be decoded, is silent, or too long."""

    status = 422
    code = "unprocessable_audio"


class Unauthorized(ServerError):
    """No API key, or one the server does not know."""

    status = 401
    type = "invalid_request_error"
    code = "invalid_api_key"


class Forbidden(ServerError):
    """A valid API key asking for what only an admin key may do (manage a shared voice)."""

    status = 403
    type = "permission_error"
    code = "admin_key_required"


class Overloaded(ServerError):
    """The admission queue holds more estimated audio than the server accepts; retry later."""

    status = 429
    type = "rate_limit_error"
    code = "queue_full"


class Unavailable(ServerError):
    """The server cannot take work now: starting, draining, or every device has failed."""

    status = 503
    code = "unavailable"


class InsufficientStorage(ServerError):
    """The data directory's disk is full: a new job cannot be stored; retry once space is freed."""

    status = 507
    code = "insufficient_storage"
    retryable = True


class RequestTimeout(ServerError):
    """The request was not answered in full within its deadline (request_timeout_s); what was left is cancelled."""

    status = 504
    code = "request_timeout"


class TaskFailed(ServerError):
    """A sidecar reported that it could not produce the audio."""

    code = "generation_failed"


class QualityFailed(TaskFailed):
    """The audio still failed a quality check after every retry (sidecar/audio/checks.py); `qa` is
    the summary of its checks (supervisor/speech/checks/quality.py), which a job item keeps."""

    code = "qa_failed"

    def __init__(self, message: str, qa: QaSummary | None = None) -> None:
        super().__init__(message)
        self.qa = qa


class SidecarLost(TaskFailed):
    """The sidecar running the task died, and the task may not be retried (shutdown)."""

    code = "sidecar_lost"


class PoisonRequest(TaskFailed):
    """The request was in two killed batches, then killed a sidecar running it alone."""

    code = "request_crashed_sidecar"
    retryable = False


def from_http_status(status: int, detail: str) -> ServerError:
    """Starlette's own HTTPExceptions (no route, wrong method, body over the limit) in our shape."""
    by_status: dict[int, type[ServerError]] = {
        404: NotFound,
        413: PayloadTooLarge,
        415: UnsupportedMedia,
    }
    error = by_status.get(status, InvalidRequest)(detail)
    if status not in by_status:
        error.status = status
        error.code = None
    return error


def from_error_frame(kind: str, message: str) -> ServerError:
    """The error a request ends with when a sidecar answered its item with an `error` frame."""
    if kind == "invalid_input":
        return InvalidRequest(message, param="input")
    if kind == "out_of_memory":
        return TaskFailed(f"out of memory even when generated alone: {message}")
    if kind == "too_large":
        return InvalidRequest(
            f"the audio is too long to return in one piece: {message}", param="input"
        )
    return TaskFailed(f"generation failed: {message}")

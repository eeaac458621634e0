"""Errors of the server and the one table that maps every error class to an HTTP status.

Every protocol answers failures with our error ``code``: the JSON API as
``{"error": {"code", "message"}}`` with the status from :data:`STATUS_BY_CLASS` (see
:func:`status_for`), AG-UI as ``RUN_ERROR.code``, A2A in the JSON-RPC / HTTP error's data.
A response never carries a stack trace: an exception that is not an
:class:`~framework_agents.errors.AgentError` is logged here and answered as ``INTERNAL``
with a fixed message.

A model's failure is the failure of a server upstream of us, so it is a 502 (a timeout
504), never the client's 4xx: not for a refused key (``MODEL_AUTH``: the server's key, which
the client cannot fix), an unknown model (``MODEL_NOT_FOUND``: the server's configuration)
or a request the provider refused (``MODEL_BAD_REQUEST``: the server built it). Only its rate
limit is passed on as 429, since a client that slows down is what helps.
"""

from __future__ import annotations

import logging
from typing import Any

from .. import errors
from ..errors import AgentError

__all__ = [
    "STATUS_BY_CLASS",
    "STATUS_BY_CODE",
    "ApprovalPendingError",
    "BadRequestError",
    "BodyTooLargeError",
    "HostNotAllowedError",
    "NotFoundError",
    "OriginNotAllowedError",
    "ShuttingDownError",
    "UnauthorizedError",
    "UnsupportedMediaTypeError",
    "error_code",
    "error_payload",
    "status_for",
]

logger = logging.getLogger(__name__)


class UnauthorizedError(AgentError):
    """A request without the server's bearer token (HTTP 401)."""

    default_code = "UNAUTHORIZED"


class BodyTooLargeError(AgentError):
    """A request body larger than the server accepts (HTTP 413)."""

    default_code = "BODY_TOO_LARGE"


class BadRequestError(AgentError):
    """A request body that is not JSON or not of the expected shape (HTTP 400)."""

    default_code = "BAD_REQUEST"


class HostNotAllowedError(AgentError):
    """A request whose ``Host`` is neither loopback nor an allowed host (HTTP 400).

    What a DNS-rebinding page sends: its own name, resolved to this server's address.
    """

    default_code = "HOST_NOT_ALLOWED"


class OriginNotAllowedError(AgentError):
    """A state-changing request from a page of another, not allowed, origin (HTTP 403)."""

    default_code = "ORIGIN_NOT_ALLOWED"


class UnsupportedMediaTypeError(AgentError):
    """A request body that is not sent as ``application/json`` (HTTP 415)."""

    default_code = "UNSUPPORTED_MEDIA_TYPE"


class NotFoundError(AgentError):
    """A route or static file that does not exist (HTTP 404)."""

    default_code = "NOT_FOUND"


class ApprovalPendingError(AgentError):
    """A new prompt for a thread whose approval is still open (HTTP 409)."""

    default_code = "APPROVAL_PENDING"


class ShuttingDownError(AgentError):
    """A run asked of a server that is stopping (HTTP 503): retry it on another replica."""

    default_code = "SHUTTING_DOWN"


#: The one error class -> HTTP status table for every route; an error gets the status of
#: the first of its classes (most specific first) listed here, else 500.
STATUS_BY_CLASS: dict[type[AgentError], int] = {
    BadRequestError: 400,
    errors.InvalidArgumentError: 400,
    errors.ThreadIdInvalidError: 400,
    errors.StorageKeyInvalidError: 400,
    errors.SnapshotFieldError: 400,
    HostNotAllowedError: 400,
    UnauthorizedError: 401,
    OriginNotAllowedError: 403,
    NotFoundError: 404,
    errors.CheckpointMissingError: 404,
    errors.MessageNotFoundError: 404,
    errors.MemoryNotFoundError: 404,
    errors.SnapshotMissingError: 404,
    ApprovalPendingError: 409,
    errors.ThreadBusyError: 409,
    errors.AgentBusyError: 409,
    errors.CheckpointConflictError: 409,
    errors.MessageNotEditableError: 409,
    BodyTooLargeError: 413,
    UnsupportedMediaTypeError: 415,
    errors.HitlDecisionError: 422,
    errors.StateNotJsonError: 422,
    errors.ContextOverflowError: 422,
    errors.ModelRateLimitError: 429,
    errors.ModelError: 502,
    errors.ModelAuthError: 502,
    errors.ModelBadRequestError: 502,
    errors.ModelNotFoundError: 502,
    errors.ModelServerError: 502,
    errors.ModelConnectionError: 502,
    errors.ModelTimeoutError: 504,
    # Model errors that are the server's own failure: its structured output, its test script.
    errors.OutputInvalidError: 500,
    errors.ScriptExhaustedError: 500,
    errors.BackendUnavailableError: 503,
    ShuttingDownError: 503,
    errors.LockTimeoutError: 503,
    errors.StorageIOError: 503,
    errors.GraphStoreIOError: 500,  # a StorageIOError of the server's own graph store
}

#: The same table by code, for an error raised with another code than its class's.
STATUS_BY_CODE: dict[str, int] = {
    error.default_code: status for error, status in STATUS_BY_CLASS.items()
}

_INTERNAL_MESSAGE = "the server failed to handle the request; see its log"


def error_code(exc: BaseException) -> str:
    """The error's ``code``; ``"INTERNAL"`` for anything that is not an AgentError."""
    return exc.code if isinstance(exc, AgentError) else "INTERNAL"


def status_for(exc: BaseException) -> int:
    """The HTTP status of ``exc``: that of its most specific class in :data:`STATUS_BY_CLASS`.

    An error raised with another code than its class's (``AgentError("...",
    code="THREAD_BUSY")``) gets the status of that code where the table has it. Anything
    else is a 500.
    """
    if not isinstance(exc, AgentError):
        return 500
    if exc.code != exc.default_code and exc.code in STATUS_BY_CODE:
        return STATUS_BY_CODE[exc.code]
    for kind in type(exc).__mro__:
        status = STATUS_BY_CLASS.get(kind)
        if status is not None:
            return status
    return 500


def error_payload(exc: BaseException) -> dict[str, Any]:
    """``{"code", "message"}`` for ``exc``; internal errors are logged, not described."""
    if isinstance(exc, AgentError):
        return {"code": exc.code, "message": exc.message}
    logger.error("internal error while serving a request", exc_info=exc)
    return {"code": "INTERNAL", "message": _INTERNAL_MESSAGE}

"""Errors of the server and the one table that maps every error code to an HTTP status.

Every protocol answers failures with our error ``code``: the JSON API as
``{"error": {"code", "message"}}`` with the status from :data:`STATUS_BY_CODE`, AG-UI as
``RUN_ERROR.code``, A2A in the JSON-RPC / HTTP error's data. A response never carries a
stack trace: an exception that is not an :class:`~framework_agents.errors.AgentError` is
logged here and answered as ``INTERNAL`` with a fixed message.
"""

from __future__ import annotations

import logging
from typing import Any

from ..errors import AgentError

__all__ = [
    "STATUS_BY_CODE",
    "ApprovalPendingError",
    "BadRequestError",
    "BodyTooLargeError",
    "HostNotAllowedError",
    "NotFoundError",
    "OriginNotAllowedError",
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


#: One code -> HTTP status table for every route; a code not listed is a 500.
STATUS_BY_CODE: dict[str, int] = {
    "BAD_REQUEST": 400,
    "INVALID_ARGUMENT": 400,
    "THREAD_ID_INVALID": 400,
    "STORAGE_KEY_INVALID": 400,
    "SNAPSHOT_FIELD": 400,
    "HOST_NOT_ALLOWED": 400,
    "UNAUTHORIZED": 401,
    "ORIGIN_NOT_ALLOWED": 403,
    "NOT_FOUND": 404,
    "CHECKPOINT_MISSING": 404,
    "MESSAGE_NOT_FOUND": 404,
    "SNAPSHOT_MISSING": 404,
    "APPROVAL_PENDING": 409,
    "THREAD_BUSY": 409,
    "AGENT_BUSY": 409,
    "CHECKPOINT_CONFLICT": 409,
    "MESSAGE_NOT_EDITABLE": 409,
    "BODY_TOO_LARGE": 413,
    "UNSUPPORTED_MEDIA_TYPE": 415,
    "HITL_DECISION": 422,
    "STATE_NOT_JSON": 422,
    "CONTEXT_OVERFLOW": 422,
    "MODEL_ERROR": 502,
    "BACKEND_UNAVAILABLE": 503,
    "LOCK_TIMEOUT": 503,
    "STORAGE_IO": 503,
}

_INTERNAL_MESSAGE = "the server failed to handle the request; see its log"


def error_code(exc: BaseException) -> str:
    """The error's ``code``; ``"INTERNAL"`` for anything that is not an AgentError."""
    return exc.code if isinstance(exc, AgentError) else "INTERNAL"


def status_for(code: str) -> int:
    """The HTTP status of ``code`` (500 for codes not in the table)."""
    return STATUS_BY_CODE.get(code, 500)


def error_payload(exc: BaseException) -> dict[str, Any]:
    """``{"code", "message"}`` for ``exc``; internal errors are logged, not described."""
    if isinstance(exc, AgentError):
        return {"code": exc.code, "message": exc.message}
    logger.error("internal error while serving a request", exc_info=exc)
    return {"code": "INTERNAL", "message": _INTERNAL_MESSAGE}

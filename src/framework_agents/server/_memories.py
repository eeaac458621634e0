"""The memory bank under ``/api/memories``: list, search, read and forget records.

Routes (shapes in ``docs/server.md``)::

    GET    /api/memories?namespace=a/b&q=&k=8&kinds=&as_of=&include_past=  {"hits": [...]}
    GET    /api/memories?namespace=a/b&limit=100&after=&kinds=   {"records", "next_after"}
    GET    /api/memories/{record_id}                              the record
    DELETE /api/memories/{record_id}                              204

A namespace is written with ``/`` between its parts (a part never holds one: the bank
refuses it). With ``q`` the route searches; without it (or with an empty ``q``) it lists a
page of ``limit`` records after the record ``after``, in the order the bank recorded them.
Bad input is the bank's own ``INVALID_ARGUMENT`` (400), an unknown record
``MEMORY_NOT_FOUND`` (404). A server without a bank answers every one of these routes
``404 NOT_FOUND`` saying so.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..bank import MemoryBank, MemoryRecord
from ..errors import InvalidArgumentError, MemoryNotFoundError
from ._api import Endpoint, guarded
from ._errors import NotFoundError
from ._tenants import bank_namespace, client_namespace

__all__ = ["memory_routes", "parse_namespace"]

_FLAGS = {"true": True, "1": True, "false": False, "0": False}


def parse_namespace(value: str | None) -> tuple[str, ...]:
    """``a/b`` as the namespace ``("a", "b")``; the bank checks the parts.

    ``INVALID_ARGUMENT`` when it is missing; an empty part (``a//b``, ``/a``) is the
    bank's refusal of an empty string.
    """
    if value is None or value == "":
        raise InvalidArgumentError("namespace is required: ?namespace=<part>/<part>")
    return tuple(value.split("/"))


def _int(params: QueryParams, name: str, default: int) -> int:
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise InvalidArgumentError(f"{name} must be an integer, not {raw[:40]!r}") from None


def _kinds(params: QueryParams) -> list[str] | None:
    """``kinds=fact,episode`` (repeatable) as a list; ``None``: every kind."""
    kinds = [kind for value in params.getlist("kinds") for kind in value.split(",") if kind]
    return kinds or None


def _flag(params: QueryParams, name: str) -> bool:
    raw = params.get(name, "false").lower()
    if raw not in _FLAGS:
        raise InvalidArgumentError(f"{name} must be true or false, not {raw[:40]!r}")
    return _FLAGS[raw]


def _moment(params: QueryParams, name: str) -> datetime | None:
    """An ISO 8601 time with its offset (the bank refuses a naive one)."""
    raw = params.get(name)
    if not raw:
        return None
    try:
        return datetime.fromisoformat(raw)
    except ValueError:
        raise InvalidArgumentError(
            f"{name} must be an ISO 8601 time with an offset, not {raw[:40]!r}"
        ) from None


def _shown(record: MemoryRecord, tenants: bool) -> dict[str, Any]:
    """A record as the client sees it (with tenants, its namespace without the tenant part)."""
    data = record.to_dict()
    if tenants:
        data["namespace"] = list(client_namespace(record.namespace) or ())
    return data


def memory_routes(bank: MemoryBank | None, *, tenants: bool = False) -> Sequence[Route]:
    """The ``/api/memories`` routes over ``bank`` (``None``: each answers 404).

    ``tenants``: every namespace is the current tenant's (``_tenants.bank_namespace``), and
    a record of another tenant answers as one that does not exist.
    """

    def _bank() -> MemoryBank:
        if bank is None:
            raise NotFoundError(
                "this server has no memory bank: create_app(..., bank=...) or serve --bank URL"
            )
        return bank

    async def memories(request: Request) -> Response:
        """``GET /api/memories``: a search with ``q``, else a page of the namespace's records."""
        served = _bank()
        params = request.query_params
        namespace = parse_namespace(params.get("namespace"))
        if tenants:
            namespace = bank_namespace(namespace)
        kinds = _kinds(params)
        query = params.get("q") or None
        if query is not None:
            hits = await served.search(
                query,
                namespace=namespace,
                k=_int(params, "k", 8),
                kinds=kinds,
                as_of=_moment(params, "as_of"),
                include_past=_flag(params, "include_past"),
            )
            shown = [{"record": _shown(h.record, tenants), "score": h.score} for h in hits]
            return JSONResponse({"hits": shown})
        limit = _int(params, "limit", 100)
        after = params.get("after") or None
        if tenants and after is not None and await _mine(after) is None:
            # Another tenant's record continues no listing: the bank's own refusal of an
            # id it does not hold, word for word.
            raise InvalidArgumentError(f"after={after!r} is not a record of this bank")
        page = await served.list(namespace, kinds=kinds, limit=limit, after=after)
        more = len(page) == limit and bool(
            await served.list(namespace, kinds=kinds, limit=1, after=page[-1].id)
        )
        return JSONResponse(
            {
                "records": [_shown(record, tenants) for record in page],
                "next_after": page[-1].id if more else None,
            }
        )

    async def _mine(record_id: str) -> MemoryRecord | None:
        """The record, if it exists and (with tenants) is the current tenant's."""
        record = await _bank().get(record_id)
        if record is None or (tenants and client_namespace(record.namespace) is None):
            return None
        return record

    async def read(request: Request) -> Response:
        """``GET /api/memories/{record_id}``: the record's latest revision."""
        record_id = request.path_params["record_id"]
        record = await _mine(record_id)
        if record is None:
            raise MemoryNotFoundError(f"no memory record {record_id!r}")
        return JSONResponse(_shown(record, tenants))

    async def forget(request: Request) -> Response:
        """``DELETE /api/memories/{record_id}``: forget the record and every revision."""
        record_id = request.path_params["record_id"]
        if await _mine(record_id) is None or not await _bank().forget(record_id):
            raise MemoryNotFoundError(f"no memory record {record_id!r}")
        return Response(status_code=204)

    handlers: list[tuple[str, Endpoint, str]] = [
        ("/api/memories", memories, "GET"),
        ("/api/memories/{record_id}", read, "GET"),
        ("/api/memories/{record_id}", forget, "DELETE"),
    ]
    return [Route(path, guarded(fn), methods=[method]) for path, fn, method in handlers]

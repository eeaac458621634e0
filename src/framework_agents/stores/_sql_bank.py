"""The memory bank of the SQL stores: one backend's logic over SQLite and PostgreSQL (internal).

:class:`SqlBankBackend` implements :class:`~framework_agents.bank._backend.BankBackend`
once, as steps (``stores._sql``), over four tables (``fa_bank_`` prefixed)::

    fa_bank_records    (id, namespace, key, revision, valid_from, valid_to, expires_at)
                       the latest revision's number and the record's world clock and
                       expiry; indexed on (namespace, key, valid_from, id): a key's
                       timeline, of which a remember reads two neighbours
    fa_bank_revisions  (id, revision, body, vector)      every revision: ``row_to_json``
                       as UTF-8 JSON bytes, and the embedder's vector
    fa_bank_changes    (seq, record_id)                  the change log (no text)
    fa_bank_jobs       (created, id, namespace, payload) pending extraction jobs

A record's ``valid_to`` is the one in ``fa_bank_records`` (a newer record of its key
closes it without a new revision). Every write is one transaction that first *claims*
the bank (:attr:`BankSql.claim`): it reads the last seq of the change log while holding
the bank's write lock until it commits, so log entries are numbered in commit order and
a reader of ``seq > N`` never misses an entry committed later with a smaller seq.
SQLite's single writer (``BEGIN IMMEDIATE``) is that lock; PostgreSQL, whose sequences
commit out of order, locks a one-row counter (``fa_bank_counter``) and moves it in the
same transaction. Reads are single statements (one snapshot each).

The statements are written once (:func:`bank_sql`); a backend gives its claim, how it
tests membership in a list of ids, and its parameter style.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, NamedTuple, TypeVar

from ..bank._base import (
    Job,
    Revision,
    Row,
    check_namespace,
    namespace_text,
    place_on_timeline,
    row_from_json,
    row_to_json,
)
from ..errors import InvalidArgumentError, MemoryCorruptError
from ._sql import Query, SqlDb, Steps

__all__ = ["BankSql", "SqlBankBackend", "bank_sql"]

T = TypeVar("T")

#: The columns every row query selects, in this order (``r``: records, ``v``: revisions).
ROW_COLUMNS = "r.id, r.valid_to, v.revision, v.body, v.vector"


class BankSql(NamedTuple):
    """The statements of the bank logic, in one backend's SQL (named parameters).

    ``ids`` parameters are lists of record ids in the form the backend's ``array`` gives.
    Row queries select :data:`ROW_COLUMNS`.
    """

    #: -> ``(last seq,)``, holding the bank's write lock until the transaction ends.
    claim: str
    #: ``seq``: the log's last seq is now ``seq`` (``""``: the log itself says it).
    advance: str
    #: ``ids`` -> the latest revisions of those records.
    latest: str
    #: ``id`` -> every revision of the record, oldest first.
    history: str
    #: ``namespace``, ``key``, ``valid_from``, ``id`` -> the latest revisions of the
    #: records of that key just before and just after that place on its timeline.
    neighbours: str
    #: ``ids`` -> the ids among them that are stored.
    known: str
    #: ``id``, ``namespace``, ``key``, ``revision``, ``valid_from``, ``valid_to``,
    #: ``expires_at``: a new record.
    add_record: str
    #: ``id``, ``revision``, ``body``, ``vector``: a new revision.
    add_revision: str
    #: ``id``, ``valid_to``: a record closed (or reopened) on its key's timeline.
    set_valid_to: str
    #: ``id``, ``revision``: the record's latest revision.
    set_revision: str
    #: ``seq``, ``record_id``: a log entry.
    log: str
    #: ``after`` -> ``(seq, record_id)`` of the entries after it, in seq order.
    changes: str
    #: ``ids``: drop those records' revisions.
    drop_revisions: str
    #: ``ids``: drop those records.
    drop_records: str
    #: ``id``, ``namespace``, ``payload``: a pending job (nothing if its id is stored).
    add_job: str
    #: ``id``: drop a pending job (count: 1 if it was pending).
    drop_job: str
    #: -> ``(id, namespace, payload)`` of every pending job, oldest first.
    jobs: str


_ROWS = f"SELECT {ROW_COLUMNS} FROM {{s}}.fa_bank_records r JOIN {{s}}.fa_bank_revisions v "

_KEYED = (
    _ROWS + "ON v.id = r.id AND v.revision = r.revision "
    "WHERE r.namespace = :namespace AND r.key = :key"
)

#: The statements both backends run, with ``{s}.`` before each table, ``:name`` parameters
#: and ``{in_ids}`` for membership in the list of ids ``:ids``.
_STATEMENTS = {
    "latest": _ROWS + "ON v.id = r.id AND v.revision = r.revision WHERE r.id {in_ids}",
    "history": _ROWS + "ON v.id = r.id WHERE r.id = :id ORDER BY v.revision",
    "neighbours": f"SELECT * FROM ({_KEYED} AND (r.valid_from < :valid_from OR "
    "(r.valid_from = :valid_from AND r.id < :id)) ORDER BY r.valid_from DESC, r.id DESC "
    f"LIMIT 1) AS b1 UNION ALL SELECT * FROM ({_KEYED} AND (r.valid_from > :valid_from OR "
    "(r.valid_from = :valid_from AND r.id > :id)) ORDER BY r.valid_from, r.id LIMIT 1) AS b2",
    "known": "SELECT id FROM {s}.fa_bank_records WHERE id {in_ids}",
    "add_record": "INSERT INTO {s}.fa_bank_records "
    "(id, namespace, key, revision, valid_from, valid_to, expires_at) "
    "VALUES (:id, :namespace, :key, :revision, :valid_from, :valid_to, :expires_at)",
    "add_revision": "INSERT INTO {s}.fa_bank_revisions (id, revision, body, vector) "
    "VALUES (:id, :revision, :body, :vector)",
    "set_valid_to": "UPDATE {s}.fa_bank_records SET valid_to = :valid_to WHERE id = :id",
    "set_revision": "UPDATE {s}.fa_bank_records SET revision = :revision WHERE id = :id",
    "log": "INSERT INTO {s}.fa_bank_changes (seq, record_id) VALUES (:seq, :record_id)",
    "changes": "SELECT seq, record_id FROM {s}.fa_bank_changes WHERE seq > :after ORDER BY seq",
    "drop_revisions": "DELETE FROM {s}.fa_bank_revisions WHERE id {in_ids}",
    "drop_records": "DELETE FROM {s}.fa_bank_records WHERE id {in_ids}",
    "add_job": "INSERT INTO {s}.fa_bank_jobs (id, namespace, payload) "
    "VALUES (:id, :namespace, :payload) ON CONFLICT (id) DO NOTHING",
    "drop_job": "DELETE FROM {s}.fa_bank_jobs WHERE id = :id",
    "jobs": "SELECT id, namespace, payload FROM {s}.fa_bank_jobs ORDER BY created",
}

_PARAMETER = re.compile(r"(?<![:\w]):([a-z_]+)")


def bank_sql(
    *, claim: str, advance: str, in_ids: str, schema: str | None, named: str = ":{}"
) -> BankSql:
    """The bank's statements for one backend.

    ``claim`` and ``advance`` as :class:`BankSql` says; ``in_ids`` tests ``:ids`` (e.g.
    ``= ANY(:ids)``); ``schema`` goes before each table (``None``: none); ``named`` is
    the backend's parameter style (``%({})s`` for psycopg). ``claim``, ``advance`` and
    ``in_ids`` are written like the statements (``{s}.``, ``:name``).
    """
    prefix = "" if schema is None else f'"{schema}".'

    def edit(text: str) -> str:
        text = text.replace("{in_ids}", in_ids).replace("{s}.", prefix)
        return _PARAMETER.sub(lambda m: named.format(m.group(1)), text)

    return BankSql(*map(edit, BankSql(claim=claim, advance=advance, **_STATEMENTS)))


def _body(row: Row) -> bytes:
    text = json.dumps(row_to_json(row), ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8", "surrogatepass")


class SqlBankBackend:
    """The bank of a SQL database (see the module docstring); ``bank(db)`` of a store."""

    def __init__(self, db: SqlDb, sql: BankSql, array: Callable[[list[str]], Any]) -> None:
        """The bank in ``db``, with the backend's statements and list-of-ids parameter."""
        self._db = db
        self._sql = sql
        self._array = array

    def __repr__(self) -> str:
        """The backend and where its tables are."""
        return f"{type(self).__name__}({self._db.place})"

    async def _transact(self, steps: Callable[[], Steps[T]]) -> T:
        """Run ``steps()`` in one write transaction (hook: how the backend runs them)."""
        return await self._db.transact(steps)

    # -- rows --------------------------------------------------------------------------

    def _row(self, found: Sequence[Any]) -> Row:
        """A stored row (:data:`ROW_COLUMNS`) as a :class:`Row`; MEMORY_CORRUPT if wrong."""
        record_id, valid_to, revision, body, vector = found
        where = f"memory record {record_id!r} in {self._db.place}"
        try:
            data = json.loads(bytes(body).decode("utf-8", "surrogatepass"))
        except (ValueError, TypeError):
            raise MemoryCorruptError(f"{where}: revision {revision} is not JSON") from None
        row = row_from_json(data, None if vector is None else bytes(vector), where=where)
        if row.id != record_id or row.revision != revision:
            raise MemoryCorruptError(f"{where}: revision {revision} holds another revision")
        if valid_to is not None and not isinstance(valid_to, int):
            raise MemoryCorruptError(f"{where}: valid_to {valid_to!r:.40} is not a time")
        return replace(row, valid_to=valid_to)

    def _latest(self, ids: Sequence[str]) -> Steps[dict[str, Row]]:
        if not ids:
            return {}
        found = yield Query(self._sql.latest, {"ids": self._array(list(ids))}, "all")
        return {row.id: row for row in map(self._row, found)}

    def _claim(self) -> Steps[int]:
        (last,) = yield Query(self._sql.claim, {}, "one")
        return int(last)

    def _append_log(self, last: int, ids: Sequence[str]) -> Steps[None]:
        """Log entries ``last + 1, ...`` for ``ids`` (in order), and move the counter."""
        if not ids:
            return
        entries = [{"seq": last + n, "record_id": i} for n, i in enumerate(ids, start=1)]
        yield Query(self._sql.log, entries, "many")
        if self._sql.advance:
            yield Query(self._sql.advance, {"seq": last + len(ids)})

    # -- the contract ------------------------------------------------------------------

    async def insert(self, rows: Sequence[Row], *, job: str | None = None) -> list[Row] | None:
        """Store new records (see :meth:`~framework_agents.bank._backend.BankBackend.insert`)."""
        sql = self._sql

        def write() -> Steps[list[Row] | None]:
            last = yield from self._claim()
            if job is not None and not (yield Query(sql.drop_job, {"id": job}, "count")):
                return None
            stored = yield from self._latest(list(dict.fromkeys(r.id for r in rows)))
            new: dict[str, Row] = {}
            closed: dict[str, int | None] = {}
            out: list[Row] = []
            for row in rows:
                if row.id in stored:
                    out.append(stored[row.id])
                    continue
                if row.key is not None:
                    row, closings = yield from self._place(row, new, closed)
                    for record_id, valid_to in closings:
                        if record_id in new:
                            new[record_id] = replace(new[record_id], valid_to=valid_to)
                        else:
                            closed[record_id] = valid_to
                new[row.id] = stored[row.id] = row
                out.append(row)
            if closed:
                yield Query(
                    sql.set_valid_to,
                    [{"id": i, "valid_to": v} for i, v in closed.items()],
                    "many",
                )
            if new:
                yield Query(sql.add_record, [_record_params(r) for r in new.values()], "many")
                yield Query(sql.add_revision, [_revision_params(r) for r in new.values()], "many")
            yield from self._append_log(last, [*closed, *new])
            # A closing may have changed a row returned above (two rows of one key).
            return [new.get(r.id, r) for r in out]

        return await self._transact(write)

    def _place(
        self, row: Row, new: dict[str, Row], closed: dict[str, int | None]
    ) -> Steps[tuple[Row, list[tuple[str, int | None]]]]:
        """``row`` placed on its key's timeline (``place_on_timeline``).

        The stored records it can touch are its two neighbours (read through the index on
        ``(namespace, key, valid_from, id)``, not the key's whole history), as this write
        left them (``closed``), beside the rows of its key this write adds (``new``).
        """
        params = {
            "namespace": namespace_text(row.namespace),
            "key": row.key,
            "valid_from": row.valid_from,
            "id": row.id,
        }
        found = yield Query(self._sql.neighbours, params, "all")
        siblings = [
            replace(s, valid_to=closed[s.id]) if s.id in closed else s
            for s in map(self._row, found)
        ]
        siblings += [r for r in new.values() if (r.namespace, r.key) == (row.namespace, row.key)]
        return place_on_timeline(siblings, row)

    async def revise(self, record_id: str, change: Revision) -> Row | None:
        """Append a revision (see :meth:`~framework_agents.bank._backend.BankBackend.revise`)."""
        sql = self._sql

        def write() -> Steps[Row | None]:
            last = yield from self._claim()
            stored = (yield from self._latest([record_id])).get(record_id)
            if stored is None:
                return None
            row = change.after(stored)
            yield Query(sql.add_revision, [_revision_params(row)], "many")
            yield Query(sql.set_revision, {"id": record_id, "revision": row.revision})
            yield from self._append_log(last, [record_id])
            return row

        return await self._transact(write)

    async def latest(self, ids: Sequence[str]) -> list[Row]:
        """The latest revisions of the stored records among ``ids`` (in their order)."""
        if not ids:
            return []
        params = {"ids": self._array(list(dict.fromkeys(ids)))}
        found = await self._db.query(Query(self._sql.latest, params, "all"))
        rows = {row.id: row for row in map(self._row, found)}
        return [rows[i] for i in ids if i in rows]

    async def revisions(self, record_id: str) -> list[Row]:
        """Every revision of ``record_id``, oldest first."""
        found = await self._db.query(Query(self._sql.history, {"id": record_id}, "all"))
        return [self._row(f) for f in found]

    async def changes(self, after: int) -> list[tuple[int, str]]:
        """The log entries after ``after`` (a range read of the log's primary key)."""
        found = await self._db.query(Query(self._sql.changes, {"after": after}, "all"))
        return [(int(seq), str(record_id)) for seq, record_id in found]

    async def delete(self, ids: Sequence[str]) -> int:
        """Remove the records among ``ids`` with every revision and vector; how many."""
        if not ids:
            return 0
        sql = self._sql
        wanted = {"ids": self._array(list(dict.fromkeys(ids)))}

        def write() -> Steps[int]:
            last = yield from self._claim()
            found = [r[0] for r in (yield Query(sql.known, wanted, "all"))]
            if found:
                gone = {"ids": self._array(found)}
                yield Query(sql.drop_revisions, gone)
                yield Query(sql.drop_records, gone)
                yield from self._append_log(last, found)
            return len(found)

        removed = await self._transact(write)
        if removed:
            await self._forgotten()
        return removed

    async def _forgotten(self) -> None:
        """After text was deleted: what the backend does so no copy of it stays (hook)."""

    # -- jobs --------------------------------------------------------------------------

    async def add_job(self, job: Job) -> None:
        """Store a pending job (nothing if a job of that id is stored)."""
        params = {
            "id": job.id,
            "namespace": namespace_text(job.namespace),
            "payload": bytes(job.payload),
        }
        await self._transact(lambda: _one(Query(self._sql.add_job, params)))

    async def jobs(self) -> list[Job]:
        """The pending jobs, oldest first (MEMORY_CORRUPT for one of the wrong shape)."""
        found = await self._db.query(Query(self._sql.jobs, {}, "all"))
        jobs = []
        for job_id, namespace, payload in found:
            try:
                parts = check_namespace(json.loads(namespace))
            except (ValueError, TypeError, InvalidArgumentError):
                raise MemoryCorruptError(
                    f"extraction job {job_id!r} in {self._db.place}: its namespace is invalid"
                ) from None
            jobs.append(Job(job_id, parts, bytes(payload)))
        return jobs

    async def drop_job(self, job_id: str) -> None:
        """Remove a pending job (its payload's text with it)."""
        dropped = await self._transact(
            lambda: _one(Query(self._sql.drop_job, {"id": job_id}, "count"))
        )
        if dropped:
            await self._forgotten()

    async def close(self) -> None:
        """Nothing to release: the store closes the database."""


def _one(query: Query) -> Steps[Any]:
    return (yield query)


def _record_params(row: Row) -> dict[str, Any]:
    return {
        "id": row.id,
        "namespace": namespace_text(row.namespace),
        "key": row.key,
        "revision": row.revision,
        "valid_from": row.valid_from,
        "valid_to": row.valid_to,
        "expires_at": row.expires_at,
    }


def _revision_params(row: Row) -> dict[str, Any]:
    return {"id": row.id, "revision": row.revision, "body": _body(row), "vector": row.vector}

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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any, NamedTuple, TypeVar

from .._crypto import Cipher, DataKey, Place, is_sealed
from ..bank._base import (
    Job,
    Revision,
    Row,
    SealingBackend,
    check_namespace,
    namespace_text,
    place_on_timeline,
    row_from_json,
    row_to_json,
)
from ..errors import InvalidArgumentError, MemoryCorruptError, StoreIntegrityError
from ._sql import Query, SqlDb, Steps

__all__ = ["BankSql", "SqlBankBackend", "bank_sql"]

T = TypeVar("T")

#: The columns every row query selects, in this order (``r``: records, ``v``: revisions).
ROW_COLUMNS = "r.id, r.valid_to, v.revision, v.body, v.vector, r.namespace"


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
    #: ``ids`` (namespace texts) -> ``(namespace, wrapped)`` of their data keys.
    get_keys: str
    #: -> ``(namespace, wrapped)`` of every data key.
    all_keys: str
    #: ``namespace``, ``wrapped``: a new data key.
    add_key: str
    #: ``namespace``, ``wrapped``: a data key sealed again.
    set_key: str
    #: ``ids`` (namespace texts): destroy those data keys.
    drop_keys: str
    #: -> ``(id, revision, body, vector, namespace)`` of every revision.
    all_revisions: str
    #: ``id``, ``revision``, ``body``, ``vector``: a revision sealed in place.
    set_body: str
    #: ``id``, ``payload``: a job's payload sealed in place.
    set_payload: str


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
    "get_keys": "SELECT namespace, wrapped FROM {s}.fa_bank_keys WHERE namespace {in_ids}",
    "all_keys": "SELECT namespace, wrapped FROM {s}.fa_bank_keys",
    "add_key": "INSERT INTO {s}.fa_bank_keys (namespace, wrapped) VALUES (:namespace, :wrapped)",
    "set_key": "UPDATE {s}.fa_bank_keys SET wrapped = :wrapped WHERE namespace = :namespace",
    "drop_keys": "DELETE FROM {s}.fa_bank_keys WHERE namespace {in_ids}",
    "all_revisions": "SELECT v.id, v.revision, v.body, v.vector, r.namespace FROM "
    "{s}.fa_bank_revisions v JOIN {s}.fa_bank_records r ON r.id = v.id",
    "set_body": "UPDATE {s}.fa_bank_revisions SET body = :body, vector = :vector "
    "WHERE id = :id AND revision = :revision",
    "set_payload": "UPDATE {s}.fa_bank_jobs SET payload = :payload WHERE id = :id",
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


class SqlBankBackend(SealingBackend):
    """The bank of a SQL database (see the module docstring); ``bank(db)`` of a store."""

    def __init__(self, db: SqlDb, sql: BankSql, array: Callable[[list[str]], Any]) -> None:
        """The bank in ``db``, with the backend's statements and list-of-ids parameter."""
        self._db = db
        self._sql = sql
        self._array = array
        # Data keys (sealed by the cipher in fa_bank_keys) read from the database, by
        # namespace text (never one a transaction made: it may roll back).
        self._dkeys: dict[str, DataKey] = {}

    # -- data keys -----------------------------------------------------------------------

    def _keys(self, namespaces: Iterable[str], *, create: bool) -> Steps[dict[str, DataKey]]:
        """The data keys of ``namespaces`` (made and stored when ``create``)."""
        cipher = self._cipher
        wanted = set(namespaces)
        if cipher is None or not wanted:
            return {}
        out = {n: self._dkeys[n] for n in wanted if n in self._dkeys}
        missing = sorted(wanted - out.keys())
        if missing:
            found = yield Query(self._sql.get_keys, {"ids": self._array(missing)}, "all")
            for namespace, wrapped in found:
                key = cipher.unwrap(bytes(wrapped), Place("bank.data-key", namespace))
                out[namespace] = self._dkeys[namespace] = key
        if create:
            for namespace in sorted(wanted - out.keys()):
                key = cipher.new_data_key()
                wrapped = cipher.wrap(key, Place("bank.data-key", namespace))
                yield Query(self._sql.add_key, {"namespace": namespace, "wrapped": wrapped})
                out[namespace] = key  # not cached: the transaction may roll back
        return out

    async def _read_keys(self, namespaces: Iterable[str]) -> dict[str, DataKey]:
        wanted = set(namespaces)
        if self._cipher is None or wanted <= self._dkeys.keys():
            return {n: self._dkeys[n] for n in wanted if n in self._dkeys}
        return await self._db.snapshot(lambda: self._keys(wanted, create=False))

    def _open(self, keys: dict[str, DataKey], namespace: str, data: bytes, place: Place) -> bytes:
        """The plain bytes of a sealed bank value (STORE_INTEGRITY otherwise)."""
        assert self._cipher is not None
        if not is_sealed(data):
            self._cipher.open(data, place)  # raises: plain in an encrypted store
        key = keys.get(namespace)
        if key is None:
            raise StoreIntegrityError(
                f"{place.describe()} is sealed under the data key of namespace "
                f"{namespace} that no longer exists (forgotten); left as it is"
            )
        return key.open(data, place)

    def _revision_params(self, row: Row, keys: dict[str, DataKey]) -> dict[str, Any]:
        params = _revision_params(row)
        if self._cipher is not None:
            key = keys[namespace_text(row.namespace)]
            number = str(row.revision)
            params["body"] = key.seal(params["body"], Place("bank.revision", row.id, number))
            if row.vector is not None:
                params["vector"] = key.seal(row.vector, Place("bank.vector", row.id, number))
        return params

    async def _drop_keys(self, under: Callable[[str], bool]) -> int:
        # Whatever the keys sealed (journals, unvacuumed pages, backups) is unreadable
        # from then on; _forgotten() lets no copy of the text stay.
        def write() -> Steps[int]:
            found = yield Query(self._sql.all_keys, {}, "all")
            doomed = [n for n, _w in found if under(n)]
            if doomed:
                yield Query(self._sql.drop_keys, {"ids": self._array(doomed)})
            return len(doomed)

        gone = await self._transact(write)
        self._dkeys = {}  # before any await: no write seals under a key gone
        if gone:
            await self._forgotten()
        return gone

    async def _reseal(self, cipher: Cipher, migrate: bool) -> int:
        # One transaction; migrate: the plain revisions and job payloads too.
        sql = self._sql

        def write() -> Steps[int]:
            yield from self._claim()
            written = 0
            for namespace, wrapped in (yield Query(sql.all_keys, {}, "all")):
                again = cipher.reseal(bytes(wrapped), Place("bank.data-key", namespace))
                if again is not None:
                    yield Query(sql.set_key, {"namespace": namespace, "wrapped": again})
                    written += 1
            if not migrate:
                return written
            revisions = yield Query(sql.all_revisions, {}, "all")
            plain = [r for r in revisions if not is_sealed(bytes(r[2]))]
            jobs = [j for j in (yield Query(sql.jobs, {}, "all")) if not is_sealed(bytes(j[2]))]
            keys = yield from self._keys([r[4] for r in plain] + [j[1] for j in jobs], create=True)
            for record_id, revision, body, vector, namespace in plain:
                key, number = keys[namespace], str(revision)
                sealed = {
                    "id": record_id,
                    "revision": revision,
                    "body": key.seal(bytes(body), Place("bank.revision", record_id, number)),
                    "vector": None
                    if vector is None
                    else key.seal(bytes(vector), Place("bank.vector", record_id, number)),
                }
                yield Query(sql.set_body, sealed)
            for job_id, namespace, payload in jobs:
                sealed_payload = keys[namespace].seal(bytes(payload), Place("bank.job", job_id))
                yield Query(sql.set_payload, {"id": job_id, "payload": sealed_payload})
            return written + len(plain) + len(jobs)

        return await self._transact(write)

    def __repr__(self) -> str:
        """The backend and where its tables are."""
        return f"{type(self).__name__}({self._db.place})"

    async def _transact(self, steps: Callable[[], Steps[T]]) -> T:
        """Run ``steps()`` in one write transaction (hook: how the backend runs them)."""
        return await self._db.transact(steps)

    # -- rows --------------------------------------------------------------------------

    def _row(self, found: Sequence[Any], keys: dict[str, DataKey] | None = None) -> Row:
        """A stored row (:data:`ROW_COLUMNS`) as a :class:`Row`; MEMORY_CORRUPT if wrong.

        With ``cipher=``, ``keys`` holds the data key of its namespace (STORE_INTEGRITY
        when it does not authenticate).
        """
        record_id, valid_to, revision, body, vector, namespace = found
        where = f"memory record {record_id!r} in {self._db.place}"
        if self._cipher is not None:
            number = str(revision)
            body = self._open(
                keys or {}, namespace, bytes(body), Place("bank.revision", record_id, number)
            )
            if vector is not None:
                vector = self._open(
                    keys or {}, namespace, bytes(vector), Place("bank.vector", record_id, number)
                )
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
        keys = yield from self._keys([f[5] for f in found], create=False)
        return {row.id: row for row in (self._row(f, keys) for f in found)}

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
                keys = yield from self._keys(
                    [namespace_text(r.namespace) for r in new.values()], create=True
                )
                yield Query(sql.add_record, [_record_params(r) for r in new.values()], "many")
                yield Query(
                    sql.add_revision, [self._revision_params(r, keys) for r in new.values()], "many"
                )
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
        keys = yield from self._keys([f[5] for f in found], create=False)
        siblings = [
            replace(s, valid_to=closed[s.id]) if s.id in closed else s
            for s in (self._row(f, keys) for f in found)
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
            keys = yield from self._keys([namespace_text(row.namespace)], create=True)
            yield Query(sql.add_revision, [self._revision_params(row, keys)], "many")
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
        keys = await self._read_keys(f[5] for f in found)
        rows = {row.id: row for row in (self._row(f, keys) for f in found)}
        return [rows[i] for i in ids if i in rows]

    async def revisions(self, record_id: str) -> list[Row]:
        """Every revision of ``record_id``, oldest first."""
        found = await self._db.query(Query(self._sql.history, {"id": record_id}, "all"))
        keys = await self._read_keys(f[5] for f in found)
        return [self._row(f, keys) for f in found]

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
        namespace = namespace_text(job.namespace)
        payload = bytes(job.payload)

        def write() -> Steps[None]:
            sealed = payload
            if self._cipher is not None:
                keys = yield from self._keys([namespace], create=True)
                sealed = keys[namespace].seal(payload, Place("bank.job", job.id))
            params = {"id": job.id, "namespace": namespace, "payload": sealed}
            yield Query(self._sql.add_job, params)

        await self._transact(write)

    async def jobs(self) -> list[Job]:
        """The pending jobs, oldest first (MEMORY_CORRUPT for one of the wrong shape)."""
        found = await self._db.query(Query(self._sql.jobs, {}, "all"))
        keys = await self._read_keys(f[1] for f in found)
        jobs = []
        for job_id, namespace, payload in found:
            if self._cipher is not None:
                place = Place("bank.job", job_id)
                payload = self._open(keys, namespace, bytes(payload), place)
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

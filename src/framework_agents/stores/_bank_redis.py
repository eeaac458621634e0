r"""The Redis backend of a memory bank (``open_store("redis://...").bank()``).

Keys, under the store's prefix ``<p>`` (default ``fa:``)::

    <p>bank:rec:<id>      hash    one record: n (its latest revision), to (valid_to in
                                  microseconds, "" while it holds), k and m (its key
                                  digest and timeline member, "" without a key), j<i>
                                  (revision i as JSON, without valid_to), v<i> (revision
                                  i's vector, float32 bytes)
    <p>bank:key:<digest>  zset    the key timeline of one (namespace, key): members
                                  "<valid_from + 2**63, 20 digits>:<id>", all scored 0, so
                                  the lexical order is (valid_from, id); digest = sha256
                                  of the namespace's JSON, NUL, the key
    <p>bank:log           stream  the change log: entry "<seq>-0" {r: <record id>}, no text
    <p>bank:seq           int     INCR for each log entry, inside the writing script
    <p>bank:jobs          hash    job id -> "<order>\n<JSON: namespace, payload>"
    <p>bank:jobseq        int     INCR for each job (its order)

Each method is one Lua script (:mod:`._bank_redis_lua`), so it is atomic and its log
entries are numbered in the order the scripts ran. Remembering without a key is one round
trip; with a key, two: one script reads the new record's neighbours on the key's timeline
(only they decide where it goes),
:func:`~framework_agents.bank._records.place_on_timeline` places it in Python, and the
writing script refuses, to be read again, when those neighbours changed meanwhile.
Forgetting deletes the record's hash (every revision, its text, metadata and vectors) and
its member of the key's timeline: only the log keeps its id.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from .._crypto import Cipher, DataKey, Place, is_sealed, is_sealed_text
from ..bank._base import (
    Job,
    Revision,
    Row,
    SealingBackend,
    check_namespace,
    key_digest,
    namespace_text,
    place_on_timeline,
    row_from_json,
    row_to_json,
)
from ..errors import (
    CheckpointConflictError,
    InvalidArgumentError,
    MemoryCorruptError,
    StoreIntegrityError,
)
from . import _bank_redis_lua as lua
from ._codec import redact

if TYPE_CHECKING:
    from ._redis_db import RedisDb

__all__ = ["RedisBankBackend"]

#: How many times an insert or a revision is read again when another writer changed
#: what it was computed from (each round, one of the writers wins).
T = TypeVar("T")

_ATTEMPTS = 100
#: Log entries read per round trip.
_PAGE = 10_000
#: Records read or deleted per script (a script holds the server while it runs).
_BATCH = 1000
_MICROS = re.compile(rb"-?[0-9]{1,20}\Z")
_RECORD_FIELD = re.compile(rb"(n|to|k|m|[jv][1-9][0-9]*)\Z")


def _revision_json(row: Row) -> bytes:
    """A revision as stored: its JSON without ``valid_to`` (the record's ``to`` field)."""
    doc = row_to_json(row)
    del doc["valid_to"]
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()


def _member(row: Row) -> str:
    """A keyed row's member of its timeline's sorted set: lexical order is (valid_from, id)."""
    return f"{row.valid_from + 2**63:020d}:{row.id}"


def _to(valid_to: int | None) -> str:
    return "" if valid_to is None else str(valid_to)


def _vector_args(vector: bytes | None) -> list[Any]:
    return ["0", b""] if vector is None else ["1", vector]


@dataclass
class _Plan:
    """An insert's script arguments and what each row becomes if the script writes it."""

    args: list[Any]
    placed: list[Row]


def _place(
    timeline: dict[str, Row],
    row: Row,
    final: dict[str, Row],
    closings: dict[str, int | None],
) -> Row:
    """Place a new keyed ``row`` on ``timeline``: the records it closes.

    A closed record of this insert changes in ``final``; a stored one goes to ``closings``.
    """
    row, closed = place_on_timeline(timeline.values(), row)
    for record_id, valid_to in closed:
        timeline[record_id] = replace(timeline[record_id], valid_to=valid_to)
        if record_id in final:
            final[record_id] = replace(final[record_id], valid_to=valid_to)
        else:
            closings[record_id] = valid_to
    timeline[row.id] = row
    return row


def _row_args(
    row_args: list[tuple[str, str, str]],
    placed: list[Row],
    final: dict[str, Row],
    stored_forms: Callable[[Row], tuple[bytes, bytes | None]],
) -> list[Any]:
    """The ``INSERT`` arguments of each row: id, mode, digest, member, revision, end, vector.

    ``stored_forms(row)``: the revision's JSON and vector as stored (sealed with
    ``cipher=``).
    """
    args: list[Any] = []
    for (record_id, mode, digest), row in zip(row_args, placed, strict=True):
        written = final.get(record_id, row)
        member = _member(written) if digest else ""
        body, vector = stored_forms(written)
        args += [record_id, mode, digest, member, body]
        args += [_to(written.valid_to), *_vector_args(vector)]
    return args


class _KeyMiss(Exception):
    """A sealed row's namespace has no data key in this instance's cache (load them)."""


class RedisBankBackend(SealingBackend):
    """A memory bank in Redis hashes, sorted sets and a stream (see the module docstring)."""

    def __init__(self, db: RedisDb) -> None:
        """The bank under ``db``'s prefix; nothing connects before the first operation."""
        self._db = db
        self._p = f"{db.prefix}bank:"
        self._writes = [f"{self._p}seq", f"{self._p}log"]
        self._jobs = f"{self._p}jobs"
        self._keys_hash = f"{self._p}datakeys"
        # Sealed (use_cipher): a revision is stored as its namespace's text, a newline and
        # the envelope; the data keys live in <p>bank:datakeys (namespace -> wrapped key).
        self._dkeys: dict[str, DataKey] = {}

    # -- data keys -----------------------------------------------------------------------

    async def _ensure_keys(self, namespaces: Sequence[str], *, create: bool) -> None:
        """Read (and, ``create``, make) the data keys of ``namespaces`` into the cache."""
        cipher = self._cipher
        missing = sorted({n for n in namespaces if n not in self._dkeys})
        if cipher is None or not missing:
            return
        if create:
            for namespace in missing:
                wrapped = cipher.wrap(cipher.new_data_key(), Place("bank.data-key", namespace))
                await self._db.call("hsetnx", self._keys_hash, namespace, wrapped)
        found = await self._db.call("hmget", self._keys_hash, *missing)
        for namespace, wrapped in zip(missing, found, strict=True):
            if wrapped is not None:
                place = Place("bank.data-key", namespace)
                self._dkeys[namespace] = cipher.unwrap(bytes(wrapped), place)

    async def _all_keys(self) -> None:
        self._dkeys = {}
        names = await self._db.call("hkeys", self._keys_hash)
        await self._ensure_keys([bytes(n).decode() for n in names], create=False)

    async def _keyed(self, read: Callable[[], Awaitable[T]]) -> T:
        """``read()``, again with every data key loaded if a sealed row needed one."""
        try:
            return await read()
        except _KeyMiss:
            await self._all_keys()
        try:
            return await read()
        except _KeyMiss as miss:
            raise StoreIntegrityError(
                f"a memory record of namespace {miss.args[0]} is sealed under a data key "
                "that no longer exists (forgotten); left as it is"
            ) from None

    def _key(self, namespace: str) -> DataKey:
        key = self._dkeys.get(namespace)
        if key is None:
            raise _KeyMiss(namespace)
        return key

    def _stored_forms(self, row: Row) -> tuple[bytes, bytes | None]:
        """The revision's JSON and vector as stored: sealed under its namespace's key."""
        body, vector = _revision_json(row), row.vector
        if self._cipher is None:
            return body, vector
        namespace = namespace_text(row.namespace)
        key, number = self._key(namespace), str(row.revision)
        body = namespace.encode() + b"\n" + key.seal(body, Place("bank.revision", row.id, number))
        if vector is not None:
            vector = key.seal(vector, Place("bank.vector", row.id, number))
        return body, vector

    def _opened(
        self, record_id: str, revision: bytes, data: bytes, vector: Any
    ) -> tuple[bytes, Any]:
        """A sealed revision's JSON and vector, opened (STORE_INTEGRITY if not authentic)."""
        assert self._cipher is not None
        number = revision.decode(errors="replace")
        place = Place("bank.revision", record_id, number)
        namespace, sep, envelope = data.partition(b"\n")
        if not sep or not is_sealed(envelope):
            self._cipher.open(data, place)  # raises: plain in an encrypted store
        key = self._key(namespace.decode(errors="replace"))
        body = key.open(envelope, place)
        if vector is not None:
            vector = key.open(bytes(vector), Place("bank.vector", record_id, number))
        return body, vector

    async def _drop_keys(self, under: Callable[[str], bool]) -> int:
        names = [bytes(n).decode() for n in await self._db.call("hkeys", self._keys_hash)]
        doomed = [n for n in names if under(n)]
        if doomed:
            await self._db.call("hdel", self._keys_hash, *doomed)
        return len(doomed)

    async def _reseal(self, cipher: Cipher, migrate: bool) -> int:
        # A compare-and-set each: a value changed meanwhile is left to the next run.
        written = 0
        stored = await self._db.call("hgetall", self._keys_hash)
        for name, wrapped in stored.items():
            namespace = bytes(name).decode()
            again = cipher.reseal(bytes(wrapped), Place("bank.data-key", namespace))
            if again is not None:
                args = [namespace, bytes(wrapped), again]
                written += int(await self._db.script("RESEAL_HASH_FIELD", [self._keys_hash], args))
        if migrate:
            written += await self._migrate()
        return written

    async def _migrate(self) -> int:
        """Seal the plain revisions, vectors and jobs (compare-and-set each); how many."""
        written = 0
        async for name in self._db.client().scan_iter(match=f"{self._p}rec:*"):
            record = bytes(name).decode()
            fields = await self._db.call("hgetall", record)
            for field, value in fields.items():
                field, value = bytes(field), bytes(value)
                if field[:1] != b"j" or not value.startswith(b"{"):
                    continue
                doc = json.loads(value)
                row = row_from_json({**doc, "valid_to": None}, None, where=record)
                await self._ensure_keys([namespace_text(row.namespace)], create=True)
                body, _ = self._stored_forms(replace(row, vector=None))
                changes = [(field, value, body)]
                vector = fields.get(b"v" + field[1:])
                if vector is not None and not is_sealed(bytes(vector)):
                    sealed = self._key(namespace_text(row.namespace)).seal(
                        bytes(vector), Place("bank.vector", row.id, str(row.revision))
                    )
                    changes.append((b"v" + field[1:], bytes(vector), sealed))
                for change in changes:
                    written += int(await self._db.script("RESEAL_HASH_FIELD", [record], change))
        jobs = await self._db.call("hgetall", self._jobs)
        for job_id, value in jobs.items():
            order, _, body = bytes(value).partition(b"\n")
            doc = json.loads(body)
            if is_sealed_text(str(doc.get("payload", ""))):
                continue
            job = Job(bytes(job_id).decode(), check_namespace(doc["namespace"]), b"")
            payload = base64.b64decode(doc["payload"])
            new = order + b"\n" + await self._job_body(job._replace(payload=payload))
            args = [bytes(job_id), bytes(value), new]
            written += int(await self._db.script("RESEAL_HASH_FIELD", [self._jobs], args))
        return written

    async def _job_body(self, job: Job) -> bytes:
        payload = base64.b64encode(job.payload).decode()
        if self._cipher is not None:
            namespace = namespace_text(job.namespace)
            await self._ensure_keys([namespace], create=True)
            payload = self._key(namespace).seal_text(job.payload, Place("bank.job", job.id))
        return json.dumps({"namespace": list(job.namespace), "payload": payload}).encode()

    def __repr__(self) -> str:
        """The backend and where it keeps the bank (password redacted)."""
        return f"RedisBankBackend({redact(self._db.url)!r}, prefix={self._p!r})"

    async def _script(self, script: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        source = getattr(lua, script)
        return await self._db.script(f"bank.{script}", keys, args, source=source)

    def _corrupt(self, what: str) -> MemoryCorruptError:
        return MemoryCorruptError(
            f"the memory bank under {self._p!r} in {redact(self._db.url)}: {what}; "
            "it was left untouched"
        )

    def _status(self, reply: Any) -> int:
        status = int(reply[0])
        if status == -3:
            raise self._corrupt(bytes(reply[1]).decode(errors="replace"))
        return status

    # -- reading stored records --------------------------------------------------------

    def _row(self, record_id: str, revision: bytes, to: bytes, data: bytes, vector: Any) -> Row:
        """One stored revision (its record's ``to`` and its JSON), checked."""
        where = f"memory record {record_id!r} under {self._p!r} in {redact(self._db.url)}"
        if not revision.isdigit():
            raise MemoryCorruptError(f"{where}: it has no revision count")
        if not _MICROS.match(to) and to != b"":
            raise MemoryCorruptError(f"{where}: its valid_to is not a number of microseconds")
        if self._cipher is not None:
            data, vector = self._opened(record_id, revision, data, vector)
        try:
            doc = json.loads(data)
        except ValueError:
            raise MemoryCorruptError(f"{where}: revision {revision!r:.20} is not JSON") from None
        if not isinstance(doc, dict) or "valid_to" in doc:
            raise MemoryCorruptError(f"{where}: a stored revision has the wrong shape")
        doc["valid_to"] = int(to) if to else None
        row = row_from_json(doc, None if vector is None else bytes(vector), where=where)
        if row.id != record_id or str(row.revision).encode() != revision:
            raise MemoryCorruptError(f"{where}: it holds another record or revision")
        return row

    def _latest(self, record_id: str, reply: Any) -> Row | None:
        """The row of a ``latest()`` reply of the scripts (``0``: not stored)."""
        if reply == 0:
            return None
        vector = reply[3] if len(reply) > 3 else None
        return self._row(record_id, bytes(reply[0]), bytes(reply[1]), bytes(reply[2]), vector)

    async def latest(self, ids: Sequence[str]) -> list[Row]:
        """The latest revisions of the stored records among ``ids`` (one script)."""
        return await self._keyed(lambda: self._latest_rows(ids))

    async def _latest_rows(self, ids: Sequence[str]) -> list[Row]:
        out: list[Row] = []
        for start in range(0, len(ids), _BATCH):
            batch = ids[start : start + _BATCH]
            reply = await self._script("LATEST", self._writes[1:], [self._p, *batch])
            out += self._unpack(batch, bytes(reply))
        return out

    def _unpack(self, ids: Sequence[str], data: bytes) -> list[Row]:
        """The rows of a ``LATEST`` reply (see the script)."""
        rows: list[Row] = []
        at = 0
        for record_id in ids:
            end = data.find(b"\n", at)
            head = data[at:end].split(b" ")
            at = end + 1
            if head == [b"x"]:
                continue
            try:
                revision, to, size, vector_size = head
                body = data[at : at + int(size)]
                at += int(size)
                vector = None
                if vector_size != b"-1":
                    vector = data[at : at + int(vector_size)]
                    at += int(vector_size)
            except ValueError:
                raise self._corrupt(f"record {record_id!r} has malformed fields") from None
            rows.append(self._row(record_id, revision, to, body, vector))
        return rows

    async def revisions(self, record_id: str) -> list[Row]:
        """Every revision of ``record_id``, oldest first (one ``HGETALL``)."""
        return await self._keyed(lambda: self._revisions(record_id))

    async def _revisions(self, record_id: str) -> list[Row]:
        fields = await self._db.call("hgetall", f"{self._p}rec:{record_id}")
        if not fields:
            return []
        if not all(_RECORD_FIELD.match(name) for name in fields):
            raise self._corrupt(f"record {record_id!r} has fields the bank does not write")
        latest, to = fields.get(b"n", b""), fields.get(b"to")
        if not latest.isdigit() or to is None:
            raise self._corrupt(f"record {record_id!r} has no revision count or valid_to")
        rows = []
        for n in range(1, int(latest) + 1):
            data = fields.get(b"j%d" % n)
            if data is None:
                raise self._corrupt(f"record {record_id!r} lacks revision {n}")
            rows.append(self._row(record_id, b"%d" % n, to, data, fields.get(b"v%d" % n)))
        return rows

    async def changes(self, after: int) -> list[tuple[int, str]]:
        """The log entries after ``after`` (a page of ``XRANGE`` a script, as one string)."""
        out: list[tuple[int, str]] = []
        start = f"{after + 1}-0"
        while True:
            page = await self._script("CHANGES", self._writes[1:], [start, _PAGE])
            if isinstance(page, list):
                self._status(page)
            lines = bytes(page).split(b"\n")[:-1]
            for line in lines:
                entry_id, _, record_id = line.partition(b" ")
                seq, _, tail = entry_id.partition(b"-")
                if tail != b"0" or not seq.isdigit():
                    raise self._corrupt(f"change-log entry {entry_id!r:.40} has the wrong shape")
                out.append((int(seq), record_id.decode(errors="replace")))
            if len(lines) < _PAGE:
                return out
            start = f"{out[-1][0] + 1}-0"

    # -- writing -----------------------------------------------------------------------

    async def insert(self, rows: Sequence[Row], *, job: str | None = None) -> list[Row] | None:
        """Store new records (see :meth:`~framework_agents.bank.BankBackend.insert`).

        Rows without a key: one script. With keys: the timelines are read, the rows placed
        in Python, and the script writes only if those timelines are unchanged (else all
        again).
        """
        rows = list(rows)
        for row in rows:
            if "\n" in row.id:  # the change log is read as lines
                raise InvalidArgumentError(f"a record id may not hold a newline: {row.id!r:.60}")
        await self._ensure_keys([namespace_text(r.namespace) for r in rows], create=True)
        return await self._keyed(lambda: self._insert(rows, job))

    async def _insert(self, rows: list[Row], job: str | None) -> list[Row] | None:
        for _ in range(_ATTEMPTS):
            plan = await self._plan(rows, job)
            reply = await self._script("INSERT", [*self._writes, self._jobs], plan.args)
            status = self._status(reply)
            if status == 0:
                return None
            if status == 1:
                return [
                    placed if stored == 0 else self._stored(placed.id, stored)
                    for placed, stored in zip(plan.placed, reply[1:], strict=True)
                ]
        raise CheckpointConflictError(
            f"the key timelines of the memory bank under {self._p!r} kept changing while "
            f"{len(rows)} record(s) were placed on them; nothing was written"
        )

    def _stored(self, record_id: str, reply: Any) -> Row:
        row = self._latest(record_id, reply)
        assert row is not None
        return row

    async def _plan(self, rows: list[Row], job: str | None) -> _Plan:
        """The ``INSERT`` arguments for ``rows``: keyed rows placed on their timelines.

        Only a new row's neighbours on the timeline (the records just before and after it)
        decide where it goes, so only they are read, with the rows of this insert.
        """
        keyed: dict[str, Row] = {}  # each keyed row's first occurrence
        for row in rows:
            if row.key is not None:
                keyed.setdefault(row.id, row)
        timelines, checks, stored = await self._neighbours(keyed)
        placed: list[Row] = []
        row_args: list[tuple[str, str, str]] = []
        final: dict[str, Row] = {}  # the new rows as the script writes them
        closings: dict[str, int | None] = {}
        for row in rows:
            mode, digest = "a", ""
            if row.key is not None and row.id not in final:
                digest = key_digest(row)
                mode = "e" if row.id in stored else "n"
            if mode == "n":
                row = _place(timelines[digest], row, final, closings)
            if row.id not in final and mode != "e":
                final[row.id] = row
            placed.append(row)
            row_args.append((row.id, mode, digest))
        args = [self._p, job or "", len(rows), len(closings), len(checks)]
        args += _row_args(row_args, placed, final, self._stored_forms)
        for record_id, valid_to in closings.items():
            args += [record_id, _to(valid_to)]
        for check in checks:
            args += check
        return _Plan(args, placed)

    async def _neighbours(
        self, keyed: dict[str, Row]
    ) -> tuple[dict[str, dict[str, Row]], list[Any], set[str]]:
        """The keyed rows' timelines as far as read, the checks the script makes, the stored ids.

        Each new row's neighbours (read with ``SIBLINGS``) go on its key's timeline and
        into a check that the script finds them still there.
        """
        timelines: dict[str, dict[str, Row]] = {}
        checks: list[Any] = []
        if not keyed:
            return timelines, checks, set()
        spots = [(key_digest(r), _member(r)) for r in keyed.values()]
        args = [self._p, len(spots), *(x for spot in spots for x in spot), *keyed]
        reply = await self._script("SIBLINGS", self._writes[1:], args)
        stored = {i for i, flag in zip(keyed, reply[-1], strict=True) if flag}
        for row, (digest, member), found in zip(keyed.values(), spots, reply[:-1], strict=True):
            timeline = timelines.setdefault(digest, {})
            if row.id not in stored:
                before, before_to = self._neighbour(found[:4], timeline)
                after, _ = self._neighbour(found[4:], timeline)
                checks.append([digest, member, before, before_to, after])
        return timelines, checks, stored

    def _neighbour(self, found: Any, timeline: dict[str, Row]) -> tuple[bytes, bytes]:
        """A neighbour ``SIBLINGS`` found (added to ``timeline``): its member and valid_to."""
        member, revision, to, data = (bytes(f) for f in found)
        if not member:
            return b"", b""
        record_id = member[21:].decode(errors="replace")
        if not revision:
            raise self._corrupt(f"the key timeline lists {record_id!r}, which is not stored")
        row = self._row(record_id, revision, to, data, None)
        if _member(row).encode() != member:
            raise self._corrupt(f"record {record_id!r} is out of place on its key's timeline")
        timeline[row.id] = row
        return member, to

    async def revise(self, record_id: str, change: Revision) -> Row | None:
        """Append a revision: the latest is read, the new one written if it is still latest."""
        for _ in range(_ATTEMPTS):
            rows = await self.latest([record_id])
            if not rows:
                return None
            last = rows[0]
            row = change.after(last)
            await self._ensure_keys([namespace_text(row.namespace)], create=True)
            body, vector = self._stored_forms(row)
            args = [self._p, record_id, last.revision, body]
            reply = await self._script("REVISE", self._writes, [*args, *_vector_args(vector)])
            status = self._status(reply)
            if status == 0:
                return None
            if status == 1:
                return row
        raise CheckpointConflictError(
            f"memory record {record_id!r} kept changing while it was revised; nothing was written"
        )

    async def delete(self, ids: Sequence[str]) -> int:
        """Remove the records among ``ids`` with every revision and vector; how many."""
        distinct = list(dict.fromkeys(ids))
        gone = 0
        for start in range(0, len(distinct), _BATCH):
            batch = distinct[start : start + _BATCH]
            reply = await self._script("DELETE", self._writes, [self._p, *batch])
            self._status(reply)
            gone += int(reply[1])
        return gone

    # -- jobs --------------------------------------------------------------------------

    async def add_job(self, job: Job) -> None:
        """Store a pending extraction job (nothing if a job of that id is stored)."""
        if not isinstance(job.id, str) or not job.id:
            raise InvalidArgumentError(f"a job id is a non-empty string, not {job.id!r:.40}")
        body = await self._job_body(job)
        keys = [self._jobs, f"{self._p}jobseq"]
        self._status(await self._script("ADD_JOB", keys, [job.id, body]))

    async def jobs(self) -> list[Job]:
        """The pending extraction jobs, oldest first."""
        stored = await self._db.call("hgetall", self._jobs)
        if self._cipher is not None:
            await self._all_keys()
        found: list[tuple[int, Job]] = []
        for job_id, value in stored.items():
            order, _, body = bytes(value).partition(b"\n")
            try:
                doc = json.loads(body)
                job = Job(
                    bytes(job_id).decode(),
                    check_namespace(doc["namespace"]),
                    self._job_payload(bytes(job_id).decode(), doc),
                )
                found.append((int(order), job))
            except StoreIntegrityError:
                raise
            except Exception as exc:
                raise self._corrupt(f"pending job {job_id!r:.40} is unreadable ({exc})") from None
        return [job for _, job in sorted(found, key=lambda f: f[0])]

    def _job_payload(self, job_id: str, doc: Any) -> bytes:
        text = doc["payload"]
        if self._cipher is None:
            return base64.b64decode(text, validate=True)
        place = Place("bank.job", job_id)
        if not isinstance(text, str) or not is_sealed_text(text):
            self._cipher.open(b"{", place)  # raises: plain in an encrypted store
        namespace = namespace_text(check_namespace(doc["namespace"]))
        key = self._dkeys.get(namespace)
        if key is None:
            raise StoreIntegrityError(
                f"{place.describe()} is sealed under a data key that no longer exists "
                "(forgotten); left as it is"
            )
        return key.open_text(text, place)

    async def drop_job(self, job_id: str) -> None:
        """Remove a pending job without running it."""
        await self._db.call("hdel", self._jobs, job_id)

    async def close(self) -> None:
        """Nothing to release: the store closes the client it shares with its other parts."""

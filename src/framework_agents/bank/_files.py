r"""The directory backend of a memory bank: one file a record, a change log, a kernel lock.

Layout under ``<dir>/bank/``::

    lock                 flock(LOCK_EX) for every write (dies with its holder)
    log                  the change log: one 33-byte line a change, "<record id>\n";
                         the entry at line n has seq n (no text, ever)
    records/<id>.json    every revision of one record, with its vectors; replaced
                         atomically (temp file, fsync, rename, directory fsync)
    keys/<digest>.json   the ids of the records of one (namespace, key): the key timeline
    jobs/<id>.json       a pending extraction job
    datakeys/<digest>    with ``cipher=``: a namespace's data key, sealed by the store key

With ``cipher=`` a record file is ``{"namespace": [...], "sealed": "fae1...."}`` (the
revisions and vectors sealed under the namespace's data key, bound to the record id) and
a job's payload is sealed the same way (bound to the job id). Forgetting a namespace
removes its data key: a copy of its records anywhere is unreadable.

A write appends its log entries first and then publishes the records: a writer that dies
between leaves entries whose records are absent, which every reader takes for forgotten
records (the write did not return). Forgetting unlinks the record's file, so no byte of
its text stays in any file of the bank. Every operation runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from .._crypto import Cipher, DataKey, Place
from .._persist._files import atomic_publish, io_error, make_private_dirs
from .._platform import posix_fcntl
from ..errors import InvalidArgumentError, MemoryCorruptError, StoreIntegrityError
from ._backend import Job, Revision, SealingBackend
from ._records import (
    Row,
    check_namespace,
    key_digest,
    namespace_text,
    place_on_timeline,
    row_from_json,
    row_to_json,
)

__all__ = ["FileBankBackend"]

T = TypeVar("T")

_ENTRY = 33  # 32 hex digits and a newline
_MAX_RECORD_FILE = 64 * 1024 * 1024


class FileBankBackend(SealingBackend):
    """A bank kept as files under ``<root>/bank/`` (see the module docstring)."""

    def __init__(self, root: str | os.PathLike[str], *, cipher: Cipher | None = None) -> None:
        """The bank under ``root``; nothing is created before the first write."""
        self.root = Path(root) / "bank"
        self._migrating = False
        self.use_cipher(cipher)

    # -- data keys ---------------------------------------------------------------------

    def _key_file(self, namespace: str) -> Path:
        return self.root / "datakeys" / hashlib.sha256(namespace.encode()).hexdigest()

    def _data_key(self, namespace: str, *, create: bool) -> DataKey | None:
        """The data key of ``namespace`` (made when ``create``: under the bank's lock)."""
        found = self._dkeys.get(namespace)
        if found is not None:
            return found
        cipher = self._cipher
        assert cipher is not None
        path, place = self._key_file(namespace), Place("bank.data-key", namespace)
        try:
            stored = path.read_bytes()
        except FileNotFoundError:
            if not create:
                return None
            key = cipher.new_data_key()
            make_private_dirs(path.parent)
            atomic_publish(path, namespace.encode() + b"\n" + cipher.wrap(key, place))
        else:
            name, _, wrapped = stored.partition(b"\n")
            if name.decode("utf-8", "replace") != namespace:
                raise StoreIntegrityError(f"{path}: a data key moved from another namespace")
            key = cipher.unwrap(wrapped, place)
        self._dkeys[namespace] = key
        return key

    def _sealed_key(self, namespace: str, place: Place) -> DataKey:
        key = self._data_key(namespace, create=False)
        if key is None:
            raise StoreIntegrityError(
                f"{place.describe()} is sealed under the data key of namespace {namespace} "
                "that no longer exists (forgotten); left as it is"
            )
        return key

    async def _drop_keys(self, under: Callable[[str], bool]) -> int:
        def forget() -> int:
            with self._locked():
                directory = self.root / "datakeys"
                gone = 0
                for path in sorted(directory.iterdir()) if directory.is_dir() else []:
                    name = path.read_bytes().partition(b"\n")[0].decode("utf-8", "replace")
                    try:
                        doomed = under(name)
                    except (ValueError, TypeError):
                        continue
                    if doomed:
                        path.unlink()
                        gone += 1
                self._dkeys = {}  # under the lock: no write seals under a key gone
                return gone

        return await self._run(forget, action="write")

    async def _reseal(self, cipher: Cipher, migrate: bool) -> int:
        def rotate() -> int:
            with self._locked():
                written = 0
                directory = self.root / "datakeys"
                for path in sorted(directory.iterdir()) if directory.is_dir() else []:
                    name, _, wrapped = path.read_bytes().partition(b"\n")
                    namespace = name.decode("utf-8", "replace")
                    again = cipher.reseal(wrapped, Place("bank.data-key", namespace))
                    if again is not None:
                        atomic_publish(path, name + b"\n" + again)
                        written += 1
                if migrate:
                    written += self._migrate()
                return written

        return await self._run(rotate, action="write")

    def _migrate(self) -> int:
        """Seal the plain record files and jobs (under the lock); how many."""
        written = 0
        for path in sorted((self.root / "records").glob("*.json")):
            doc = json.loads(path.read_bytes())
            if isinstance(doc, dict) and "sealed" in doc:
                continue
            self._cipher, cipher = None, self._cipher
            try:
                rows = self._read(path.stem)
            finally:
                self._cipher = cipher
            if rows:
                self._write(rows)
                written += 1
        for path in sorted((self.root / "jobs").glob("*.json")):
            doc = json.loads(path.read_bytes())
            if str(doc.get("payload", "")).startswith("fae1."):
                continue
            payload = base64.b64decode(doc["payload"])
            self._write_job(path, Job(doc["id"], check_namespace(doc["namespace"]), payload))
            written += 1
        return written

    def __repr__(self) -> str:
        """The backend and its directory."""
        return f"FileBankBackend({str(self.root)!r})"

    # -- plumbing ----------------------------------------------------------------------

    async def _run(self, fn: Callable[[], T], *, action: str) -> T:
        try:
            return await asyncio.to_thread(fn)
        except OSError as exc:
            raise io_error(exc, action=action, key="bank", root=self.root) from None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        for name in ("records", "keys", "jobs"):
            if not (self.root / name).is_dir():
                make_private_dirs(self.root / name)
        fcntl = posix_fcntl()
        fd = os.open(self.root / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _record_path(self, record_id: str) -> Path:
        if len(record_id) != 32 or not all(c in "0123456789abcdef" for c in record_id):
            raise FileNotFoundError(record_id)
        return self.root / "records" / f"{record_id}.json"

    def _read(self, record_id: str) -> list[Row] | None:
        try:
            path = self._record_path(record_id)
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        where = str(path)
        if self._cipher is not None:
            data = self._open_record(record_id, data, where)
        try:
            doc = json.loads(data)
            rows = [
                row_from_json(r, None if v is None else base64.b64decode(v), where=where)
                for r, v in zip(doc["revisions"], doc["vectors"], strict=True)
            ]
        except (ValueError, KeyError, TypeError) as exc:
            raise MemoryCorruptError(f"{where}: unreadable memory record ({exc})") from None
        if not rows or any(r.id != record_id for r in rows):
            raise MemoryCorruptError(f"{where}: the record file holds another record")
        return rows

    def _open_record(self, record_id: str, data: bytes, where: str) -> bytes:
        """The plain document of a sealed record file (STORE_INTEGRITY otherwise)."""
        assert self._cipher is not None
        place = Place("bank.record", record_id)
        try:
            doc = json.loads(data)
        except ValueError:
            doc = None
        if not isinstance(doc, dict) or doc.keys() != {"namespace", "sealed"}:
            self._cipher.open(b"{", place)  # raises: plain in an encrypted store
        try:
            namespace = namespace_text(check_namespace(tuple(doc["namespace"])))
        except (InvalidArgumentError, TypeError):
            raise StoreIntegrityError(f"{where}: a sealed record names no namespace") from None
        key = self._sealed_key(namespace, place)
        sealed = doc["sealed"]
        if not isinstance(sealed, str):
            raise StoreIntegrityError(f"{where}: a damaged sealed record")
        return key.open_text(sealed, place)

    def _write(self, rows: list[Row]) -> None:
        doc = {
            "revisions": [row_to_json(r) for r in rows],
            "vectors": [
                None if r.vector is None else base64.b64encode(r.vector).decode() for r in rows
            ],
        }
        data = json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()
        if self._cipher is not None:
            namespace = namespace_text(rows[0].namespace)
            key = self._data_key(namespace, create=True)
            assert key is not None
            sealed = key.seal_text(data, Place("bank.record", rows[0].id))
            data = json.dumps({"namespace": list(rows[0].namespace), "sealed": sealed}).encode()
        atomic_publish(self._record_path(rows[0].id), data)

    def _append_log(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        path = self.root / "log"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            size = os.fstat(fd).st_size
            if size % _ENTRY:  # a writer died mid-line: drop the torn entry
                os.ftruncate(fd, size - size % _ENTRY)
                size -= size % _ENTRY
            data = "".join(f"{i}\n" for i in ids).encode()
            os.pwrite(fd, data, size)
            os.fsync(fd)
        finally:
            os.close(fd)

    def _key_path(self, row: Row) -> Path:
        return self.root / "keys" / f"{key_digest(row)}.json"

    def _key_ids(self, path: Path) -> list[str]:
        try:
            ids = json.loads(path.read_bytes())
        except FileNotFoundError:
            return []
        except ValueError:
            raise MemoryCorruptError(f"{path}: unreadable key timeline") from None
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise MemoryCorruptError(f"{path}: the key timeline is not a list of ids")
        return ids

    def _set_key_ids(self, path: Path, ids: list[str]) -> None:
        if ids:
            atomic_publish(path, json.dumps(ids).encode())
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    # -- the contract ------------------------------------------------------------------

    async def insert(self, rows: Sequence[Row], *, job: str | None = None) -> list[Row] | None:
        """Store new records (see :meth:`~._backend.BankBackend.insert`)."""
        return await self._run(lambda: self._insert(rows, job), action="write")

    def _insert(self, rows: Sequence[Row], job: str | None) -> list[Row] | None:
        with self._locked():
            job_path = None if job is None else self._job_path(job)
            if job_path is not None and not job_path.exists():
                return None
            stored: list[Row] = []
            writes: dict[str, list[Row]] = {}
            keys: dict[Path, list[str]] = {}
            for row in rows:
                existing = writes.get(row.id) or self._read(row.id)
                if existing is not None:
                    stored.append(existing[-1])
                    continue
                if row.key is not None:
                    row = self._place(row, writes, keys)
                writes[row.id] = [row]
                stored.append(row)
            self._publish_insert(writes, keys, job_path)
            return stored

    def _place(self, row: Row, writes: dict[str, list[Row]], keys: dict[Path, list[str]]) -> Row:
        """Place a new keyed ``row`` on its key's timeline: the closed siblings go to ``writes``."""
        path = self._key_path(row)
        ids = keys.setdefault(path, self._key_ids(path))
        siblings = [r[-1] for r in (writes.get(i) or self._read(i) for i in ids) if r]
        row, closings = place_on_timeline(siblings, row)
        for record_id, valid_to in closings:
            before = writes.get(record_id) or self._read(record_id) or []
            writes[record_id] = [replace(r, valid_to=valid_to) for r in before]
        ids.append(row.id)
        return row

    def _publish_insert(
        self, writes: dict[str, list[Row]], keys: dict[Path, list[str]], job_path: Path | None
    ) -> None:
        """Write an insert's records and key timelines after its log entries; end its job."""
        for record_id in writes:  # an id with no file name fails before the log grows
            self._record_path(record_id)
        self._append_log(list(writes))
        for revisions in writes.values():
            if revisions:
                self._write(revisions)
        for path, ids in keys.items():
            self._set_key_ids(path, ids)
        if job_path is not None:
            job_path.unlink()

    async def revise(self, record_id: str, change: Revision) -> Row | None:
        """Append a revision (see :meth:`~._backend.BankBackend.revise`)."""

        def revise() -> Row | None:
            with self._locked():
                revisions = self._read(record_id)
                if revisions is None:
                    return None
                row = change.after(revisions[-1])
                self._append_log([record_id])
                self._write([*revisions, row])
                return row

        return await self._run(revise, action="write")

    async def latest(self, ids: Sequence[str]) -> list[Row]:
        """The latest revisions of the stored records among ``ids``."""

        def latest() -> list[Row]:
            out = []
            for record_id in ids:
                rows = self._read(record_id)
                if rows is not None:
                    out.append(rows[-1])
            return out

        return await self._run(latest, action="read")

    async def revisions(self, record_id: str) -> list[Row]:
        """Every revision of ``record_id``, oldest first."""
        return await self._run(lambda: self._read(record_id) or [], action="read")

    async def changes(self, after: int) -> list[tuple[int, str]]:
        """The log entries after ``after``."""

        def changes() -> list[tuple[int, str]]:
            try:
                with open(self.root / "log", "rb") as f:
                    f.seek(after * _ENTRY)
                    data = f.read()
            except FileNotFoundError:
                return []
            whole = len(data) - len(data) % _ENTRY
            out = []
            for n, start in enumerate(range(0, whole, _ENTRY), start=after + 1):
                entry = data[start : start + _ENTRY]
                if entry[-1:] != b"\n":
                    raise MemoryCorruptError(f"{self.root / 'log'}: a log entry is malformed")
                out.append((n, entry[:-1].decode("ascii", "replace")))
            return out

        return await self._run(changes, action="read")

    async def delete(self, ids: Sequence[str]) -> int:
        """Remove the records among ``ids`` (files unlinked); how many were stored."""

        def delete() -> int:
            with self._locked():
                found = {i: rows for i in dict.fromkeys(ids) if (rows := self._read(i))}
                self._append_log(list(found))
                for record_id, rows in found.items():
                    if rows[-1].key is not None:
                        path = self._key_path(rows[-1])
                        self._set_key_ids(path, [i for i in self._key_ids(path) if i != record_id])
                    self._record_path(record_id).unlink()
                return len(found)

        return await self._run(delete, action="write")

    # -- jobs --------------------------------------------------------------------------

    def _job_path(self, job_id: str) -> Path:
        digest = hashlib.sha256(job_id.encode()).hexdigest()[:40]
        return self.root / "jobs" / f"{digest}.json"

    async def add_job(self, job: Job) -> None:
        """Store a pending job (idempotent by id)."""

        def add() -> None:
            with self._locked():
                path = self._job_path(job.id)
                if not path.exists():
                    self._write_job(path, job)

        await self._run(add, action="write")

    def _write_job(self, path: Path, job: Job) -> None:
        payload = base64.b64encode(job.payload).decode()
        if self._cipher is not None:
            key = self._data_key(namespace_text(job.namespace), create=True)
            assert key is not None
            payload = key.seal_text(job.payload, Place("bank.job", job.id))
        doc = {"id": job.id, "namespace": list(job.namespace), "payload": payload}
        atomic_publish(path, json.dumps(doc).encode())

    def _job_payload(self, doc: Any) -> bytes:
        text = doc["payload"]
        if self._cipher is None:
            return base64.b64decode(text)
        place = Place("bank.job", doc["id"])
        if not isinstance(text, str) or not text.startswith("fae1."):
            self._cipher.open(b"{", place)  # raises: plain in an encrypted store
        key = self._sealed_key(namespace_text(check_namespace(doc["namespace"])), place)
        return key.open_text(text, place)

    async def jobs(self) -> list[Job]:
        """The pending jobs (by the time their files were written)."""

        def jobs() -> list[Job]:
            directory = self.root / "jobs"
            if not directory.is_dir():
                return []
            found: list[tuple[int, Job]] = []
            for path in directory.glob("*.json"):
                try:
                    stamp = path.stat().st_mtime_ns
                    doc: Any = json.loads(path.read_bytes())
                    job = Job(
                        doc["id"],
                        check_namespace(doc["namespace"]),
                        self._job_payload(doc),
                    )
                except FileNotFoundError:
                    continue
                except StoreIntegrityError:
                    raise
                except Exception as exc:
                    raise MemoryCorruptError(f"{path}: unreadable extraction job ({exc})") from None
                found.append((stamp, job))
            return [job for _, job in sorted(found, key=lambda f: (f[0], f[1].id))]

        return await self._run(jobs, action="read")

    async def drop_job(self, job_id: str) -> None:
        """Remove a pending job."""

        def drop() -> None:
            with self._locked(), contextlib.suppress(FileNotFoundError):
                self._job_path(job_id).unlink()

        await self._run(drop, action="write")

    async def close(self) -> None:
        """Nothing to release (every operation opens and closes its files)."""

"""Cipher: AES-256-GCM envelopes bound to their place; every defect is STORE_INTEGRITY."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework_agents import Cipher, StoreIntegrityError
from framework_agents._crypto import Place, is_sealed, is_sealed_text
from framework_agents.errors import InvalidArgumentError

K1 = bytes(range(32))
K2 = bytes(range(1, 33))
HERE = Place("checkpoint.head", "thread-a", "3", 1)


def cipher() -> Cipher:
    return Cipher(keys={"2026-12": K1}, current="2026-12")


def test_round_trip_and_not_plain() -> None:
    c = cipher()
    sealed = c.seal(b'{"secret":"canary-1"}', HERE)
    assert is_sealed(sealed)
    assert b"canary" not in sealed
    assert c.open(sealed, HERE) == b'{"secret":"canary-1"}'
    text = c.seal_text(b"hello", HERE)
    assert is_sealed_text(text)
    assert c.open_text(text, HERE) == b"hello"


def test_two_seals_differ_nonce() -> None:
    c = cipher()
    assert c.seal(b"x", HERE) != c.seal(b"x", HERE)


@pytest.mark.parametrize(
    "other",
    [
        Place("checkpoint.message", "thread-a", "3", 1),  # another kind
        Place("checkpoint.head", "thread-b", "3", 1),  # copied into another thread
        Place("checkpoint.head", "thread-a", "2", 1),  # replayed at another version
        Place("checkpoint.head", "thread-a", "3", 2),  # another format version
    ],
)
def test_moved_value_refused(other: Place) -> None:
    c = cipher()
    sealed = c.seal(b"value", HERE)
    with pytest.raises(StoreIntegrityError) as info:
        c.open(sealed, other)
    assert info.value.code == "STORE_INTEGRITY"
    assert "does not authenticate" in info.value.message


def test_plain_refused_with_rotate_hint() -> None:
    with pytest.raises(StoreIntegrityError, match=r"plain.*rotate\(\)"):
        cipher().open(b'{"planted":true}', HERE)
    with pytest.raises(StoreIntegrityError, match="plain"):
        cipher().open_text('{"planted":true}', HERE)
    with pytest.raises(StoreIntegrityError, match="damaged"):
        cipher().open_text("fae1.!!!not base64", HERE)


def test_truncations_refused() -> None:
    c = cipher()
    sealed = c.seal(b"some value", HERE)
    for n in range(len(sealed)):
        with pytest.raises(StoreIntegrityError):
            c.open(sealed[:n], HERE)


@settings(max_examples=200, deadline=None)
@given(plain=st.binary(max_size=64), data=st.data())
def test_any_flipped_byte_refused(plain: bytes, data: st.DataObject) -> None:
    c = cipher()
    sealed = bytearray(c.seal(plain, HERE))
    i = data.draw(st.integers(0, len(sealed) - 1))
    bit = data.draw(st.integers(0, 7))
    sealed[i] ^= 1 << bit
    with pytest.raises(StoreIntegrityError):
        c.open(bytes(sealed), HERE)


@settings(max_examples=100, deadline=None)
@given(plain=st.binary(max_size=64), junk=st.binary(max_size=80))
def test_any_junk_refused_never_raw(plain: bytes, junk: bytes) -> None:
    c = cipher()
    with pytest.raises(StoreIntegrityError):
        c.open(junk, HERE)
    with pytest.raises(StoreIntegrityError):
        c.open(c.seal(plain, HERE) + junk[:1] if junk else c.seal(plain, HERE)[:-1], HERE)


def test_unknown_key_id_and_other_store_key() -> None:
    old = Cipher(keys={"old": K2}, current="old")
    sealed = old.seal(b"v", HERE)
    with pytest.raises(StoreIntegrityError, match="key id 'old'"):
        cipher().open(sealed, HERE)
    # the same key id holding another key: the tag fails
    impostor = Cipher(keys={"2026-12": K2}, current="2026-12")
    with pytest.raises(StoreIntegrityError, match="does not authenticate"):
        cipher().open(impostor.seal(b"v", HERE), HERE)


def test_rotation_keeps_old_keys_readable() -> None:
    old = Cipher(keys={"a": K1}, current="a")
    both = Cipher(keys={"a": K1, "b": K2}, current="b")
    sealed = old.seal(b"v", HERE)
    assert both.open(sealed, HERE) == b"v"
    assert not both.is_current(sealed)
    again = both.reseal(sealed, HERE)
    assert again is not None and both.is_current(again)
    assert both.key_id_of(again) == "b"
    assert both.reseal(again, HERE) is None
    with pytest.raises(StoreIntegrityError):
        both.reseal(sealed, Place("checkpoint.head", "thread-b", "3", 1))


def test_data_keys_wrap_and_forget() -> None:
    c = cipher()
    owner = Place("bank.data-key", "ns1")
    key = c.new_data_key()
    wrapped = c.wrap(key, owner)
    assert key.material not in wrapped
    again = c.unwrap(wrapped, owner)
    sealed = key.seal(b"memory text", HERE)
    assert again.open(sealed, HERE) == b"memory text"
    with pytest.raises(StoreIntegrityError):
        c.unwrap(wrapped, Place("bank.data-key", "ns2"))
    # a store key cannot open a data-key envelope, nor another data key
    with pytest.raises(StoreIntegrityError, match="wrong kind of key"):
        c.open(sealed, HERE)
    with pytest.raises(StoreIntegrityError, match="no longer exists"):
        c.new_data_key().open(sealed, HERE)
    assert "material" not in repr(key) and str(key.material) not in repr(key)


@pytest.mark.parametrize(
    ("keys", "current", "match"),
    [
        ({"a": b"short"}, "a", "32 bytes"),
        ({"a": bytes(33)}, "a", "32 bytes"),
        ({"a": "x" * 32}, "a", "32 bytes"),
        ({"a": K1}, "b", "names no key"),
        ({}, "a", "non-empty"),
        ({"": K1}, "", "key id"),
        ({"a b": K1}, "a b", "key id"),
    ],
)
def test_bad_arguments(keys: dict[str, object], current: str, match: str) -> None:
    with pytest.raises(InvalidArgumentError, match=match) as info:
        Cipher(keys=keys, current=current)  # type: ignore[arg-type]
    assert info.value.code == "INVALID_ARGUMENT"


def test_repr_and_pickle_never_show_keys() -> None:
    c = cipher()
    assert "2026-12" in repr(c) and repr(K1) not in repr(c)
    with pytest.raises(TypeError):
        pickle.dumps(c)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_any_flipped_byte_of_a_sealed_body_or_head_refused(data: st.DataObject) -> None:
    from framework_agents.stores._sealed import (
        CHECKPOINT_MESSAGE,
        open_body,
        open_head,
        seal_body,
        seal_head,
    )

    c = cipher()
    body = seal_body(c, CHECKPOINT_MESSAGE, "t1", "m-1", b'{"role":"user"}', 3)
    head = seal_head(c, "t1", 4, b'{"version":2}')

    def open_the_body(b: bytes) -> bytes:
        return open_body(c, CHECKPOINT_MESSAGE, "t1", b, 3)

    def open_the_head(b: bytes) -> bytes:
        return open_head(c, "t1", 4, b)

    for sealed, reopen in ((body, open_the_body), (head, open_the_head)):
        changed = bytearray(sealed)
        i = data.draw(st.integers(0, len(changed) - 1))
        changed[i] ^= 1 << data.draw(st.integers(0, 7))
        with pytest.raises(StoreIntegrityError):
            reopen(bytes(changed))


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_any_flipped_byte_of_a_sealed_storage_value_refused(data: st.DataObject) -> None:
    import asyncio

    from framework_agents.sessions import InMemoryStorage
    from framework_agents.sessions.sealed import SealedStorage

    async def body() -> None:
        inner = InMemoryStorage()
        await SealedStorage(inner, cipher()).put("session/a/v", b"value")
        raw = bytearray(await inner.get("session/a/v") or b"")
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] ^= 1 << data.draw(st.integers(0, 7))
        await inner.put("session/a/v", bytes(raw))
        with pytest.raises(StoreIntegrityError):
            await SealedStorage(inner, cipher()).get("session/a/v")

    asyncio.run(body())


def test_a_missing_crypto_extra_is_an_import_error_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.ciphers.aead", None)
    with pytest.raises(ImportError) as caught:
        Cipher(keys={"k": bytes(32)}, current="k")
    assert "'crypto' extra" in str(caught.value)
    assert "'cryptography>=42'" in str(caught.value)
    assert "framework-agents[" not in str(caught.value)

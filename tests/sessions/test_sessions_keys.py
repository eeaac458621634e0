"""The storage key allowlist: what is accepted, what is refused, and why."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework_agents.errors import StorageKeyInvalidError
from framework_agents.sessions._keys import (
    MAX_KEY_LENGTH,
    MAX_SEGMENT_LENGTH,
    is_valid_key,
    validate_key,
    validate_prefix,
    validate_segment,
)

VALID = {
    "simple": "a",
    "nested": "session/u-42/scopes/agent/default/snapshots/snapshot_latest.json",
    "inner-double-dot": "a..b.json",
    "inner-dots-dir": "x/a..b/c...d",
    "underscore-dash": "_-_/-x-/__",
    "digits": "0/1/2",
    "device-as-substring": "CONSOLE/PRNT.txt/COM10/LPT0/AUXILIARY/NULL",
    "max-segment": "a" * MAX_SEGMENT_LENGTH,
}

INVALID = {
    "empty": "",
    "absolute": "/etc/passwd",
    "dotdot": "..",
    "dotdot-segment": "a/../b",
    "dotdot-leading": "../secret.txt",
    "dot-segment": "a/./b",
    "dot-only": "...",
    "leading-dot": ".hidden",
    "trailing-dot": "name.",
    "trailing-slash": "a/",
    "double-slash": "a//b",
    "nul": "a\x00b",
    "backslash": "a\\b",
    "backslash-traversal": "..\\secret.txt",
    "control": "a\nb",
    "trailing-newline": "a\n",
    "tab": "a\tb",
    "space": "a b",
    "colon-drive": "C:/x",
    "colon-stream": "file.txt:stream",
    "percent-encoded": "%2e%2e/secret.txt",
    "two-dot-leader": "\u2025/x",
    "fullwidth-dots": "\uff0e\uff0e/x",
    "fullwidth-solidus": "a\uff0fb",
    "one-dot-leader": "\u2024",
    "non-ascii-letter": "caf\u00e9",
    "home": "~/x",
    "device-con": "CON",
    "device-lower-ext": "con.txt",
    "device-nul-ext": "dir/nul.tar.gz",
    "device-com1": "COM1",
    "device-lpt9-ext": "Lpt9.json",
    "device-aux": "aux",
    "device-prn": "a/PRN.log",
    "too-long-segment": "a" * (MAX_SEGMENT_LENGTH + 1),
    "too-long-key": "/".join(["abcdefghi"] * (MAX_KEY_LENGTH // 10 + 1)),
}


@pytest.mark.parametrize("key", VALID.values(), ids=VALID.keys())
def test_valid_keys_are_accepted(key: str) -> None:
    assert validate_key(key) == key.split("/")
    assert is_valid_key(key)


@pytest.mark.parametrize("key", INVALID.values(), ids=INVALID.keys())
def test_invalid_keys_raise_storage_key_invalid(key: str) -> None:
    with pytest.raises(StorageKeyInvalidError) as info:
        validate_key(key)
    assert info.value.code == "STORAGE_KEY_INVALID"
    assert not is_valid_key(key)


@pytest.mark.parametrize("key", [None, 3, b"a", ["a"]], ids=["none", "int", "bytes", "list"])
def test_non_string_keys_raise(key: object) -> None:
    with pytest.raises(StorageKeyInvalidError):
        validate_key(key)


def test_segment_validation_names_what_it_checked() -> None:
    assert validate_segment("user-42", what="session_id") == "user-42"
    with pytest.raises(StorageKeyInvalidError, match="session_id"):
        validate_segment("a/b", what="session_id")
    with pytest.raises(StorageKeyInvalidError, match="session_id"):
        validate_segment(42, what="session_id")


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("", ([], "")),
        ("sn", ([], "sn")),
        ("a/b/", (["a", "b"], "")),
        ("a/b/sn", (["a", "b"], "sn")),
        ("a/.", (["a"], ".")),  # a partial tail is a string filter, dots allowed
        ("a/..", (["a"], "..")),
    ],
    ids=["empty", "partial", "dir", "dir-partial", "dot-tail", "dotdot-tail"],
)
def test_prefix_split(prefix: str, expected: tuple[list[str], str]) -> None:
    assert validate_prefix(prefix) == expected


@pytest.mark.parametrize(
    "prefix",
    ["/", "/a", "../", "a/../b", "a//", "a\\b", "a\x00", "%2e%2e/", "\u2025/", "CON/", 7],
    ids=["root", "abs", "up", "up-mid", "empty-seg", "bs", "nul", "pct", "leader", "dev", "int"],
)
def test_bad_prefixes_raise(prefix: object) -> None:
    with pytest.raises(StorageKeyInvalidError):
        validate_prefix(prefix)


_SEGMENT_ALPHABET = "abcXYZ019._-"


@given(st.lists(st.text(_SEGMENT_ALPHABET, min_size=1, max_size=12), min_size=1, max_size=6))
def test_keys_from_allowed_characters_follow_the_dot_rules(segments: list[str]) -> None:
    key = "/".join(segments)
    # This alphabet cannot spell a device name, so only the dot rules can refuse a key.
    expected = all(not (s.startswith(".") or s.endswith(".")) for s in segments)
    assert is_valid_key(key) == expected


@given(st.text(max_size=40))
def test_every_accepted_key_is_plain_ascii_and_relative(key: str) -> None:
    if is_valid_key(key):
        assert key.isascii()
        assert not key.startswith("/")
        assert all(seg not in {"", ".", ".."} for seg in key.split("/"))
        assert "\\" not in key and "\x00" not in key

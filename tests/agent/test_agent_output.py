"""``response_format``: a validated pydantic instance, retried with feedback when invalid."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from async_helper import arun
from framework_agents import (
    Agent,
    Message,
    OutputInvalidError,
    ScriptedModel,
    ToolCall,
    is_well_formed,
    tool,
)


class Weather(BaseModel):
    city: str
    celsius: float


def test_final_text_becomes_a_validated_instance() -> None:
    model = ScriptedModel(['{"city": "Oslo", "celsius": -3}'])
    agent = Agent(model, response_format=Weather, system_prompt="You report weather.")
    result = arun(agent.run("weather?"))
    assert result.output == Weather(city="Oslo", celsius=-3)
    prompt = model.calls[0].system_prompt or ""
    assert prompt.startswith("You report weather.")
    assert '"celsius"' in prompt and "JSON" in prompt
    assert agent.system_prompt == "You report weather."


@pytest.mark.parametrize(
    "text",
    [
        '```json\n{"city": "Rome", "celsius": 20}\n```',
        'Here it is:\n```\n{"city": "Rome", "celsius": 20}\n```\nEnjoy.',
        '  {"city": "Rome", "celsius": 20}\n',
    ],
    ids=["json-fence", "bare-fence-with-prose", "whitespace"],
)
def test_fences_and_whitespace_are_tolerated(text: str) -> None:
    result = arun(Agent(ScriptedModel([text]), response_format=Weather).run("q"))
    assert result.output == Weather(city="Rome", celsius=20)


def test_invalid_output_is_fed_back_and_retried_without_polluting_the_history() -> None:
    model = ScriptedModel(['{"city": "Oslo"}', "not json at all", '{"city": "Oslo", "celsius": 1}'])
    agent = Agent(model, response_format=Weather)
    result = arun(agent.run("weather?"))
    assert result.output == Weather(city="Oslo", celsius=1)
    second = model.calls[1].messages
    assert second[-2].text == '{"city": "Oslo"}'
    assert second[-1].role == "user" and "celsius" in second[-1].text
    assert len(model.calls[2].messages) == 5
    # Only the prompt and the valid answer are kept.
    assert [(m.role, m.text) for m in result.messages] == [
        ("user", "weather?"),
        ("assistant", '{"city": "Oslo", "celsius": 1}'),
    ]
    model.assert_complete()


def test_output_that_stays_invalid_raises_and_commits_nothing() -> None:
    model = ScriptedModel(["nope", "still no", "never"])
    agent = Agent(model, response_format=Weather, output_retries=2)
    with pytest.raises(OutputInvalidError) as info:
        arun(agent.run("q"))
    assert info.value.code == "OUTPUT_INVALID"
    assert len(model.calls) == 3
    assert agent.messages == []


def test_structured_output_after_tool_calls() -> None:
    @tool
    def lookup(city: str) -> float:
        """Temperature of a city."""
        return 12.5

    model = ScriptedModel(
        [
            Message("assistant", "", tool_calls=[ToolCall("c1", "lookup", {"city": "Paris"})]),
            "oops",
            '{"city": "Paris", "celsius": 12.5}',
        ]
    )
    result = arun(Agent(model, tools=[lookup], response_format=Weather).run("Paris?"))
    assert result.output == Weather(city="Paris", celsius=12.5)
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]
    assert is_well_formed(result.messages)


def test_without_response_format_output_is_none() -> None:
    assert arun(Agent(ScriptedModel(["{}"])).run("q")).output is None

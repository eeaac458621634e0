"""Structured output: the schema instruction, and parsing the final answer into a model."""

from __future__ import annotations

import json
import re

from pydantic import BaseModel, ValidationError

__all__ = ["correction_text", "output_instruction", "parse_output"]

_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\r?\n?(.*?)```", re.DOTALL)


def output_instruction(fmt: type[BaseModel]) -> str:
    """The system-prompt paragraph that tells the model the required JSON shape."""
    schema = json.dumps(fmt.model_json_schema(), separators=(",", ":"))
    return (
        "When you give your final answer, reply with only a JSON object (no other text) "
        f"that matches this JSON schema:\n{schema}"
    )


def parse_output(fmt: type[BaseModel], text: str) -> BaseModel:
    """Validate ``text`` (bare JSON or in a ```json fence) as ``fmt``; ValidationError if not."""
    body = text.strip()
    fenced = _FENCE.search(body)
    if fenced is not None:
        body = fenced.group(1).strip()
    return fmt.model_validate_json(body)


def correction_text(error: ValidationError) -> str:
    """The user message that tells the model what was wrong with its structured answer."""
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}"
        for e in error.errors(include_url=False)
    )
    return (
        f"Your answer did not match the required JSON schema ({problems}). "
        "Reply again with only the corrected JSON object."
    )

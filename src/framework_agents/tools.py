"""Tools: typed Python functions the model may call.

``@tool`` turns a sync or async function into a :class:`Tool`. Its JSON schema comes from
the signature (through a pydantic model built with ``create_model``), its description from
the docstring (a Google-style ``Args:`` section also describes each parameter). Arguments
the model sends are validated against the same model before the function runs.

A parameter annotated :class:`ToolContext` is not part of the schema: the agent injects
the calling agent and the call into it (for tools that read or write ``agent.state``).

Sync functions run in a worker thread (``asyncio.to_thread``), so several calls of one
assistant turn run concurrently whether the tools are sync or async.

:meth:`Tool.from_schema` makes a tool of a JSON schema and an async function of the
arguments dict and the call's ``ToolContext``, for tools described elsewhere (an MCP
server's): the arguments go to the function as the model sent them, and whoever runs the
function validates them. A tool
returns any JSON value (the model sees it as text), or a :class:`ToolOutput` when its
result is content blocks with metadata kept beside them in the tool message. A tool that
raises :class:`~framework_agents.errors.BackendUnavailableError` fails the run (the agent
does not show the model a failure only an operator can fix); any other exception is a
tool error the model sees.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast, get_args, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic_core import to_json

from .errors import HitlDecisionError, InvalidArgumentError, InvalidInputError
from .messages import ReasoningBlock, TextBlock, ToolCall
from .models._base import ToolSpec

if TYPE_CHECKING:
    from .agent.agent import Agent
    from .elicitation import ElicitationAnswer

__all__ = [
    "DECISION_KINDS",
    "TOOL_NAME_PATTERN",
    "DecisionKind",
    "Tool",
    "ToolArgumentsError",
    "ToolContext",
    "ToolOutput",
    "as_tool",
    "encode_tool_result",
    "tool",
]

DecisionKind = Literal["approve", "edit", "reject", "suspend"]

#: Every decision kind a human-in-the-loop tool may allow (the default set).
DECISION_KINDS: tuple[DecisionKind, ...] = ("approve", "edit", "reject", "suspend")

#: What OpenAI and Anthropic accept as a tool name (no ".", a leading digit is fine).
TOOL_NAME_PATTERN = "^[A-Za-z0-9_-]{1,64}$"
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # used with fullmatch: "$" would allow a "\n"
_NAME_RULE = (
    f"a tool name must match {TOOL_NAME_PATTERN} (ASCII letters, digits, '_' and '-', "
    "1 to 64 characters), as model providers require"
)
_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Params)\s*:\s*$", re.IGNORECASE)
_PARAM_LINE = re.compile(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


async def no_thread() -> None:
    """The ``pause`` of a context whose run has no thread: ``INVALID_ARGUMENT``."""
    raise InvalidArgumentError(
        "this run has no thread to pause: pausing from a tool or middleware needs a run "
        "with checkpointer= and thread_id="
    )


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Injected into a tool parameter annotated ``ToolContext``: who is calling, and how.

    ``answer`` is set when the call runs again with a human's answer to the question it
    asked (it raised :class:`~framework_agents.elicitation.ElicitationRequired`).

    ``await ctx.pause()`` saves the run's thread now (``pending=None``), through the run
    that holds it (never waiting for the lock that run holds): the run's history so far,
    up to and excluding the turn whose calls are running, and the agent's state. A run
    without a checkpointer and thread has nothing to pause: ``INVALID_ARGUMENT``.

    :meth:`report_progress` tells the run how far the call has got (``on_progress`` is
    the run's receiver of it, set by the agent's loop; ``None`` where nobody listens).
    """

    agent: Agent
    call: ToolCall
    answer: ElicitationAnswer | None = None
    pause: Callable[[], Awaitable[None]] = field(default=no_thread, repr=False, compare=False)
    on_progress: Callable[[float, float | None, str | None], None] | None = field(
        default=None, repr=False, compare=False
    )

    def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Report progress: ``agent.stream()`` yields it as a ``ToolProgressEvent``.

        ``progress`` (and ``total``, when known) are finite numbers, ``message`` a short
        text (cut at 1,000 characters); anything else is ``INVALID_ARGUMENT``. Nothing
        is stored; with nobody listening (``on_progress`` is ``None``) it does nothing.
        """
        for value, what in ((progress, "progress"), (total, "total")):
            if value is None and what == "total":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InvalidArgumentError(f"{what} must be a number, not {value!r:.100}")
            if value != value or value in (float("inf"), float("-inf")):
                raise InvalidArgumentError(f"{what} must be a finite number, not {value!r}")
        if message is not None and not isinstance(message, str):
            raise InvalidArgumentError(f"message must be a string, not {message!r:.100}")
        if self.on_progress is not None:
            self.on_progress(
                float(progress),
                None if total is None else float(total),
                None if message is None else message[:1000],
            )


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """A tool's result as the tool message holds it: content and metadata beside it.

    ``content`` is what the model sees (text, or text blocks); ``metadata`` keeps what it
    does not (an MCP tool's structured content and images) in the stored message, JSON
    values only. ``"kind"`` is the framework's key there (``"tool_error"``...): refused.
    """

    content: str | list[TextBlock | ReasoningBlock]
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if "kind" in self.metadata:
            raise InvalidArgumentError("a ToolOutput's metadata may not set 'kind'")


class ToolArgumentsError(InvalidInputError, ValueError):
    """The arguments of a call do not match the tool's schema (the model sees ``message``).

    ``TOOL_ARGUMENTS``; still a ``ValueError``, as it always was.
    """

    default_code = "TOOL_ARGUMENTS"

    def __init__(self, tool: str, error: ValidationError) -> None:
        details = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}"
            for e in error.errors(include_url=False)
        )
        super().__init__(f"invalid arguments for tool {tool!r}: {details}")
        self.tool = tool
        self.errors = error.errors(include_url=False)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _split_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The description without its ``Args:`` section, and the per-parameter descriptions."""
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        if not _SECTION.match(line):
            continue
        params: dict[str, str] = {}
        entry_indent: int | None = None
        current: str | None = None
        end = len(lines)
        for j in range(i + 1, len(lines)):
            entry = lines[j]
            if not entry.strip():
                continue
            indent = _indent(entry)
            if indent <= _indent(line):
                end = j
                break
            if entry_indent is None:
                entry_indent = indent
            match = _PARAM_LINE.match(entry)
            if indent == entry_indent and match:
                current = match.group(1)
                params[current] = match.group(2).strip()
            elif current is not None:
                params[current] = f"{params[current]} {entry.strip()}".strip()
        return "\n".join(lines[:i] + lines[end:]).strip(), params
    return doc.strip(), {}


def _is_context(annotation: Any) -> bool:
    return annotation is ToolContext or ToolContext in get_args(annotation)


def _hint_target(fn: Callable[..., Any]) -> Any:
    """The object whose annotations describe ``fn`` (partials and callable objects too)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.isfunction(fn) or inspect.ismethod(fn) or inspect.isbuiltin(fn):
        return fn
    return _dunder_call(fn) or fn


def _dunder_call(fn: object) -> Any:
    """``type(fn).__call__`` found statically (no attribute access on ``fn`` itself)."""
    for klass in type(fn).__mro__:
        if "__call__" in klass.__dict__:
            return klass.__dict__["__call__"]
    return None


def _checked_name(fn: Callable[..., Any], name: object) -> str:
    """The tool's name (``name``, else ``fn.__name__``); INVALID_ARGUMENT unless it fits."""
    if name is not None:
        if not isinstance(name, str) or _NAME.fullmatch(name) is None:
            raise InvalidArgumentError(f"invalid tool name {name!r}: {_NAME_RULE}")
        return name
    derived = getattr(fn, "__name__", None)
    if not isinstance(derived, str) or _NAME.fullmatch(derived) is None:
        raise InvalidArgumentError(
            f"invalid tool name {derived!r} (the function name): {_NAME_RULE}; "
            "give the tool another name with name=..."
        )
    return derived


def encode_tool_result(value: Any) -> str:
    """The text a model sees for a tool's return value: ``str`` as is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return to_json(value, fallback=str).decode()


class Tool:
    """A function the model may call: name, description, JSON schema and approval policy."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        requires_approval: bool = False,
        allowed_decisions: Sequence[DecisionKind] = DECISION_KINDS,
    ) -> None:
        if not callable(fn):
            raise InvalidArgumentError(f"a tool needs a callable, not {type(fn).__name__}")
        self.fn: Callable[..., Any] = fn
        self.name: str = _checked_name(fn, name)
        doc_text, param_docs = _split_docstring(inspect.getdoc(fn) or "")
        self.description: str = description if description is not None else doc_text
        self.requires_approval: bool = bool(requires_approval)
        if isinstance(allowed_decisions, str):
            raise HitlDecisionError("allowed_decisions must be a sequence of decision kinds")
        unknown = [d for d in allowed_decisions if d not in DECISION_KINDS]
        if unknown or not allowed_decisions:
            raise HitlDecisionError(
                f"allowed_decisions for tool {self.name!r} must be a non-empty subset of "
                f"{list(DECISION_KINDS)}, got {list(allowed_decisions)!r}"
            )
        self.allowed_decisions: tuple[DecisionKind, ...] = tuple(allowed_decisions)
        # Async callable objects count too: their ``__call__`` is a coroutine function.
        self.is_async: bool = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            _dunder_call(fn)
        )
        self._context_param: str | None = None
        #: ``None`` for a tool made by :meth:`from_schema` (its arguments pass as sent).
        self.args_model: type[BaseModel] | None = self._build_args_model(param_docs)
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        self.parameters: dict[str, Any] = schema
        self.spec: ToolSpec = ToolSpec(
            name=self.name, description=self.description, parameters=schema
        )
        self.__doc__ = inspect.getdoc(fn) or f"Tool {self.name}."
        self.__name__ = self.name

    @classmethod
    def from_schema(
        cls,
        name: str,
        description: str,
        parameters: Mapping[str, Any],
        fn: Callable[[dict[str, Any], ToolContext | None], Awaitable[Any]],
        *,
        requires_approval: bool = False,
        allowed_decisions: Sequence[DecisionKind] = DECISION_KINDS,
    ) -> Tool:
        """A tool described by a JSON object schema; ``await fn(args, context)`` runs a call.

        ``context`` is the call's :class:`ToolContext` (``None`` when the tool is invoked
        without one).

        ``args`` is the arguments dict as the model sent it (or as a human edited it):
        the function (an MCP server) validates it, and its refusal is a tool error the
        model sees. ``parameters`` must be an object schema (``INVALID_ARGUMENT``).
        """
        if not (isinstance(parameters, Mapping) and parameters.get("type") == "object"):
            raise InvalidArgumentError(
                f"tool {name!r}: its input schema must be a JSON object schema "
                f'({{"type": "object", ...}}), got {parameters!r:.200}'
            )

        async def described() -> None:
            """Stands for ``fn`` while the constructor checks the name and decisions."""

        described.__doc__ = description or f"Tool {name}."
        made = cls(
            described,
            name=name,
            description=description,
            requires_approval=requires_approval,
            allowed_decisions=allowed_decisions,
        )
        made.fn = fn
        made.args_model = None
        made.parameters = dict(parameters)
        made.spec = ToolSpec(
            name=made.name, description=made.description, parameters=made.parameters
        )
        return made

    def _build_args_model(self, param_docs: Mapping[str, str]) -> type[BaseModel]:
        try:
            signature = inspect.signature(self.fn)
            hints = get_type_hints(_hint_target(self.fn), include_extras=True)
        except (TypeError, ValueError, NameError) as exc:
            raise InvalidArgumentError(
                f"cannot read the signature of tool {self.name!r}: {exc}"
            ) from exc
        # Fields get neutral names (``p0``, ``p1``...) with the parameter's name as alias, so
        # parameters pydantic reserves (``model_config``, ``schema``, ``json``, ``_x``...)
        # work like any other; schema, validation and error locations use the alias.
        fields: dict[str, Any] = {}
        self._param_names: dict[str, str] = {}
        for param in signature.parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
                raise InvalidArgumentError(
                    f"tool {self.name!r}: parameter {param.name!r} must be a named, "
                    "keyword-passable parameter (no *args, **kwargs or positional-only)"
                )
            annotation = hints.get(param.name, Any)
            if _is_context(annotation):
                self._context_param = param.name
                continue
            default = ... if param.default is param.empty else param.default
            field_name = f"p{len(fields)}"
            self._param_names[field_name] = param.name
            fields[field_name] = (
                annotation,
                Field(
                    default,
                    alias=param.name,
                    description=param_docs.get(param.name) or None,
                ),
            )
        try:
            return cast(
                type[BaseModel],
                create_model(
                    f"{self.name}_arguments",
                    __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False),
                    **fields,
                ),
            )
        except Exception as exc:  # pydantic raises several kinds for unsupported types
            raise InvalidArgumentError(
                f"tool {self.name!r}: cannot build a JSON schema from its signature: {exc}"
            ) from exc

    def validate(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Validated keyword arguments for the function; :class:`ToolArgumentsError` if invalid.

        A tool made by :meth:`from_schema` takes the arguments as they are (a copy).
        """
        if self.args_model is None:
            return dict(args)
        try:
            model = self.args_model.model_validate(dict(args))
        except ValidationError as exc:
            raise ToolArgumentsError(self.name, exc) from None
        return {param: getattr(model, field) for field, param in self._param_names.items()}

    async def invoke(self, args: Mapping[str, Any], *, context: ToolContext | None = None) -> Any:
        """Validate ``args`` and run the function (sync functions in a worker thread)."""
        kwargs = self.validate(args)
        if self.args_model is None:
            return await self.fn(kwargs, context)
        if self._context_param is not None:
            if context is None:
                raise InvalidArgumentError(f"tool {self.name!r} needs a ToolContext")
            kwargs[self._context_param] = context
        if self.is_async:
            return await self.fn(**kwargs)
        result = await asyncio.to_thread(self.fn, **kwargs)
        if inspect.isawaitable(result):
            # A sync wrapper that returns a coroutine (e.g. a functools.partial of one).
            return await result
        return result

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly (the decorated name stays usable)."""
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        flag = ", requires_approval=True" if self.requires_approval else ""
        return f"Tool({self.name!r}{flag})"


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool = False,
    allowed_decisions: Sequence[DecisionKind] = DECISION_KINDS,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool = False,
    allowed_decisions: Sequence[DecisionKind] = DECISION_KINDS,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a :class:`Tool` of a typed function: ``@tool`` or ``@tool(name=..., ...)``."""

    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool(
            f,
            name=name,
            description=description,
            requires_approval=requires_approval,
            allowed_decisions=allowed_decisions,
        )

    if fn is not None:
        return wrap(fn)
    return wrap


def as_tool(value: Tool | Callable[..., Any]) -> Tool:
    """``value`` itself if it is a :class:`Tool`, else ``tool(value)`` (plain functions work)."""
    return value if isinstance(value, Tool) else Tool(value)

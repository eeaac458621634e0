"""``MCPClient``: one MCP server, over stdio (a subprocess) or streamable HTTP.

The SDK's ``Client`` lives in a task of its own that this object starts and stops: the
SDK's task groups must be entered and left by one task, and a caller's ``async with``
may span several. Starting waits at most ``start_timeout`` seconds for the server to
answer; a command that does not exist, exits at once or never answers, or a URL that
does not answer, is ``BACKEND_UNAVAILABLE`` naming it.

A server's questions during a call (elicitation) are ``_elicit``'s: the client declares
the capability and raises them as
:class:`~framework_agents.elicitation.ElicitationRequired`.

Malformed JSON-RPC from a server never leaves a raw SDK exception or a hang behind it: a
message that is not JSON-RPC ends the calls then running with a tool error; an answer
the SDK cannot read as the call's result is a tool error; a listing it cannot read is
``BACKEND_UNAVAILABLE``; a start whose handshake never completes is
``BACKEND_UNAVAILABLE`` after ``start_timeout``. A response whose id matches no request
is dropped (it may be a late answer to a call that timed out), so a server that answers
a call only under a wrong id holds that call until its ``call_timeout``.

``tools()`` asks the server every time (no cache): after a server's
``tools/list_changed`` a new ``tools()`` gives the new list for the next agent. Tools
already handed to an agent keep calling the server by name; one the server removed then
answers with an error the model sees.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx2
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from ..elicitation import ElicitationAnswer, ElicitationRequired
from ..errors import BackendUnavailableError, InvalidArgumentError
from ..messages import Message
from ..tools import Tool
from . import _convert
from ._convert import MCPPrompt, MCPResource, ResourceContents
from ._elicit import LiveCall, LiveCalls, Round
from ._sdk import Client, MCPError, StdioServerParameters, types
from ._tools import MCPToolError, Reporter, approval_rule, make_tool, selected

__all__ = ["DEFAULT_MAX_RESULT_CHARS", "DEFAULT_START_TIMEOUT", "MCPClient"]

logger = logging.getLogger(__name__)

#: Seconds a server has to start and answer the first request.
DEFAULT_START_TIMEOUT = 10.0
#: Characters of one tool result (text and attachments) past which the call is refused.
DEFAULT_MAX_RESULT_CHARS = 1_000_000
#: Pages of a listing read at most (a server whose cursor never ends cannot hang a call).
_MAX_PAGES = 100
#: ``input_required`` answers one call may get in a row before it fails.
_MAX_ROUNDS = 10


class MCPClient:
    """A connection to one MCP server: its tools, resources and prompts.

    Make one with :meth:`stdio` or :meth:`http`, then ``async with client:``.
    """

    def __init__(
        self,
        server: StdioServerParameters | str,
        *,
        target: str,
        headers: Mapping[str, str] | None = None,
        start_timeout: float = DEFAULT_START_TIMEOUT,
    ) -> None:
        if not isinstance(start_timeout, int | float) or start_timeout <= 0:
            raise InvalidArgumentError(
                f"start_timeout must be a positive number of seconds, not {start_timeout!r}"
            )
        self._server = server
        self._headers = dict(headers or {})
        self._start_timeout = float(start_timeout)
        #: What the server is, for messages: the command line or the URL.
        self.target = target
        self._client: Any = None
        self._owner: asyncio.Task[None] | None = None
        self._closing = asyncio.Event()
        self._live = LiveCalls()

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        start_timeout: float = DEFAULT_START_TIMEOUT,
    ) -> MCPClient:
        """A server started as ``command args...``, spoken to over its stdin and stdout.

        ``env`` is added to this process's environment; the server's stderr is ours.
        """
        if not isinstance(command, str) or not command:
            raise InvalidArgumentError(f"command must be a non-empty string, not {command!r}")
        if isinstance(args, str) or not all(isinstance(a, str) for a in args):
            raise InvalidArgumentError(f"args must be a sequence of strings, not {args!r:.100}")
        environment = {**os.environ, **dict(env or {})}
        params = StdioServerParameters(
            command=command,
            args=list(args),
            env=environment,
            cwd=Path(cwd) if cwd is not None else None,
        )
        return cls(params, target=" ".join([command, *args]), start_timeout=start_timeout)

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        start_timeout: float = DEFAULT_START_TIMEOUT,
    ) -> MCPClient:
        """A server at ``url`` over streamable HTTP; ``headers`` go with every request."""
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidArgumentError(f"url must be an http:// or https:// URL, not {url!r}")
        return cls(url, target=url, headers=headers, start_timeout=start_timeout)

    def __repr__(self) -> str:
        state = "connected" if self._client is not None else "not connected"
        return f"MCPClient({self.target!r}, {state})"

    # -- lifecycle --------------------------------------------------------------------

    async def __aenter__(self) -> MCPClient:
        if self._owner is not None:
            raise InvalidArgumentError(f"MCPClient for {self.target!r} is already in use")
        self._closing = asyncio.Event()
        ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._owner = asyncio.create_task(self._own(ready), name=f"mcp {self.target}")
        try:
            async with asyncio.timeout(self._start_timeout):
                self._client = await asyncio.shield(ready)
        except BaseException as exc:
            await self._stop(cancel=True)
            if isinstance(exc, TimeoutError):
                raise BackendUnavailableError(
                    f"MCP server {self.target!r} did not answer within {self._start_timeout} s"
                ) from None
            if isinstance(exc, Exception):
                raise BackendUnavailableError(
                    f"MCP server {self.target!r} could not be started or reached: {_describe(exc)}"
                ) from exc
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._stop()

    async def _own(self, ready: asyncio.Future[Any]) -> None:
        """Hold the SDK client open until ``__aexit__`` (the SDK wants one task for it)."""
        try:
            async with contextlib.AsyncExitStack() as stack:
                server: Any = self._server
                if isinstance(server, str):
                    http = await stack.enter_async_context(
                        httpx2.AsyncClient(
                            headers=self._headers, timeout=httpx2.Timeout(30.0, read=300.0)
                        )
                    )
                    server = streamable_http_client(server, http_client=http)
                client = await stack.enter_async_context(
                    Client(
                        server,
                        elicitation_callback=self._live.on_elicit,
                        message_handler=self._on_message,
                    )
                )
                ready.set_result(client)
                await self._closing.wait()
        except BaseException as exc:
            if not ready.done():
                if isinstance(exc, asyncio.CancelledError):
                    ready.cancel()
                else:
                    ready.set_exception(exc)
                    return
            elif not isinstance(exc, asyncio.CancelledError):
                # A server that died while connected ends here when the client closes.
                logger.info("MCP server %r: closing: %s", self.target, _describe(exc))
                return
            raise

    async def _stop(self, *, cancel: bool = False) -> None:
        """Close the connection (``cancel``: stop a start that is still under way)."""
        owner, self._owner, self._client = self._owner, None, None
        if owner is None:
            return
        self._live.close()
        self._closing.set()
        if cancel:
            owner.cancel()
        try:
            await owner
        except asyncio.CancelledError:
            if not owner.cancelled():
                raise
        except Exception as exc:  # the owner reports its own failures; nothing to add
            logger.info("MCP server %r: stopped: %s", self.target, _describe(exc))

    async def _on_message(self, message: Any) -> None:
        """The SDK's handler of notifications and transport faults (a malformed message).

        A message that is not JSON-RPC (a line that is not JSON, JSON that is no
        request, response or notification) cannot be matched to the call it may answer:
        every call then running ends with a tool error naming it, rather than wait for an
        answer that may never come. The connection stays open for the calls after it.
        """
        if not isinstance(message, Exception):
            return
        what = _malformed(message)
        ended = self._live.fail_running(
            MCPToolError(f"the MCP server sent a malformed message ({what})")
        )
        logger.warning(
            "MCP server %r sent a malformed message (%s); %d running calls end with it",
            self.target,
            what,
            ended,
        )

    def _connected(self) -> Any:
        if self._client is None:
            raise BackendUnavailableError(
                f"MCP client for {self.target!r} is not connected (use `async with client:`)"
            )
        return self._client

    async def _request(self, what: str, request: Any) -> Any:
        """Await one SDK request; a closed connection is ``BACKEND_UNAVAILABLE``."""
        try:
            return await request
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                raise BackendUnavailableError(
                    f"MCP server {self.target!r} closed the connection during {what}"
                ) from None
            raise
        except (OSError, httpx2.HTTPError) as exc:
            raise BackendUnavailableError(
                f"MCP server {self.target!r} could not be reached during {what}: {_describe(exc)}"
            ) from None

    # -- tools ------------------------------------------------------------------------

    async def tools(
        self,
        *,
        prefix: str = "",
        include: Sequence[str] | set[str] | None = None,
        exclude: Sequence[str] | set[str] | None = None,
        requires_approval: Any = False,
        call_timeout: float | None = None,
        max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
    ) -> list[Tool]:
        """The server's tools (asked now) as tools an :class:`~framework_agents.Agent` takes.

        Args:
            prefix: put before each server name (give each server its own when one agent
                takes the tools of several).
            include: server names to keep (default: all).
            exclude: server names to leave out.
            requires_approval: ``True``, a set of server names, or ``callable(name) ->
                bool``: those tools go through the agent's approvals.
            call_timeout: seconds one call may take (``None``: no limit); past it the model
                reads a tool error.
            max_result_chars: a larger result is refused with a tool error the model reads.
        """
        if not isinstance(prefix, str):
            raise InvalidArgumentError(f"prefix must be a string, not {prefix!r}")
        if call_timeout is not None and (
            not isinstance(call_timeout, int | float) or call_timeout <= 0
        ):
            raise InvalidArgumentError(
                f"call_timeout must be a positive number of seconds, not {call_timeout!r}"
            )
        if not isinstance(max_result_chars, int) or max_result_chars <= 0:
            raise InvalidArgumentError(
                f"max_result_chars must be a positive int, not {max_result_chars!r}"
            )
        needs_approval = approval_rule(requires_approval)
        listed = await self._list("tools/list", "tools")
        offered = {t.name: t for t in listed}
        return [
            make_tool(
                self,
                offered[name],
                prefix=prefix,
                requires_approval=needs_approval(name),
                call_timeout=call_timeout,
                max_result_chars=max_result_chars,
            )
            for name in selected(list(offered), include, exclude)
        ]

    async def call_tool(
        self,
        name: str,
        args: dict[str, Any],
        *,
        call_timeout: float | None,
        answer: ElicitationAnswer | None = None,
        progress: Reporter | None = None,
    ) -> Any:
        """Call the server's tool ``name`` (its ``CallToolResult``); see the module doc.

        ``progress`` receives the server's progress notifications of this call.

        A question of the server raises ``ElicitationRequired``; the call made again
        with ``answer`` (the human's, to that question) goes on from it (``_elicit``).
        On a stateful server, whose questions do not say which call asks, the calls of
        one client run one at a time.
        """
        stateful = self._connected().protocol_version not in MODERN_PROTOCOL_VERSIONS
        async with self._live.one_at_a_time() if stateful else contextlib.nullcontext():
            return await self._call(name, args, call_timeout, answer, progress)

    async def _call(
        self,
        name: str,
        args: dict[str, Any],
        call_timeout: float | None,
        answer: ElicitationAnswer | None,
        report: Reporter | None = None,
    ) -> Any:
        """:meth:`call_tool`, on either protocol era."""
        state = answer.elicitation.state if answer is not None else {}
        if "live" in state:
            parked = self._live.parked(state["live"])
            if parked is not None:
                assert answer is not None
                parked.answer(answer)
                return await self._finish(name, parked, call_timeout)
            # The call that asked is gone (a restart): sent again, the answer ready.
            return await self._send(name, args, call_timeout, None, answer, report)
        current: Round | None = None
        if "questions" in state:
            assert answer is not None
            current = Round.from_state(state)
            current.answered(answer)
        for _ in range(_MAX_ROUNDS):
            if current is not None:
                question = current.next_question()
                if question is not None:
                    raise ElicitationRequired(question)
            result = await self._send(name, args, call_timeout, current, None, report)
            if not isinstance(result, types.InputRequiredResult):
                return result
            current = Round.of(result)
        raise MCPToolError(f"the server asked for input more than {_MAX_ROUNDS} times in a row")

    async def _send(
        self,
        name: str,
        args: dict[str, Any],
        call_timeout: float | None,
        current: Round | None,
        answered: ElicitationAnswer | None,
        report: Reporter | None = None,
    ) -> Any:
        """One ``tools/call`` (with the answers of ``current``): a result or ``input_required``.

        Its progress notifications go to ``report``; one ``report`` refuses (a number that
        is not finite) is logged and dropped: progress never fails a call.
        """
        session = self._connected().session

        async def progress(done: float, total: float | None, message: str | None) -> None:
            logger.debug("MCP tool %r: progress %s/%s %s", name, done, total, message or "")
            if report is None:
                return
            try:
                report(done, total, message)
            except InvalidArgumentError as exc:
                logger.info("MCP tool %r: progress dropped: %s", name, exc.message)

        call = LiveCall(answered)
        call.task = asyncio.create_task(
            session.call_tool(
                name,
                args,
                read_timeout_seconds=call_timeout,
                progress_callback=progress,
                input_responses=current.responses() if current is not None else None,
                request_state=current.request_state if current is not None else None,
                allow_input_required=True,
            )
        )
        self._live.add(call)
        return await self._finish(name, call, call_timeout)

    async def _finish(self, name: str, call: LiveCall, call_timeout: float | None = None) -> Any:
        """The result of a live call, or its question raised (the call parked)."""
        try:
            outcome = await self._request(f"a call of tool {name!r}", call.wait())
        except MCPError as exc:
            self._live.drop(call)
            if exc.code == types.REQUEST_TIMEOUT:
                raise MCPToolError(f"no answer within {call_timeout} s") from None
            raise MCPToolError(exc.message) from None
        except ValidationError as exc:
            self._live.drop(call)
            raise MCPToolError(
                f"the server's answer is malformed: {exc.error_count()} errors"
            ) from None
        except BaseException:
            self._live.drop(call)
            call.close()
            raise
        if call.parked:
            raise ElicitationRequired(outcome)
        self._live.drop(call)
        return outcome

    # -- resources and prompts --------------------------------------------------------

    async def resources(self) -> list[MCPResource]:
        """The resources the server lists."""
        return [_convert.resource(r) for r in await self._list("resources/list", "resources")]

    async def read(self, uri: str) -> list[ResourceContents]:
        """The contents of the resource at ``uri`` (the server refuses: ``INVALID_ARGUMENT``)."""
        client = self._connected()
        try:
            result = await self._request(f"a read of {uri!r}", client.read_resource(uri))
        except MCPError as exc:
            raise InvalidArgumentError(
                f"MCP server {self.target!r} cannot read {uri!r}: {exc.message}"
            ) from None
        return [_convert.contents(c) for c in result.contents]

    async def prompts(self) -> list[MCPPrompt]:
        """The prompts the server offers."""
        return [_convert.prompt(p) for p in await self._list("prompts/list", "prompts")]

    async def prompt(self, name: str, arguments: Mapping[str, str] | None = None) -> list[Message]:
        """The prompt ``name`` filled in with ``arguments``, as messages."""
        client = self._connected()
        try:
            result = await self._request(
                f"prompt {name!r}", client.get_prompt(name, dict(arguments or {}))
            )
        except MCPError as exc:
            raise InvalidArgumentError(
                f"MCP server {self.target!r}: prompt {name!r}: {exc.message}"
            ) from None
        return _convert.prompt_messages(result)

    async def _list(self, method: str, field: str) -> list[Any]:
        """Every page of a listing, asked now."""
        client = self._connected()
        lister = {
            "tools/list": client.list_tools,
            "resources/list": client.list_resources,
            "prompts/list": client.list_prompts,
        }[method]
        items: list[Any] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            try:
                page = await self._request(method, lister(cursor=cursor, cache_mode="refresh"))
            except MCPError as exc:
                raise BackendUnavailableError(
                    f"MCP server {self.target!r}: {method}: {exc.message}"
                ) from None
            except ValidationError as exc:
                raise BackendUnavailableError(
                    f"MCP server {self.target!r} sent a malformed {method} answer: {_describe(exc)}"
                ) from None
            items.extend(getattr(page, field))
            cursor = page.next_cursor
            if cursor is None:
                break
        return items


def _malformed(exc: Exception) -> str:
    """What was wrong with a message the SDK could not read, in a few words."""
    if isinstance(exc, ValidationError):
        if any(e["type"] == "json_invalid" for e in exc.errors()):
            return "a line that is not JSON"
        return "JSON that is not a JSON-RPC request, response or notification"
    return _describe(exc)


def _describe(exc: BaseException) -> str:
    """One line for an error (an exception group by its first leaf)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"[:300]

"""Random histories for hypothesis: users, systems, assistant texts and tool-call groups.

The ``history_strategy`` fixture of ``conftest.py`` hands out :func:`histories`; import it
directly where a test needs the strategy at decoration time (``@given``/``@example``).
"""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import strategies as st

from framework_agents import Message, ToolCall

__all__ = ["HistoryStrategy", "histories"]

HistoryStrategy = Callable[..., st.SearchStrategy[list[Message]]]

_TEXTS = ["", "ok", "Let me check.", "The answer is 42. Anything else?", "hello"]


@st.composite
def histories(draw: st.DrawFn, *, max_groups: int = 12, well_formed: bool = False) -> list[Message]:
    """A random history of users, systems, assistant texts and tool-call groups.

    With ``well_formed=False`` it also holds what breaks histories: unanswered calls,
    orphaned and duplicate results, results after the wrong turn, repeated call ids.
    Message ids are ``m0``, ``m1``, ... (unique); call ids sometimes repeat across turns.
    """
    out: list[Message] = []
    issued: list[str] = []

    def add(role: str, text: str = "", **fields: object) -> None:
        out.append(Message(role, text, id=f"m{len(out)}", **fields))  # type: ignore[arg-type]

    kinds = ["user", "system", "assistant", "calls", "calls"]
    if not well_formed:
        kinds += ["orphan"]
    for _ in range(draw(st.integers(0, max_groups))):
        kind = draw(st.sampled_from(kinds))
        if kind == "orphan":
            stale = "ghost"
            if issued:
                reuse: bool = draw(st.booleans())
                if reuse:
                    stale = draw(st.sampled_from(issued))
            add("tool", "stray result", tool_call_id=stale, name="lookup")
        elif kind != "calls":
            add(kind, draw(st.sampled_from(_TEXTS)))
        else:
            count = draw(st.integers(1, 3))
            ids = [f"c{len(issued) + i}" for i in range(count)]
            if issued and draw(st.integers(0, 9)) == 0:
                ids[0] = draw(st.sampled_from(issued))  # an id reused by a later turn
            if not well_formed and count > 1 and draw(st.integers(0, 4)) == 0:
                ids[-1] = ids[0]  # duplicate id inside one turn
            issued.extend(ids)
            calls = [
                ToolCall(cid, draw(st.sampled_from(["lookup", "add"])), {"n": i})
                for i, cid in enumerate(ids)
            ]
            add("assistant", draw(st.sampled_from(_TEXTS)), tool_calls=calls)
            unique = list(dict.fromkeys(ids))
            if well_formed:
                answers = draw(st.permutations(unique))
            else:
                answers = draw(st.lists(st.sampled_from([*unique, "ghost"]), max_size=5))
            for cid in answers:
                add("tool", f"result {cid}", tool_call_id=cid, name="lookup")
    return out

"""Real crashes (SIGKILL) at every step of a resume: the approved call's side effect
happens at most once, and the interrupted-then-resumed history is well formed."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from threads_scenario import CRASH_POINTS, effects, publishing_agent

from async_helper import arun
from framework_agents import FileCheckpointer, HitlInterrupt, is_well_formed
from framework_agents.errors import HitlDecisionError

CHILD = Path(__file__).with_name("threads_child.py")

#: crash point -> (side effects in the end, whether an unknown outcome is surfaced)
EXPECTED = {
    "model": (1, False),  # nothing ran: the next resume runs the approved call
    "before_in_flight": (1, False),  # not recorded as started, so it did not start
    "before_tool": (0, True),  # recorded as started: unknown, a human rejects a re-run
    "after_effect": (1, True),
    "after_tool": (1, True),
    "after_result": (1, False),  # the result is in the checkpoint: never run again
    "after_final": (1, False),
}


def test_every_crash_point_is_covered() -> None:
    assert set(EXPECTED) == set(CRASH_POINTS)


#: The crash points ``make test`` runs: one an unknown outcome is surfaced after, one whose
#: result is already saved (each kill is a process start, ~1 s); ``make stress`` runs all.
QUICK = ("before_tool", "after_result")


@pytest.mark.parametrize(
    "crash_at",
    [p if p in QUICK else pytest.param(p, marks=pytest.mark.slow) for p in CRASH_POINTS],
)
def test_a_crash_anywhere_in_a_resume_never_runs_the_approved_call_twice(
    tmp_path: Path, crash_at: str
) -> None:
    root, fx = tmp_path / "cp", tmp_path / "effects.txt"
    with pytest.raises(HitlInterrupt):
        arun(
            publishing_agent(fx).run(
                "publish it", checkpointer=FileCheckpointer(root), thread_id="t1"
            )
        )

    child = subprocess.run(
        [sys.executable, str(CHILD), str(root), str(fx), crash_at],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stdout + child.stderr[-2000:]
    left = arun(FileCheckpointer(root).load("t1"))  # readable whatever the instant
    assert left is not None and is_well_formed(left.messages)

    # The operator resumes again with the same approval; an unknown outcome is rejected,
    # and a thread already finished refuses the approval (it answers nothing).
    surfaced = refused = False
    try:
        result = arun(
            publishing_agent(fx).resume(
                "t1", {"publish": "approve"}, checkpointer=FileCheckpointer(root)
            )
        )
    except HitlDecisionError:
        refused = True
        result = None
    except HitlInterrupt as unknown:
        assert unknown.outcome_unknown, unknown
        surfaced = True
        result = arun(
            publishing_agent(fx).resume(
                "t1",
                {unknown.key: {"reject": "it may have run already"}},
                checkpointer=FileCheckpointer(root),
            )
        )

    count, expect_surfaced = EXPECTED[crash_at]
    assert effects(fx) == ["hello"] * count
    assert surfaced is expect_surfaced
    assert refused is (crash_at == "after_final")
    final = arun(FileCheckpointer(root).load("t1"))
    assert final is not None
    assert final.pending is None and final.in_flight == [] and final.turn is None
    assert final is not None
    histories = [final.messages] if result is None else [final.messages, result.messages]
    for history in histories:
        assert is_well_formed(history)
        assert history[0].text == "publish it"
        answers = [m for m in history if m.role == "tool" and m.name == "publish"]
        assert len(answers) == 1  # one call, answered once (a result or a rejection)
        assert answers[0].metadata.get("kind") == ("rejected" if surfaced else None)

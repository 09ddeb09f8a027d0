"""What the commands that turn recorded runs into tests say: ``lil fixture`` and ``lil diff``."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from . import render

if TYPE_CHECKING:
    from ..inspection.diff import Difference, RunDiff
    from ..inspection.fixture import FixtureResult


def fixture_lines(result: FixtureResult) -> list[str]:
    """``lil fixture``: the run copied, where to, what was redacted, and how to replay it."""
    run = result.run
    out = [
        f"copied run {run.id} of goal {run.goal!r} ({run.state}, "
        f"{render.counted(result.rows, 'row')}) into {result.to}"
    ]
    if result.redacted:
        out.append("redacted: " + ", ".join(result.redacted))
    name = f", run={run.name!r}" if run.name else ""
    out.append(
        f"Replay it in a test: Journal({run.goal!r}{name}, path={str(result.to)!r}, "
        f"replay_only=True), or @pytest.mark.letitloop_replay({str(result.to)!r})"
    )
    return out


#: The sign of each kind of difference in ``lil diff``'s lines.
_SIGNS = {"added": "+", "removed": "-"}


def diff_lines(diff: RunDiff) -> list[str]:
    """``lil diff``: one line per difference, then how many rows are the same."""
    a, b = diff.a, diff.b
    count = len(diff.differences)
    out = [
        f"run {a.id} (goal {a.goal!r}) -> run {b.id} (goal {b.goal!r}): "
        f"{render.counted(count, 'difference')}, {render.counted(diff.same, 'row')} the same"
    ]
    out += [difference_line(d) for d in diff.differences]
    if count:
        out.append(
            f"Details of a row: lil show {shlex.quote(a.id)} --step KEY, and the same for {b.id}"
        )
    return out


def difference_line(d: Difference) -> str:
    """One difference: its sign, its key, what changed."""
    sign = _SIGNS.get(d.change, "~")
    if d.change == "added":
        said = f"added ({d.b})"
    elif d.change == "removed":
        said = f"removed ({d.a})"
    elif d.change == "result":
        said = f"result: {d.detail}"
    elif d.change == "arguments":
        said = f"arguments: {d.detail}"
    else:
        said = f"{d.change}: {d.a} -> {d.b}" + (f" ({d.detail})" if d.detail else "")
    return f"  {sign} {d.key}  {said}"

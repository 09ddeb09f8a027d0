"""What a crash test's trial compares besides steps: the program's output (``--output``:
exact, last line, ignored, or the lines a regular expression matches) and the lines of
its side-effect file (``--effects``)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from ..errors import LetItLoopError


def effects_in(folder: Path, effects: str | None) -> Counter[str]:
    """The lines of the side-effect file in ``folder``, counted (empty without one)."""
    if effects is None or not (folder / effects).exists():
        return Counter()
    return Counter((folder / effects).read_text("utf-8", "replace").splitlines())


def shown(stdout: str, output: str) -> str:
    """The part of ``stdout`` that ``output`` (exact, last-line, ignore, match:REGEX) compares."""
    if output == "exact":
        return stdout
    if output == "last-line":
        lines = stdout.rstrip().splitlines()
        return lines[-1] if lines else ""
    if output.startswith("match:"):
        pattern = re.compile(output.removeprefix("match:"))
        return "\n".join(line for line in stdout.splitlines() if pattern.search(line))
    return ""


def output_mode(output: str) -> str:
    """``output`` checked: exact, last-line, ignore, or match: and a regular expression."""
    if output in ("exact", "last-line", "ignore"):
        return output
    if output.startswith("match:"):
        try:
            re.compile(output.removeprefix("match:"))
        except re.error as bad:
            raise LetItLoopError(
                f"crashtest: --output {output!r}: the regular expression after 'match:' "
                f"does not compile ({bad}); e.g. --output 'match:^answer: '"
            ) from None
        return output
    raise LetItLoopError(
        f"crashtest: --output {output!r}: expected exact, last-line, ignore or "
        f"match:REGEX (the lines matching REGEX, e.g. 'match:^answer: ')"
    )

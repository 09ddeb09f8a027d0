"""The package's modules as syntax trees, parsed once a process for every test file that reads
them (tests/test_architecture.py, test_step_names.py, test_journal.py): about 1 s of CPU a
parse of the whole package, and those files often share an xdist worker."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "letitloop"


@functools.cache
def package_files() -> tuple[Path, ...]:
    """Every module file of the package, sorted (read once; not mutated)."""
    return tuple(sorted(PACKAGE.rglob("*.py")))


@functools.cache
def parsed(path: Path) -> ast.Module:
    """The syntax tree of one file, read once a process (never mutated)."""
    return ast.parse(path.read_text(encoding="utf-8"))


@functools.cache
def walked(path: Path) -> tuple[ast.AST, ...]:
    """Every node of one file's tree, in ``ast.walk``'s order, walked once a process (a dozen
    rules read every module: each walk of the package cost 0.2 s of CPU)."""
    return tuple(ast.walk(parsed(path)))

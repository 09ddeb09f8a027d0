"""The steps letitloop records itself have names of their own, never where their code lives.

A step's row holds its function's name and a replay must find the same one
(letitloop/identity/step_names.py): a library step recorded as
``letitloop.budgets.record_budget`` would make every unfinished run fail once that module moved.
Three guards: the names themselves; a scan of the package's source for a
function of its own handed to a step without a name (the next one added is
caught before it records anything); and programs using every primitive and
adapter, whose files must hold no module path of the package (tests/test_golden.py,
whose forker of those programs it shares).
"""

from __future__ import annotations

import ast
import asyncio
import sqlite3
import sys
import threading
from pathlib import Path

import pytest
from package_trees import PACKAGE, package_files, parsed

from letitloop import Journal
from letitloop.identity.step_names import HISTORY, NAMES, OLD_NAMES, Named, named, same_function

#: The calls that record a step with the function among their arguments: the journal's
#: own and the adapters' helpers that pass their ``fn`` on (found by :func:`forwarders`).
STEP_CALLS = frozenset({"step", "async_step"})


def functions_in(db: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {name for (name,) in conn.execute("SELECT name FROM functions")}
    finally:
        conn.close()


def decorated_named(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(
        isinstance(d, ast.Call) and isinstance(d.func, ast.Name) and d.func.id == "named"
        for d in fn.decorator_list
    )


def call_name(call: ast.Call) -> str | None:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None


class Function:
    """A function of a module's tree: its node, and the calls and the functions inside it
    at any depth (nested functions' included)."""

    def __init__(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.node = node
        self.params = {a.arg for a in [*node.args.posonlyargs, *node.args.args]}
        self.calls: list[ast.Call] = []
        self.inner: list[ast.FunctionDef | ast.AsyncFunctionDef] = []


def functions_of(tree: ast.Module) -> list[Function]:
    """Every function of ``tree`` with what is inside it, in one pass over the tree (the
    scan below asks each function for its calls: one walk of each function's subtree
    after another took seconds over the package)."""
    found: list[Function] = []

    def visit(node: ast.AST, enclosing: list[Function]) -> None:
        if isinstance(node, ast.Call):
            for f in enclosing:
                f.calls.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for f in enclosing:
                f.inner.append(node)
            function = Function(node)
            found.append(function)
            enclosing = [*enclosing, function]
        for child in ast.iter_child_nodes(node):
            visit(child, enclosing)

    visit(tree, [])
    return found


def names_passed(call: ast.Call) -> set[str]:
    """The plain names ``call`` passes after its first argument."""
    return {a.id for a in call.args[1:] if isinstance(a, ast.Name)}


def forwarders(functions: dict[str, list[Function]]) -> set[str]:
    """STEP_CALLS and the functions that pass one of their parameters to one of them
    (``functions``: each module's, :func:`functions_of`)."""
    passing = [  # each function's parameters and the calls inside it, with their plain names
        (f.node.name, f.params, call_name(call), names_passed(call))
        for module in functions.values()
        for f in module
        for call in f.calls
    ]
    calls = set(STEP_CALLS)
    while True:
        more = {fn for fn, params, called, names in passing if called in calls and names & params}
        if more <= calls:
            return calls
        calls |= more


def unnamed_step_functions(trees: dict[str, ast.Module]) -> list[str]:
    """Each function of the package's own passed to a step call without a name of its own:
    a module's function or a closure not decorated ``@named``, a method (``self.m``), or
    a ``partial`` of one, not wrapped in ``Named(...)``; as ``file:line: the argument``."""
    functions = {path: functions_of(tree) for path, tree in trees.items()}
    calls = forwarders(functions)
    found = []
    for path, tree in trees.items():
        top = {
            n.name: n
            for n in tree.body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and not decorated_named(n)
        }
        methods = {
            m.name
            for c in ast.walk(tree)
            if isinstance(c, ast.ClassDef)
            for m in c.body
            if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and not decorated_named(m)
        }
        for function in functions[path]:
            local = {n.name for n in function.inner if not decorated_named(n)}

            def ours(arg: ast.expr) -> bool:
                if isinstance(arg, ast.Name):
                    return arg.id in top or arg.id in local  # noqa: B023
                if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name):
                    return arg.value.id in ("self", "cls") and arg.attr in methods  # noqa: B023
                if isinstance(arg, ast.Call) and call_name(arg) == "partial" and arg.args:
                    return ours(arg.args[0])
                return isinstance(arg, ast.Lambda)

            for call in function.calls:
                # A call given ``fn_name`` passes on a step whose name was taken already
                # (the journal's own machinery: tracing, retries).
                if call_name(call) in calls and not any(
                    isinstance(a, ast.Name) and a.id == "fn_name" for a in call.args
                ):
                    found += [
                        f"{path}:{call.lineno}: {ast.unparse(a)}" for a in call.args if ours(a)
                    ]
    return sorted(set(found))


def package_trees() -> dict[str, ast.Module]:
    return {str(p.relative_to(PACKAGE.parent)): parsed(p) for p in package_files()}


class TestTheNamesOfTheLibrarysOwnSteps:
    def test_each_is_letitloop_and_a_word_after_a_colon_no_module_path_holds(self) -> None:
        for name in NAMES:
            assert name.startswith("letitloop:") and name.count(":") == 1, name
            assert name.isprintable() and " " not in name, name

    def test_each_name_files_held_before_stands_for_one_of_them(self) -> None:
        assert set(OLD_NAMES.values()) <= NAMES
        assert not set(OLD_NAMES) & NAMES
        assert sum(len(olds) for olds in HISTORY.values()) == len(OLD_NAMES)  # none twice
        assert same_function("letitloop.budgets.record_budget", "letitloop:budget")
        assert not same_function("letitloop.budgets.record_budget", "letitloop:patch")
        assert not same_function(None, "letitloop:budget")

    def test_a_name_not_in_the_table_is_refused(self) -> None:
        with pytest.raises(ValueError, match=r"step_names\.NAMES"):
            Named("letitloop:nothing", print)


def plain(x: int) -> int:
    return x + 1


class TestAStepOfANamedFunction:
    def test_it_is_recorded_under_the_name_and_replays_in_a_fresh_process(
        self, tmp_path: Path
    ) -> None:
        import subprocess

        db = tmp_path / "j.db"
        calls: list[int] = []

        @named("letitloop:budget")
        def recorded(x: int) -> int:
            calls.append(x)
            return x * 2

        with Journal("g", path=db, run="r") as j:
            assert j.step("a", recorded, 21) == 42
        assert functions_in(db) == {"letitloop:budget"}
        # Another process, with another function of that name: replayed, not called.
        program = (
            "import sys\nfrom letitloop import Journal\n"
            "from letitloop.identity.step_names import Named\n"
            "with Journal('g', path=sys.argv[1], run='r') as j:\n"
            "    print(j.step('a', Named('letitloop:budget', lambda x: 0), 21))\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", program, str(db)], capture_output=True, text=True, check=True
        )
        assert done.stdout.strip() == "42"
        assert calls == [21]

    def test_an_async_function_is_awaited_on_the_loop_not_in_a_worker_thread(
        self, tmp_path: Path
    ) -> None:
        threads: list[int] = []

        async def on_loop(x: int) -> int:
            threads.append(threading.get_ident())
            return x

        async def main() -> int:
            async with Journal("g", path=tmp_path / "j.db", run="r") as j:
                return await j.async_step("a", Named("letitloop:patch", on_loop), 5)

        assert asyncio.run(main()) == 5
        assert threads == [threading.get_ident()]  # asyncio.run's loop runs on this thread


class TestNoStepTheLibraryRecordsIsNamedByWhereItsCodeLives:
    def test_no_function_of_the_package_is_handed_to_a_step_without_a_name(self) -> None:
        assert unnamed_step_functions(package_trees()) == []

    def test_the_scan_finds_one_that_is(self) -> None:
        # What the next adapter might write: each of these would record a module path.
        source = (
            "from functools import partial\n"
            "from letitloop.identity.step_names import Named, named\n"
            "def call_model(identity): ...\n"
            "@named('letitloop:budget')\n"
            "def fine(identity): ...\n"
            "def journaled(journal, key, fn, identity):\n"
            "    return journal.step(key, fn, identity)\n"
            "class Calls:\n"
            "    def _listed(self): ...\n"
            "    async def run(self, j, identity):\n"
            "        async def unit(): ...\n"
            "        await j.async_step('tools', self._listed)\n"
            "        await j.async_step('unit', unit)\n"
            "        await j.async_step('ok', Named('letitloop:patch', unit))\n"
            "        j.step('fine', fine, identity)\n"
            "        j.step('p', partial(call_model, 1))\n"
            "        return journaled(j, 'model', call_model, identity)\n"
        )
        found = unnamed_step_functions({"new.py": ast.parse(source)})
        assert found == [
            "new.py:12: self._listed",
            "new.py:13: unit",
            "new.py:16: partial(call_model, 1)",
            "new.py:17: call_model",
        ]

"""``JournaledExecutor``: a CodeAgent's code executions as journal steps.

A CodeAgent runs the code its model wrote, and the code's output (what it
printed, its last value, whether it gave the final answer) is the next model
call's prompt. Code that reads the clock or draws a random number
(smolagents lets it import ``time``, ``random`` and ``datetime``) prints
something else when it runs again, so a rerun whose code ran again would ask
the model another prompt than the one recorded. Each execution is therefore
a step, ``{label}.code`` (``#2``, … in order: an agent runs its code one
snippet at a time), its identity the code, its result what the executor
returned: output, logs, final-answer flag, or the error it raised (a failed
snippet is an observation like any other). A replay hands that back and
never runs the code.

The code's variables live on in the executor's ``state`` (a local executor's)
for the next snippet, so the step also records what the snippet changed
there: each variable the codec can store, by value (``set``; ``deleted``
those it removed); each made by a top-level ``import``, ``def`` or ``class``
statement, by name (``defined``: a replay evaluates those statements again,
which define and compute nothing); and the others by name and type
(``lost``). A replay puts the first two back. A later snippet that runs
fresh and uses a lost one fails in smolagents with "not defined"; that is
refused with ``LetItLoopError`` (the run stops, nothing recorded for the
snippet) rather than shown to the model as an error the first run never had.

Tool calls made by the code are keyed under its step, so two snippets that
call one tool with the same arguments keep their own recorded results.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from smolagents.local_python_executor import (
    CodeOutput,
    InterpreterError,
    PythonExecutor,
    evaluate_python_code,
)

from letitloop.adapters.agentcalls import plain_text
from letitloop.adapters.smolagents.calls import AgentCalls
from letitloop.codec import encode
from letitloop.errors import EncodeError, LetItLoopError
from letitloop.identity.step_names import named
from letitloop.identity.unchecked import unchecked

#: The executor's own entries of its state, rewritten by every snippet: never recorded.
INTERNAL = frozenset({"__name__", "_print_outputs", "_operations_count"})

#: How smolagents says that a snippet used a name nothing defined (a variable, a function).
UNDEFINED = (
    re.compile(r"The variable `(\w+)` is not defined"),
    re.compile(r"Forbidden function evaluation: '(\w+)' is not among"),
)

#: Statements that only define names: evaluated again when their snippet replays.
DEFINING = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)


def storable(value: Any) -> tuple[Any, bool]:
    """``value`` as the step keeps it: itself if the codec can store it, else its ``str()``
    (and True): the observation is made of ``str(output)``, so it reads the same."""
    value = plain_text(value)
    try:
        encode(value)
    except EncodeError:
        return str(value), True
    return value, False


def defined_names(node: ast.stmt) -> list[str]:
    """The names a defining statement binds."""
    if isinstance(node, ast.Import | ast.ImportFrom):
        return [(a.asname or a.name).split(".")[0] for a in node.names]
    assert isinstance(node, ast.FunctionDef | ast.ClassDef)
    return [node.name]


def definitions(code: str) -> dict[str, ast.stmt]:
    """The top-level defining statements of ``code``, by each name they bind (the last wins)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return {}
    found: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, DEFINING):
            for name in defined_names(node):
                found[name] = node
    return found


@named("letitloop:smolagents.code")
def run_code(identity: Any, call: tuple[JournaledExecutor, str, list[bool]]) -> dict[str, Any]:
    """The step's function: the snippet run by the real executor, as the step records it."""
    del identity  # the code, for the journal's argument check only
    executor, code, ran = call
    ran.append(True)
    inner = executor.executor
    state = getattr(inner, "state", None)
    try:
        with executor.calls.nested():
            out = inner(code)
    except Exception as error:
        refusal = within(error, LetItLoopError)
        if refusal is not None:  # a tool's refusal (a mismatch, a budget): never an observation
            executor.calls.refusal = refusal
            raise
        executor.refuse_if_missing(error)
        logs = "" if state is None else str(state.get("_print_outputs", ""))
        record: dict[str, Any] = {"error": str(error), "logs": logs}
        record.update(output=None, output_text=False, final=False)
    else:
        output, as_text = storable(out.output)
        record = {"error": None, "logs": out.logs, "output": output, "output_text": as_text}
        record["final"] = bool(out.is_final_answer)
    record.update(executor.changes(code))
    return record


def within(error: BaseException, kind: type[BaseException]) -> BaseException | None:
    """The ``kind`` error ``error`` was raised from, if any (a chain of causes)."""
    seen: BaseException | None = error
    for _ in range(8):  # a chain, never a cycle
        if seen is None or isinstance(seen, kind):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


class JournaledExecutor(PythonExecutor):
    """``executor`` with each call (a snippet of code) journaled as step ``{label}.code``.

    Everything else (``send_tools``, ``send_variables``, ``state``, ``cleanup``)
    is ``executor``'s. The variables a replayed snippet had set come back into a
    local executor's ``state``; a remote executor keeps its variables in its own
    kernel, which a new process does not have: there only the outputs replay.
    """

    def __init__(self, executor: PythonExecutor, calls: AgentCalls) -> None:
        self.executor = executor
        self.calls = calls
        #: The run (journal object and run id) ``known`` and ``missing`` are about.
        self._run: tuple[int, str | None] | None = None
        #: Each recorded variable's stored text, as the run's last record left it.
        self.known: dict[str, str] = {}
        #: The values it cannot store, by identity: a new object there is a change.
        self.opaque: dict[str, int] = {}
        #: Variables a replay could not bring back: name -> (its type, the step's key).
        self.missing: dict[str, tuple[str, str]] = {}

    def __getattr__(self, name: str) -> Any:
        executor = self.__dict__.get("executor")
        if executor is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(executor, name)

    def send_tools(self, tools: dict[str, Any]) -> None:
        self.executor.send_tools(tools)

    def send_variables(self, variables: dict[str, Any]) -> None:
        self.executor.send_variables(variables)

    def __call__(self, code_action: str) -> CodeOutput:
        self._same_run()
        ran: list[bool] = []
        record = self.calls.step(
            f"{self.calls.label}.code",
            run_code,
            {"code": code_action},
            unchecked((self, code_action, ran)),
        )
        if not ran:
            self.restore(record, code_action)
        state = getattr(self.executor, "state", None)
        if record["error"] is not None:
            if state is not None:
                state["_print_outputs"] = record["logs"]  # the agent shows them with the error
            raise InterpreterError(record["error"])
        return CodeOutput(
            output=record["output"], logs=record["logs"], is_final_answer=record["final"]
        )

    def _same_run(self) -> None:
        """Forget what another run recorded: each run's first snippet records every variable."""
        journal = self.calls.journal
        run = (id(journal), getattr(journal, "run_id", None))
        if run != self._run:
            self._run, self.known, self.opaque, self.missing = run, {}, {}, {}

    def changes(self, code: str) -> dict[str, Any]:
        """What the snippet just run changed in a local executor's variables (see the module)."""
        state = getattr(self.executor, "state", None)
        if state is None:
            return {"set": {}, "deleted": [], "defined": [], "lost": {}}
        custom = getattr(self.executor, "custom_tools", {})
        names = {**custom, **state}
        defs = definitions(code)
        changed: dict[str, Any] = {}
        defined: list[str] = []
        lost: dict[str, str] = {}
        for name, value in names.items():
            if name in INTERNAL:
                continue
            kept = plain_text(value)
            try:
                text = encode(kept)
            except EncodeError:
                self.known.pop(name, None)
                if name in defs:
                    defined.append(name)
                elif self.opaque.get(name) != id(value):  # made or changed by this snippet
                    lost[name] = type(value).__name__
                self.opaque[name] = id(value)
                continue
            self.opaque.pop(name, None)
            if self.known.get(name) != text:
                changed[name] = kept
                self.known[name] = text
        deleted = [name for name in list(self.known) if name not in names]
        for name in deleted:
            del self.known[name]
        for name in [n for n in self.opaque if n not in names]:
            del self.opaque[name]
        for name in [*changed, *defined]:
            self.missing.pop(name, None)
        return {"set": changed, "deleted": deleted, "defined": sorted(defined), "lost": lost}

    def restore(self, record: dict[str, Any], code: str) -> None:
        """Put back what a replayed snippet had changed in a local executor's variables."""
        state = getattr(self.executor, "state", None)
        if state is None:
            return
        key = f"{self.calls.label}.code"
        defs = definitions(code)
        wanted = [defs[name] for name in record["defined"] if name in defs]
        if wanted:
            source = "\n".join(ast.unparse(node) for node in dict.fromkeys(wanted))
            evaluate_python_code(
                source,
                static_tools=getattr(self.executor, "static_tools", None),
                custom_tools=getattr(self.executor, "custom_tools", None),
                state=state,
                authorized_imports=getattr(self.executor, "authorized_imports", []),
            )
        for name, value in record["set"].items():
            state[name] = value
            self.known[name] = encode(value)
            self.missing.pop(name, None)
        for name in record["deleted"]:
            state.pop(name, None)
            self.known.pop(name, None)
        for name in record["defined"]:
            self.missing.pop(name, None)
            if name in state:
                self.opaque[name] = id(state[name])
        for name, kind in record["lost"].items():
            self.missing[name] = (kind, key)

    def refuse_if_missing(self, error: Exception) -> None:
        """Raise LetItLoopError if ``error`` says the snippet used a variable a replay lost."""
        text = str(error)
        for pattern in UNDEFINED:
            for name in pattern.findall(text):
                if name in self.missing:
                    kind, key = self.missing[name]
                    refusal = LetItLoopError(
                        f"smolagents agent {self.calls.label!r}: its code uses the variable "
                        f"{name!r}, a {kind} that a replayed snippet ({key}) made and the journal "
                        f"could not keep (the codec stores no {kind}), so the resumed agent does "
                        f"not have it; register the type with letitloop.register (then it is "
                        f"kept), or start the request again as a new run (fresh=True, or "
                        f"'lil reset')"
                    )
                    self.calls.refusal = refusal
                    raise refusal from error

"""``resume(graph, config)``: after a crash, run the thread's unfinished request to its end.

LangGraph's tutorials resume a thread when ``graph.get_state(config).next``
is non-empty. After a kill under ``durability="async"`` (LangGraph's
default) that rule can stop half-way: the checkpoint that holds the
request's input is written in the background, so a process killed before
it was written leaves a thread with nothing saved, ``next`` empty, and the
request not done (a durable node's journal run left open). ``resume``
decides from what the saver recorded instead:

- with ``LetItLoopCheckpointSaver``, from the thread's request log: its
  newest request unfinished (killed, or stopped by an error) is run on, by
  ``invoke(None, config)`` when LangGraph saved something of it, else by
  invoking it again with the input the log kept (the same request, never a
  second turn); nothing unfinished: the thread's state is returned and
  nothing runs;
- with another checkpointer (no log): ``invoke(None, config)`` when the
  thread has a checkpoint; a thread with none is refused with a
  ``LetItLoopError`` saying to invoke the request again with its input.

It returns what ``invoke`` returns: the graph's output (with
``"__interrupt__"`` when the thread waits at an ``interrupt()``).
"""

from __future__ import annotations

from typing import Any

from langgraph.pregel import Pregel
from langgraph.types import Command

from ...errors import LetItLoopError
from ...primitives.expects import Expect
from ...run.journal import Journal
from ..agentcalls import excerpt
from . import answers, requests
from .configs import thread_text
from .identity import NS_SEP, thread_tag
from .invocations import RESUMES
from .saver import LetItLoopCheckpointSaver

try:  # LangGraph's name for the key; a literal if a release moves it
    from langgraph._internal._constants import INTERRUPT
except ImportError:  # pragma: no cover
    INTERRUPT = "__interrupt__"


def _state(graph: Pregel[Any, Any, Any, Any], config: Any) -> Any:
    """What ``invoke`` returns for a thread with nothing left to run: its output, and its
    interrupts when it waits at one."""
    snapshot = graph.get_state(config)
    (values,) = answers.payloads(graph, snapshot, "values", None, False, "v1")
    if snapshot.interrupts and isinstance(values, dict):
        return {**values, INTERRUPT: list(snapshot.interrupts)}
    return values


def _nothing(thread: str, why: str) -> LetItLoopError:
    return LetItLoopError(
        f"thread {thread!r} has no request to resume: {why}; invoke the request again "
        f"with its input, graph.invoke(input, config)"
    )


def resume(graph: Pregel[Any, Any, Any, Any], config: Any, **kwargs: Any) -> Any:
    """Run ``config``'s thread's unfinished request to its end, whatever ``get_state().next`` says.

    Call it after a crash instead of testing ``graph.get_state(config).next``
    (see the module docstring). ``kwargs`` go to ``graph.invoke``
    (``durability=``, ``stream_mode=``, …). A thread with nothing unfinished
    runs nothing and returns its output. Raises LetItLoopError when the
    thread has no request to resume and no checkpoint (another checkpointer:
    invoke the request again with its input), or when ``config`` names no
    ``thread_id``.
    """
    conf = (config or {}).get("configurable") or {}
    if conf.get("thread_id") is None:
        raise LetItLoopError(
            f"resume() needs the thread to resume, found config {config!r}; pass "
            f"config={{'configurable': {{'thread_id': ...}}}} as given to invoke()"
        )
    thread = thread_text(conf["thread_id"])
    saver = graph.checkpointer
    if isinstance(saver, LetItLoopCheckpointSaver):
        log = requests.recent(saver.store, thread)
        if not log and requests.newest_checkpoint(saver.store, thread) is None:
            raise _nothing(thread, "nothing was asked on it yet (or it was deleted)")
        if not log or log[-1].done:
            return _state(graph, config)
        last = log[-1]
        if requests.newest_checkpoint(saver.store, thread) != last.start:
            return graph.invoke(None, config, **kwargs)  # LangGraph saved some of it
        typed = requests.recorded_input(saver.store, last)
        if typed is None:
            raise _nothing(
                thread,
                f"its unfinished request {last.seq} was killed before LangGraph saved "
                f"anything of it, and its input was not recorded (a request made by an older "
                f"letitloop); graph.invoke(input, config) resumes it, never a second turn",
            )
        again: Any = {**config, "configurable": {**conf, RESUMES: last.seq}}
        return graph.invoke(saver.serde.loads_typed(typed), again, **kwargs)
    snapshot = graph.get_state(config)
    if (snapshot.config.get("configurable") or {}).get("checkpoint_id") is None:
        raise _nothing(
            thread,
            f"LangGraph saved nothing of a request on it (durability='async' writes in the "
            f"background), and {type(saver).__name__} keeps no request log (compile the "
            f"graph with checkpointer=LetItLoopCheckpointSaver() to have one)",
        )
    if snapshot.interrupts:
        return _state(graph, config)  # it waits for an answer: Command(resume=...)
    # Whatever snapshot.next says: under "async" a kill can leave a checkpoint whose
    # next is empty while LangGraph still has the rest of the turn to run.
    return graph.invoke(None, config, **kwargs)


#: The goal of the journal runs whose waits answer a thread's ``interrupt()``s.
ANSWERS_GOAL = "langgraph:answers"


def answer_run(thread: str, interrupt_id: str) -> str:
    """The run of the wait answering one interrupt of one thread: ``<thread tag>|<id>``."""
    return f"{thread_tag(thread)}{NS_SEP}{interrupt_id}"


def wait_for_answers(
    graph: Pregel[Any, Any, Any, Any],
    config: Any,
    *,
    stop_after: float | None = None,
    **kwargs: Any,
) -> Any:
    """Run ``config``'s thread to its end, each ``interrupt()`` answered through the journal.

    First ``resume(graph, config)``; then, while the thread waits at
    interrupts, each pending interrupt is a journal wait ``interrupt:<id>``
    of its own run (goal ``langgraph:answers``, run ``answer_run``), answered
    by ``lil send RUN interrupt:<id> VALUE`` (or ``letitloop.send``) from any
    process, and the thread is invoked with ``Command(resume={id: value})``.
    An answer is recorded for that one interrupt: a ``lil send`` naming
    another id is refused by ``lil send``, the run untouched; the same
    answer is replayed by every later attempt, so a program killed after
    the answer, before or inside the resumed node, sends the same
    ``Command`` again, which the saver's log takes as the same request.

    ``stop_after`` seconds without an answer (0: at once) raise RunWaiting:
    the process exits 75 after printing one line saying what it waits for
    and the ``lil send`` command that answers it; run the program again once
    answered. None waits as long as it takes. Returns what ``invoke``
    returns once no interrupt is pending.
    """
    result = resume(graph, config, **kwargs)
    thread = thread_text(config["configurable"]["thread_id"])
    saver = graph.checkpointer
    path = saver.store.path if isinstance(saver, LetItLoopCheckpointSaver) else None
    while True:
        pending = graph.get_state(config).interrupts
        if not pending:
            return result
        answers: dict[str, Any] = {}
        for asked in pending:
            about = f"the answer to {excerpt(asked.value)} (thread {thread!r})"
            with Journal(ANSWERS_GOAL, run=answer_run(thread, asked.id), path=path) as j:
                answers[asked.id] = j.wait_for(
                    f"interrupt:{asked.id}", stop_after=stop_after, expect=Expect({}, about, True)
                )
        result = graph.invoke(Command(resume=answers), config, **kwargs)

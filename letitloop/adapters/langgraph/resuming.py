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

from ...errors import LetItLoopError
from . import answers, requests
from .configs import thread_text
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
        return graph.invoke(saver.serde.loads_typed(typed), config, **kwargs)
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

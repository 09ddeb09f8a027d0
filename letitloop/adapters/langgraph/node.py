"""``durable_node``: a LangGraph node run inside a journal run, so its ``step()`` calls are durable.

Each execution of a decorated node:

1. works out which journal run it is (``identity.py``): from the thread, the
   node, the superstep, the task path, a fingerprint of the node's input and,
   to tell executions apart, the task id, the checkpoint the superstep
   started from, and what ties the run to this checkpointer (the saver's
   own file, a checkpoint the saver holds, or the invocation's explicit key);
2. waits for any other execution of that run in this process (two
   invocations of one thread at once), as ``Journal`` waits for another
   process;
3. opens ``Journal(goal, run=name)`` around the node's body, so ``step()``
   replays what returned and runs the rest.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast, overload

from langgraph.config import get_config

from ...codec import CodecRegistry
from ...errors import LetItLoopError, StepMismatchError
from ...identity.fingerprint import Fingerprinter
from ...primitives.budgets import Budget
from ...run.journal import DEFAULT_TIMEOUT, Journal
from ...stores.sqlite.files import resolve_path
from ...stores.sqlite.pool import close_store, open_store
from ...stores.sqlite.pragmas import Durability
from ...stores.sqlite.store import Store
from ..agentcalls import MISMATCH_DETAILS
from . import polled, request_budgets
from .gates import Plan, one_at_a_time, one_at_a_time_async
from .identity import CONFIG_KEY_CHECKPOINTER, candidates, choose_run, goal_for, identify
from .messages import fingerprint_registry, with_langchain_types
from .saver import LetItLoopCheckpointSaver

if TYPE_CHECKING:
    # Imported when used (prebuilt.py): LangChain's chat models cost an import of about
    # 1 s, and a graph of plain node functions needs neither.
    from langchain_core.language_models.chat_models import BaseChatModel
    from langgraph.prebuilt import ToolNode

P = ParamSpec("P")
R = TypeVar("R")


class _NodeJournal(Journal):
    """A ``Journal`` whose step fingerprints leave LangChain message ids out (``messages.py``)."""

    def __init__(self, *args: Any, fingerprints: Fingerprinter, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._fingerprints = fingerprints


# -- where the journal lives, and which run ---------------------------------------------


def _holds_in(saver: Any) -> Callable[[str, str, str], bool | None]:
    """``holds(thread, ns, checkpoint_id)`` for ``saver``: is that checkpoint stored?

    None when the saver could not say (it raised).
    """
    if isinstance(saver, LetItLoopCheckpointSaver):
        store = saver.store

        def held(thread: str, ns: str, checkpoint_id: str) -> bool | None:
            return bool(
                polled.query(
                    store,
                    "SELECT 1 FROM langgraph_checkpoints WHERE thread_id = ? AND "
                    "checkpoint_ns = ? AND checkpoint_id = ?",
                    (thread, ns, checkpoint_id),
                )
            )

        return held

    def asked(thread: str, ns: str, checkpoint_id: str) -> bool | None:
        config = {
            "configurable": {
                "thread_id": thread,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint_id,
            }
        }
        try:
            return saver.get_tuple(config) is not None
        except Exception:
            return None

    return asked


def _newest_checkpoint(saver: Any, thread: str) -> str | None:
    """The id of the newest checkpoint ``saver`` holds in ``thread``'s root namespace, or None."""
    if isinstance(saver, LetItLoopCheckpointSaver):
        rows = polled.query(
            saver.store,
            "SELECT checkpoint_id FROM langgraph_checkpoints WHERE thread_id = ? AND "
            "checkpoint_ns = '' ORDER BY checkpoint_id DESC LIMIT 1",
            (thread,),
        )
        return str(rows[0][0]) if rows else None
    try:
        tup = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
    except Exception:
        return None  # no anchor: the run is tied to nothing this saver holds
    if tup is None:
        return None
    found = (tup.config.get("configurable") or {}).get("checkpoint_id")
    return None if found is None else str(found)


def _same_file(a: str | os.PathLike[str] | None, b: os.PathLike[str]) -> bool:
    return os.path.realpath(resolve_path(a)) == os.path.realpath(b)


@overload
def durable_node(fn: ToolNode, /) -> ToolNode: ...


@overload
def durable_node(fn: Callable[P, R], /) -> Callable[P, R]: ...


@overload
def durable_node(
    *,
    goal: str | None = None,
    path: str | os.PathLike[str] | None = None,
    durability: Durability | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    registry: CodecRegistry | None = None,
    budget: Budget | Mapping[str, Any] | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def durable_node(
    fn: Callable[P, R] | ToolNode | None = None,
    /,
    *,
    goal: str | None = None,
    path: str | os.PathLike[str] | None = None,
    durability: Durability | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    registry: CodecRegistry | None = None,
    budget: Budget | Mapping[str, Any] | None = None,
) -> Callable[P, R] | ToolNode | Callable[[Callable[P, R]], Callable[P, R]]:
    """Run a LangGraph node inside a journal, so ``step()`` calls in it are journaled.

    ``@durable_node`` (or ``@durable_node(...)``) on a node function opens a
    ``Journal`` around each execution of the node: inside,
    ``letitloop.step(name, fn, ...)`` records each expensive call. A node
    killed half-way replays, on the next execution of the same superstep,
    the calls that returned and runs the interrupted one again; the node's
    own code outside steps runs again (keep side effects in steps). The
    same superstep is recognised even when LangGraph lost the checkpoint it
    started from and rebuilt it with new ids (``durability="async"`` or
    ``"exit"``): see ``letitloop.adapters.langgraph.identity``. It is not
    confused with a new conversation on a checkpointer that forgot the
    thread (a new process's ``InMemorySaver``): such a run is taken only
    when the saver still holds a checkpoint it held when the run started,
    or when the invocation gives the same explicit key,
    ``config["configurable"][NODE_KEY]``.

    The journal file is the graph's checkpointer's when that is a
    ``LetItLoopCheckpointSaver`` (and ``path`` is not given), else ``path`` /
    ``$LETITLOOP_DB`` / ``.letitloop/journal.db``. ``goal`` replaces the
    default ``langgraph:<node>``. Two executions of the same run at once
    (two invocations resuming one thread, in this process or another) run
    one after the other: the second waits up to ``timeout`` seconds, then
    raises RunHeldError, and replays what the first recorded (with
    ``LetItLoopCheckpointSaver`` the whole invocation already holds the
    thread, ``invocations.py``, so this wait is for other checkpointers). A
    ``step()`` whose arguments differ from the recorded call raises
    StepMismatchError naming the thread, the node, the call and the ways out. ``registry``
    replaces the codec's default registry (LangChain's types are added to
    it). An ``async def`` node is opened with ``async with`` and journals
    its calls with ``await async_step(...)``. ``budget`` (``Budget(tokens=...,
    cost=...)``) bounds each execution of the node (one journal run): its
    ``durable_model`` calls reserve against it before they are made.

    Raises LetItLoopError when called outside a graph run that has a
    thread_id and a checkpointer.
    """

    def decorate(node_fn: Callable[P, R]) -> Callable[P, R]:
        given: Any = node_fn
        if not (inspect.isfunction(given) or inspect.ismethod(given)):
            from langgraph.prebuilt import ToolNode

            from .prebuilt import durable_tool_node, refuse_non_function

            if isinstance(given, ToolNode):
                return cast(Callable[P, R], durable_tool_node(given, decorate))
            refuse_non_function(given)
        signature = inspect.signature(node_fn)
        wants_config = "config" in signature.parameters
        codec_registry = with_langchain_types(registry)
        fingerprints = Fingerprinter(fingerprint_registry(codec_registry))

        def resolve_config(config: Any) -> Any:
            if config is not None:
                return config
            try:
                return get_config()
            except RuntimeError:
                raise LetItLoopError(
                    f"durable_node {node_fn.__qualname__} was called outside a LangGraph "
                    f"run (no RunnableConfig in context); add it to a graph with "
                    f"add_node() and invoke the graph"
                ) from None

        def plan(config: Any, node_input: Any) -> Plan:
            identity = identify(config, node_input, fingerprints)
            saver = (config.get("configurable") or {}).get(CONFIG_KEY_CHECKPOINTER)
            if saver is None:
                raise LetItLoopError(
                    f"durable_node {node_fn.__qualname__} (thread {identity.thread!r}) runs in "
                    f"a graph without a checkpointer, so a resumed thread could not tell one "
                    f"execution from another; compile the graph with "
                    f"checkpointer=LetItLoopCheckpointSaver()"
                )
            journal_path = path
            journal_durability = durability
            store: Store | None = None
            own_file = isinstance(saver, LetItLoopCheckpointSaver) and (
                journal_path is None or _same_file(journal_path, saver.store.real_path)
            )
            if own_file:
                journal_path = saver.store.path
                store = saver.store
                if journal_durability is None:
                    journal_durability = saver.store.durability
            journal_durability = journal_durability or "process"
            goal_name = goal or goal_for(identity.node)
            if store is not None:
                found = candidates(store, goal_name, identity.base_name())
            else:
                # The process's shared connection, which the node's journal reuses
                # next (stores.py: only while the path still reaches the same file).
                store = open_store(journal_path, durability=journal_durability)
                try:
                    found = candidates(store, goal_name, identity.base_name())
                finally:
                    close_store(store)
            name = choose_run(identity, found, _holds_in(saver), own_file)
            if not own_file and all(name != n for _, n, _ in found):
                # A new run, journaled outside the saver's file: tie it to what
                # the saver holds now (identity.py, "tied to this saver").
                identity = dataclasses.replace(
                    identity, anchor=_newest_checkpoint(saver, identity.thread)
                )
            if budget is not None and own_file:  # counted with the request's other runs
                identity = request_budgets.tied(identity, store)
            if isinstance(saver, LetItLoopCheckpointSaver):
                saver.wait_for_writes()
            return Plan(goal_name, name, journal_path, journal_durability, identity)

        def journal(p: Plan) -> Journal:
            return _NodeJournal(
                p.goal,
                run=p.name,
                path=p.path,
                durability=p.durability,
                timeout=timeout,
                registry=codec_registry,
                budget=request_budgets.budget_for(budget, p.identity),
                input=p.identity.record(),
                fingerprints=fingerprints,
            )

        def config_of(kwargs: dict[str, Any]) -> Any:
            # LangGraph passes config= to a node whose signature names it (see
            # below): the way to reach it in an async node on Python 3.10, where
            # tasks do not inherit the context that get_config() reads.
            return kwargs.get("config") if wants_config else kwargs.pop("config", None)

        if inspect.iscoroutinefunction(node_fn):

            @functools.wraps(node_fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                config = resolve_config(config_of(kwargs))
                # Choosing the run reads the journal (and may ask the checkpointer):
                # in a worker thread, so the event loop never waits on SQLite.
                p = await asyncio.to_thread(plan, config, args[0] if args else None)
                async with one_at_a_time_async(p, timeout), journal(p):
                    try:
                        return await node_fn(*args, **kwargs)
                    except StepMismatchError as exc:
                        raise node_mismatch(exc, p) from None

            wrapped: Callable[..., Any] = async_wrapper
        else:

            @functools.wraps(node_fn)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                config = resolve_config(config_of(kwargs))
                p = plan(config, args[0] if args else None)
                with one_at_a_time(p, timeout), journal(p):
                    try:
                        return node_fn(*args, **kwargs)
                    except StepMismatchError as exc:
                        raise node_mismatch(exc, p) from None

            wrapped = wrapper
        if not wants_config:
            wrapped.__signature__ = _with_config(signature)  # type: ignore[attr-defined]
        return cast(Callable[P, R], wrapped)

    if fn is not None:
        return decorate(cast(Callable[P, R], fn))
    return decorate


def node_mismatch(exc: StepMismatchError, p: Plan) -> StepMismatchError:
    """``exc`` in the graph's words: the thread, the node, the call, what differs, the ways out.

    A durable node's run is the same superstep of the same thread with the
    same input; a call in it that differs from the one recorded means the
    node's code (a prompt template, a tool's arguments made in code) changed
    under a recorded run. The journal's own advice (``unchecked``, naming
    steps per thread) is not what a graph's author acts on.
    """
    who = p.identity
    what = exc.differences or "its arguments differ"
    if exc.recorded and exc.called and exc.recorded != exc.called:
        what = f"it was recorded by {exc.recorded}, now {exc.called} is called"
    run = exc.run_id or "?"
    message = (
        f"thread {who.thread!r}, node {who.node!r} (superstep {who.step}): the call "
        f"{exc.key!r} differs from the one recorded for this node's execution ({what}), so "
        f"the node's code changed under a thread that was still running. Ways out: run the "
        f"request on a new thread_id, or as a new request with "
        f"config['configurable']['letitloop_fresh'] = True; discard the recorded run with "
        f"lil reset {p.goal} --run {run}; or keep the calls before it with "
        f"lil fork {run} --from-step {exc.key}"
    )
    return StepMismatchError(message, **{k: getattr(exc, k, None) for k in MISMATCH_DETAILS})


def durable_model(
    model: BaseChatModel,
    *,
    goal: str | None = None,
    path: str | os.PathLike[str] | None = None,
    durability: Durability | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    budget: Budget | Mapping[str, Any] | None = None,
    stream_recovery: str = "auto",
) -> BaseChatModel:
    """``model`` with each call journaled as a step (``prebuilt.py``): pass it to
    ``create_react_agent`` or call it in any node of a graph that has a checkpointer.

    Options are ``durable_node``'s, for the run a call opens when no durable
    node runs it (``budget``: that call's; inside a durable node, the node's
    budget holds). Each call reserves before it is made when its run has a
    budget (``max_tokens`` from the call's options or the model's settings,
    else all that remains), and its reported usage settles it. Raises
    LetItLoopError when ``model`` is not a LangChain chat model, or when a call
    is made outside a graph run with a ``thread_id``. ``stream_recovery``: what a streamed
    call (``stream_mode="messages"``) cut by a kill does (streaming.py): ``"continue"``
    from the journaled text, ``"restart"``, or ``"auto"``.
    """
    from langchain_core.language_models.chat_models import BaseChatModel

    from .streaming import streaming_model

    if not isinstance(model, BaseChatModel):
        raise LetItLoopError(
            f"durable_model takes a LangChain chat model (a BaseChatModel), found "
            f"{type(model).__name__}; pass the model itself, before bind_tools()"
        )
    wrap = durable_node(goal=goal, path=path, durability=durability, timeout=timeout, budget=budget)
    return cast(BaseChatModel, streaming_model(model, wrap, stream_recovery))


def _with_config(signature: inspect.Signature) -> inspect.Signature:
    """``signature`` plus a keyword-only ``config``: LangGraph passes the run's config to it."""
    params = list(signature.parameters.values())
    at = next(
        (i for i, p in enumerate(params) if p.kind is inspect.Parameter.VAR_KEYWORD), len(params)
    )
    params.insert(at, inspect.Parameter("config", inspect.Parameter.KEYWORD_ONLY, default=None))
    return signature.replace(parameters=params)

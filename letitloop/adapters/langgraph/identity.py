"""Which journal run one execution of a durable node is: an identity that survives lost checkpoints.

LangGraph names a node's execution by a task id derived from the id of the
checkpoint its superstep starts from. That checkpoint is not always on
disk when the node runs: ``durability="async"`` (LangGraph's default)
writes it while the superstep already runs, ``"exit"`` only when the graph
stops, and even ``"sync"`` waits for a superstep's checkpoint only after
the superstep. After a crash LangGraph rebuilds the lost checkpoints with
new ids, and the node gets a new task id. The task id alone cannot find the
node's journal run then; and a copied thread (``copy_thread`` keeps the
ids) would find another thread's.

So a durable node's run is found by what its execution *is*:

- **content**: the thread, the namespace the node's graph runs in, the
  node, the superstep's number, LangGraph's task path (which ``Send`` it
  is, for a pushed task) and a fingerprint of the node's input (message ids
  left out, see ``messages.py``). The run's name is made of them:
  ``<thread>#<hash>|<node>@<step>|<content hash>``, then ``~2``, ``~3``, …
  for later executions with the same content.
- **which execution**: each run records the task id and the checkpoint its
  superstep started from (``runs.input``, JSON). Among the runs with this
  content, a node takes the one of its own task (same checkpoint: a resume,
  a retry, an answered ``interrupt()``), else one whose starting checkpoint
  never reached the saver (lost in a crash: LangGraph rebuilt that
  superstep, this is its re-execution) *and that is tied to this saver*,
  else a new run. A run whose checkpoint is in the saver belongs to another
  execution (time travel from an earlier checkpoint, run again from the
  same place) and is never taken by a task it was not recorded for.
- **tied to this saver**: "never reached the saver" is evidence of a crash
  only if the saver is the one that would have held it. A checkpointer
  that forgets (a fresh ``InMemorySaver`` in a new process, a database
  emptied) never saw the earlier process's checkpoints either, and its
  thread is a new conversation. So a run is taken as a lost superstep's
  only when its journal is the ``LetItLoopCheckpointSaver``'s own file (the
  checkpoints and the runs live and die together: deleting a thread
  retires its runs), or when the saver still holds the **anchor** the run
  recorded (the newest checkpoint of the thread's root namespace the saver
  held when the run started), or when the invocation gave the same
  explicit key (``config["configurable"]["letitloop_key"]``, ``NODE_KEY``)
  as the run. A key, given or not, must match: runs of another key are
  never taken.

Deleting, pruning or copying over a thread through the saver retires the
runs it makes unreachable (``retire.py``), so a recreated thread whose
checkpoints have the same ids never finds the old runs.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ...errors import LetItLoopError
from ...identity.fingerprint import Fingerprinter
from ...stores.sqlite.store import Store
from . import polled

try:  # LangGraph's names for these keys; literals if a release moves them
    from langgraph._internal._constants import (
        CONFIG_KEY_CHECKPOINT_MAP as CONFIG_KEY_CHECKPOINT_MAP,
    )
    from langgraph._internal._constants import (
        CONFIG_KEY_CHECKPOINTER as CONFIG_KEY_CHECKPOINTER,
    )
    from langgraph._internal._constants import CONFIG_KEY_SCRATCHPAD as CONFIG_KEY_SCRATCHPAD
    from langgraph._internal._constants import CONFIG_KEY_TASK_ID as CONFIG_KEY_TASK_ID
except ImportError:  # pragma: no cover
    CONFIG_KEY_CHECKPOINT_MAP = "checkpoint_map"
    CONFIG_KEY_CHECKPOINTER = "__pregel_checkpointer"
    CONFIG_KEY_SCRATCHPAD = "__pregel_scratchpad"
    CONFIG_KEY_TASK_ID = "__pregel_task_id"

#: The ``config["configurable"]`` key of an invocation's explicit key: the
#: caller's word that this invocation is the one an earlier run of the same
#: content (thread, node, superstep, input) was recorded for, whatever the
#: checkpointer remembers (see the module docstring).
NODE_KEY = "letitloop_key"

#: Separates the levels of a checkpoint namespace (``parent:task|node:task``).
NS_SEP = "|"

#: Characters kept as they are in the readable part of a run name; any
#: other (control characters, surrogates, the separators) becomes ``?``.
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff|#~]")

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")

#: Characters of the thread id and node name kept readable in a run name;
#: the hash that follows tells apart ids that share them.
_READABLE = 64

#: Separates a run name's content from its execution number (``~2``).
EXECUTION_SEP = "~"


def readable(text: str, limit: int = _READABLE) -> str:
    """``text`` with unsafe characters replaced by ``?`` and cut to ``limit`` characters."""
    safe = _UNSAFE.sub("?", text)
    return safe if len(safe) <= limit else safe[: limit - 1] + "…"


def _digest(text: str, size: int) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=size).hexdigest()


def thread_tag(thread_id: str) -> str:
    """The start of every run name of ``thread_id``: readable text, then a hash of the exact id.

    ``"user\\n1"`` gives ``"user?1#<16 hex>"``: any thread id the saver
    accepts makes a valid run name, and two ids that read alike differ by
    their hash (64 bits).
    """
    return f"{readable(thread_id)}#{_digest(thread_id, 8)}"


def thread_prefix(thread_id: str) -> str:
    """What every run name of ``thread_id`` starts with (``thread_tag`` and the separator)."""
    return thread_tag(thread_id) + NS_SEP


@dataclass(frozen=True)
class NodeIdentity:
    """One execution of a durable node, as LangGraph describes it to the node.

    Recorded as JSON in the run's ``input`` column under ``"langgraph"``.
    """

    thread: str
    #: The namespace the node's graph runs in: "" at the root, ``parent:task`` in a subgraph.
    ns: str
    node: str
    step: int
    #: LangGraph's task path: ``["__pregel_pull", "node"]``, or the index of a ``Send``.
    path: str
    task: str
    #: The checkpoint the node's superstep started from (None if LangGraph did not say).
    checkpoint: str | None
    #: A fingerprint of the node's input (message ids left out).
    input_fp: str
    #: ``config["metadata"]["run_id"]`` when the caller set one (``delete_for_runs``).
    run_id: str | None
    #: The invocation's explicit key (``NODE_KEY``), if it gave one.
    key: str | None = None
    #: The newest root checkpoint of the thread the saver held when the run
    #: started (recorded only when the journal is not the saver's own file).
    anchor: str | None = None
    #: The request of the thread's log (its seq) the run was made for, when its node
    #: runs with a budget in the saver's own file (request_budgets.py).
    request: int | None = None

    def content_key(self) -> str:
        """A hash of what makes two executions the same: everything but task and checkpoint."""
        text = json.dumps(
            [self.thread, self.ns, self.node, self.step, self.path, self.input_fp],
            ensure_ascii=False,
        )
        return _digest(text, 8)

    def base_name(self) -> str:
        """The run name of the first execution with this content."""
        return (
            f"{thread_tag(self.thread)}{NS_SEP}{readable(self.node)}@{self.step}"
            f"{NS_SEP}{self.content_key()}"
        )

    def record(self) -> dict[str, Any]:
        """What the run records as its input (readable in ``runs.input``)."""
        return {"langgraph": asdict(self)}


def _path_text(path: Any) -> str:
    return json.dumps(path, default=str, ensure_ascii=False)


#: The state keys of LangGraph's step counters (``RemainingSteps``, ``IsLastStep``, in
#: the prebuilt agents' ``AgentState``): computed from the invocation's recursion limit
#: and where the invocation began, so the same superstep re-executed by a resumed
#: invocation sees other values. Left out of a node input's fingerprint.
STEP_COUNTERS = frozenset({"remaining_steps", "is_last_step"})


def without_step_counters(node_input: Any) -> Any:
    """``node_input`` without LangGraph's step counters (a state dict's, or the state a
    ``ToolNode``'s ``Send`` carries)."""
    if not isinstance(node_input, dict):
        return node_input
    if isinstance(node_input.get("state"), dict) and "tool_call" in node_input:
        return {**node_input, "state": without_step_counters(node_input["state"])}
    if STEP_COUNTERS.isdisjoint(node_input):
        return node_input
    return {k: v for k, v in node_input.items() if k not in STEP_COUNTERS}


def node_config_parts(config: Any) -> tuple[str, str, str, str]:
    """``(thread_id, node, task namespace, parent namespace)`` of a node's config.

    Raises LetItLoopError when the config is not a node's config inside a
    graph run with a thread id.
    """
    conf = (config or {}).get("configurable") or {}
    meta = (config or {}).get("metadata") or {}
    thread_id = conf.get("thread_id")
    ns = conf.get("checkpoint_ns") or meta.get("langgraph_checkpoint_ns") or ""
    if thread_id is None or ":" not in str(ns):
        raise LetItLoopError(
            f"durable_node expected a LangGraph node's config with a thread_id and a task "
            f"namespace, found thread_id={thread_id!r}, checkpoint_ns={ns!r}; compile the "
            f"graph with a checkpointer and invoke it with "
            f"config={{'configurable': {{'thread_id': ...}}}}"
        )
    ns = str(ns)
    parent, _, own = ns.rpartition(NS_SEP)
    node = meta.get("langgraph_node") or own.split(":", 1)[0]
    return str(thread_id), str(node), ns, parent


def identify(config: Any, node_input: Any, fingerprints: Fingerprinter) -> NodeIdentity:
    """The identity of the node execution that ``config`` (a node's config) describes."""
    thread_id, node, ns, parent = node_config_parts(config)
    conf = config.get("configurable") or {}
    meta = config.get("metadata") or {}
    task = conf.get(CONFIG_KEY_TASK_ID) or ns.rpartition(NS_SEP)[2].partition(":")[2]
    checkpoints = conf.get(CONFIG_KEY_CHECKPOINT_MAP) or {}
    checkpoint = checkpoints.get(parent)
    run_id = meta.get("run_id")
    key = conf.get(NODE_KEY)
    if key is not None and not isinstance(key, str):
        raise LetItLoopError(
            f"durable_node {node!r} (thread {thread_id!r}): config['configurable']"
            f"[{NODE_KEY!r}] must be a str naming the invocation, found "
            f"{type(key).__name__} {key!r}; pass a string such as an order id"
        )
    return NodeIdentity(
        thread=thread_id,
        ns=parent,
        node=node,
        step=int(meta.get("langgraph_step", 0)),
        path=_path_text(meta.get("langgraph_path", [node])),
        task=str(task),
        checkpoint=None if checkpoint is None else str(checkpoint),
        input_fp=fingerprints.whole(without_step_counters(node_input)),
        run_id=None if run_id is None else str(run_id),
        key=key,
    )


def node_run_key(config: Any, node_input: Any = None) -> tuple[str, str]:
    """The ``(goal, run)`` under which ``durable_node`` journals a first execution of a node.

    goal: ``langgraph:<node name>`` — one journal table per node, however
    many threads. run: ``<thread>#<hash>|<node>@<step>|<content hash>``
    (see the module docstring); a later execution with the same content
    (time travel) gets ``~2``, ``~3``, … appended. ``node_input`` is what
    the node was called with (its fingerprint is part of the content).

    Raises LetItLoopError when the config has no ``thread_id`` or is not a
    node's config.
    """
    from .messages import fingerprint_registry

    identity = identify(config, node_input, Fingerprinter(fingerprint_registry(None)))
    return goal_for(identity.node), identity.base_name()


def goal_for(node: str) -> str:
    """The default goal of a node's runs: ``langgraph:<node>`` (cut and hashed if odd or long)."""
    name = f"langgraph:{node}"
    if len(name) <= 200 and not _CONTROL.search(node):
        return name
    return f"langgraph:{readable(node, 120)}#{_digest(node, 8)}"


# -- choosing the run ----------------------------------------------------------------


def _execution(name: str, base: str) -> int:
    if name == base:
        return 1
    suffix = name[len(base) + 1 :]
    return int(suffix) if suffix.isdigit() else 0


def candidates(store: Store, goal: str, base: str) -> list[tuple[int, str, dict[str, Any]]]:
    """The goal's runs named ``base`` or ``base~N``: ``(N, name, recorded identity)``, by N."""
    rows = polled.query(
        store,
        "SELECT name, input FROM runs WHERE goal = ? AND (name = ? OR (name > ? AND name < ?))",
        (goal, base, base + EXECUTION_SEP, base + chr(ord(EXECUTION_SEP) + 1)),
    )
    found = []
    for name, text in rows:
        n = _execution(name, base)
        if n <= 0:
            continue
        try:
            recorded = json.loads(text)["langgraph"] if text else {}
        except (ValueError, KeyError, TypeError):
            recorded = {}
        found.append((n, str(name), recorded if isinstance(recorded, dict) else {}))
    found.sort()
    return found


def choose_run(
    identity: NodeIdentity,
    found: Sequence[tuple[int, str, dict[str, Any]]],
    holds: Callable[[str, str, str], bool | None],
    own_file: bool,
) -> str:
    """The run name this execution takes among ``found`` (see the module docstring).

    ``holds(thread, ns, checkpoint_id)`` says whether the saver holds a
    checkpoint (None: it could not say). ``own_file``: the journal is the
    saver's own file. Returns a new name (the base name, or the next
    ``~N``) when no recorded run is this execution's.
    """
    base = identity.base_name()
    for _n, name, recorded in found:
        if recorded.get("thread") != identity.thread:
            continue  # a prefix twin of another thread: never
        if recorded.get("task") == identity.task:
            return name  # the same task: resumed, retried, or answered
    for _n, name, recorded in found:
        if recorded.get("thread") != identity.thread or recorded.get("key") != identity.key:
            continue
        started = recorded.get("checkpoint")
        if not started or started == identity.checkpoint:
            continue
        if holds(identity.thread, identity.ns, str(started)) is not False:
            continue  # held (or unknown): another execution's run
        anchor = recorded.get("anchor")
        if (
            own_file
            or identity.key is not None
            or (anchor and holds(identity.thread, "", str(anchor)) is True)
        ):
            return name  # its superstep's checkpoint was lost: this is its re-execution
    if not found:
        return base
    return f"{base}{EXECUTION_SEP}{max(n for n, _, _ in found) + 1}"

"""Move letitloop's flat modules into rooms (issue 51), and rewrite every reference.

Run from a checkout's top folder: ``python tools/rooms.py``. It

1. ``git mv``s each module of the package root to its room: by :data:`MOVES`, an
   explicit map, then by :data:`PREFIXES` for files it does not name
   (``sqlite_x.py`` -> ``stores/sqlite/x.py``, ``storage_x.py`` -> ``stores/``), and
   writes each room's ``__init__.py`` (:data:`ROOMS`) where there is none;
2. rewrites what names a moved module: imports (absolute and relative, recomputed
   from the file's new place), dotted paths in text (``letitloop.store.Store`` in
   strings, comments, docs, monkeypatch targets, ``-m`` arguments), slash paths
   (``letitloop/store.py``) and the module tables of tests/test_architecture.py;
3. is idempotent: on a tree already moved it moves only the flat files that appeared
   since, and rewrites only the old-style references that appeared since.

Names that files record are never touched: the library's step names' history
(``step_names.py``), the tests that pin it, and the golden journals (tests/golden/).
A module of the root that no rule places is left where it is and named at the end
(exit status 2): add it to :data:`MOVES` or :data:`KEEP`.
"""

from __future__ import annotations

import ast
import io
import re
import shutil
import subprocess
import sys
import textwrap
import tokenize
from pathlib import Path

PACKAGE = "letitloop"

#: The public modules that stay at the package root: what users import by path.
KEEP = {"__init__", "__main__", "errors", "testing", "pytest_plugin"}

#: Each room's __init__.py docstring, written when the room has none.
ROOMS = {
    "identity": "What makes a call the same call: fingerprints, step keys, canonical values, "
    "names and ids (private: import from ``letitloop``).",
    "integrity": "What proves a journal's rows whole and untampered: checksums, the sealed "
    "chain, encryption at rest, redaction (private: import from ``letitloop``).",
    "primitives": "The run's primitives a step builds on: sleeps, waits, markers, budgets, "
    "reservations, patches, the clock (private: import from ``letitloop``).",
    "run": "One run in one process: the journal, its opening and closing, its steps, "
    "replay, retries, cancellation, the decorators (private: import from ``letitloop``).",
    "supervision": "A program as processes: the supervisor of ``lil watch`` and "
    "``@supervise``, its restart policy, its record, control from outside (private: "
    "import from ``letitloop``).",
    "scheduling": "Schedules: a durable function's runs started by a cron expression, once per "
    "tick, and the scheduler that claims and starts them (private: import from "
    "``letitloop``).",
    "queueing": "Work queues: runs enqueued with limits and priorities, claimed by workers "
    "that take over a dead worker's runs at once (private: import from ``letitloop``).",
    "stores": "Where runs are kept: the storage protocols the run speaks to, the registry "
    "that picks a store by its path, and one folder per store (private: import from "
    "``letitloop``).",
    "stores/sqlite": "The SQLite store: the journal file, its connections, lock files, "
    "migrations, and ``SqliteStorage`` (private).",
    "stores/memory": "The in-memory store (``memory://NAME``), for tests: ``MemoryStorage`` "
    "(private).",
    "stores/postgres": "The PostgreSQL store (``postgresql://…``): ``PostgresStorage`` (private).",
}

#: Old module (a name at the package root) -> its new dotted path inside the package.
MOVES: dict[str, str] = {
    **{
        m: f"identity.{m}"
        for m in (
            "fingerprint",
            "fingerprint_hooks",
            "keys",
            "canon",
            "unchecked",
            "names",
            "step_names",
            "ids",
            "versions",
        )
    },
    **{
        m: f"integrity.{m}"
        for m in ("checksums", "seals", "chains", "sealcheck", "encryption", "redaction")
    },
    **{
        m: f"primitives.{m}"
        for m in (
            "sleeps",
            "waits",
            "timers",
            "clock",
            "markers",
            "markerlocks",
            "markerhold",
            "budgets",
            "costs",
            "estimates",
            "reservations",
            "patches",
            "expects",
        )
    },
    **{
        m: f"run.{m}"
        for m in (
            "journal",
            "verbs",
            "generations",
            "opening",
            "closing",
            "ownership",
            "steps",
            "step_rows",
            "async_steps",
            "commits",
            "inflight",
            "replay",
            "retry",
            "cancellation",
            "otel",
            "decoration",
            "durable",
        )
    },
    **{
        m: f"supervision.{m}"
        for m in (
            "supervisor",
            "childproc",
            "relaunch",
            "policy",
            "recorder",
            "control",
            "_proctree",
            "_exec_shim",
        )
    },
    **{
        m: f"stores.{m}"
        for m in (
            "storage",
            "storage_reservations",
            "storage_seals",
            "schemes",
            "row_rules",
            "discovery",
        )
    },
    **{
        m: f"stores.sqlite.{m}"
        for m in (
            "store",
            "connect",
            "connections",
            "inherited",
            "files",
            "pragmas",
            "sqlerrors",
            "goals",
            "locks",
            "migrate",
            "migration_files",
            "migration_records",
            "migration_sql",
            "compact_migration",
            "schema_file",
        )
    },
    # One connection per journal file per process: not a second ``stores``.
    "stores": "stores.sqlite.pool",
    "render": "runtext.render",
    "previews": "runtext.previews",
    # ``lil demo``'s program, killed and resumed: a child that loads no click.
    "demo": "supervision.demo",
    # Schedules (issue 54): a durable function's runs by cron, and the loop that starts them.
    "schedules": "scheduling.schedules",
    "scheduler": "scheduling.scheduler",
    # Work queues (issue 52): the queue, its entries' records, its workers.
    "queues": "queueing.queues",
    "queue_records": "queueing.queue_records",
    "queue_worker": "queueing.queue_worker",
    # lil crashtest (issue 56): the hook a program under test loads, and the runner.
    "crashhook": "run.crashhook",
    "crashtest": "supervision.crashtest",
    # Budgets several runs share (a LangGraph request) and the refusal's words.
    "shared_budgets": "primitives.shared_budgets",
    "budget_refusals": "primitives.budget_refusals",
    # ``lil check``: users import ``letitloop.deploycheck.check`` (docs/versioning.md).
    "deploycheck": "deploycheck",
    "deploycheck_copy": "deploycheck.journalcopy",
    "deploycheck_target": "deploycheck.target",
}

#: A flat module's prefix -> its room, for files :data:`MOVES` does not name (other
#: branches add them); ``strip``: the prefix is dropped unless the name is taken.
PREFIXES: list[tuple[str, str, bool]] = [
    ("sqlite_", "stores.sqlite", True),
    ("postgres_", "stores.postgres", True),
    ("memory_", "stores.memory", True),
    ("storage", "stores", False),
]

#: Files whose text is recorded data: only their imports are rewritten.
TEXT_FROZEN = re.compile(r"(^|/)step_names\.py$|^tests/golden/|^CHANGELOG\.md$")


def recorded_names() -> set[str]:
    """The dotted names files written before hold for the library's steps (step_names.py's
    ``HISTORY``, ``letitloop.budgets.record_budget``): never rewritten, wherever named."""
    for path in (Path(PACKAGE, "step_names.py"), Path(PACKAGE, "identity", "step_names.py")):
        if path.is_file():
            tree = ast.parse(path.read_text(encoding="utf-8"))
            return {
                n.value
                for n in ast.walk(tree)
                if isinstance(n, ast.Constant)
                and isinstance(n.value, str)
                and n.value.startswith(f"{PACKAGE}.")
            }
    return set()


#: What is rewritten: (folder or file, suffixes).
SCOPE = [
    ("letitloop", (".py", ".md", ".toml", ".txt", ".html")),
    ("tests", (".py", ".md")),
    ("benchmarks", (".py", ".md")),
    ("examples", (".py", ".md")),
    ("docs", (".py", ".md")),
    ("tools", (".py", ".md")),
    (".ci", ("", ".py", ".txt", ".sh")),
    ("pyproject.toml", (".toml",)),
    ("README.md", (".md",)),
]

#: The top-level tables of tests/test_architecture.py that name root modules.
ARCHITECTURE_TABLES = {
    "LAYERS",
    "LONG_MODULES",
    "LONG_CLASSES",
    "STORE_MODULES",
    "KNOWN_UPWARD",
    "KNOWN_STORE_IMPORTS",
    "KNOWN_GETATTR",
    "PRIVATE_PACKAGES",
    "OUTSIDE_READERS",
}


#: The root modules this run moved.
MOVED_NOW: set[str] = set()


def run(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def path_of(dotted: str) -> Path:
    """``stores.sqlite.store`` -> letitloop/stores/sqlite/store.py; a package's __init__."""
    base = Path(PACKAGE, *dotted.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def exists(dotted: str) -> bool:
    base = Path(PACKAGE, *dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def target_of(old: str, reserved: set[str]) -> str | None:
    """Where root module ``old`` goes (None: no rule places it)."""
    if old in MOVES:
        return MOVES[old]
    for prefix, room, strip in PREFIXES:
        if old.startswith(prefix):
            short = old[len(prefix) :] if strip else old
            if not short.isidentifier() or short in ("", "__init__"):
                short = old
            new = f"{room}.{short}"
            if new != f"{room}.{old}" and (new in reserved or exists(new)):
                new = f"{room}.{old}"  # the short name is taken: keep the prefix
            return new
    return None


def mapped(old: str) -> str | None:
    """The new place of a root module named in old-style code, once moved (None: not moved)."""
    if Path(PACKAGE, f"{old}.py").is_file():
        return None  # still at the root
    if old in MOVES:
        return MOVES[old] if MOVES[old] != old else None
    for prefix, room, strip in PREFIXES:
        if old.startswith(prefix):
            for candidate in (f"{room}.{old}", f"{room}.{old[len(prefix) :]}" if strip else ""):
                if candidate and exists(candidate):
                    return candidate
    return None


def defined_names(dotted: str) -> set[str]:
    """The top-level names module ``dotted`` defines or imports (empty when absent)."""
    path = path_of(dotted)
    if not path.is_file():
        return set()
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def package_has(package: str, name: str) -> bool:
    """Whether ``letitloop.<package>.<name>`` is new-style: a submodule or a name it defines."""
    return exists(f"{package}.{name}") or name in defined_names(package)


def resolve(parts: list[str], names: list[str] | None = None) -> list[str] | None:
    """The new dotted path (inside the package) for old-style ``parts``; None: unchanged.

    ``names``: what a ``from`` import takes from it, which tells an old module from a
    new package of the same name (``stores``)."""
    if not parts:
        return None
    head, rest = parts[0], parts[1:]
    new = mapped(head)
    if new is None:
        return None
    if exists(head):  # a package of that name now: old-style only for the old module's names
        moved_names = defined_names(new)
        probe = rest[:1] or (names or [])
        if not probe:  # ``letitloop.stores`` alone: the old module if this run moved it
            return [*new.split("."), *rest] if head in MOVED_NOW else None
        if not all(n in moved_names and not package_has(head, n) for n in probe):
            return None
    return [*new.split("."), *rest]


# -- 1. moves ---------------------------------------------------------------------------


def move_modules() -> tuple[dict[Path, list[str]], list[str]]:
    """git mv every placed root module; (new file -> its old package, unplaced names)."""
    moved: dict[Path, list[str]] = {}
    unplaced = []
    reserved = {v for k, v in MOVES.items() if Path(PACKAGE, f"{k}.py").is_file()}
    for file in sorted(Path(PACKAGE).glob("*.py")):
        old = file.stem
        if old in KEEP:
            continue
        new = target_of(old, reserved - {MOVES.get(old, "")})
        if new is None:
            unplaced.append(old)
            continue
        dest = path_of_new(new)
        if dest.exists():
            print(f"rooms: {dest} exists already; {file} left in place", file=sys.stderr)
            unplaced.append(old)
            continue
        ensure_rooms(dest.parent)
        tracked = subprocess.run(
            ["git", "ls-files", "--error-unmatch", str(file)], capture_output=True, check=False
        )
        if tracked.returncode == 0:
            run("git", "mv", str(file), str(dest))
        else:  # a file not committed yet: moved all the same
            file.rename(dest)
        moved[dest] = [PACKAGE]
        MOVED_NOW.add(old)
        print(f"moved {file} -> {dest}")
    return moved, unplaced


def path_of_new(dotted: str) -> Path:
    """Where new module ``dotted`` is written: a package (``deploycheck``) or a file."""
    if dotted in MOVES.values() and "." not in dotted:
        return Path(PACKAGE, dotted, "__init__.py")
    return Path(PACKAGE, *dotted.split(".")).with_suffix(".py")


def ensure_rooms(folder: Path) -> None:
    """Each package folder from the root down to ``folder`` gets an __init__.py."""
    rel = folder.relative_to(PACKAGE)
    for i in range(1, len(rel.parts) + 1):
        room = Path(PACKAGE, *rel.parts[:i])
        init = room / "__init__.py"
        room.mkdir(exist_ok=True)
        key = "/".join(rel.parts[:i])
        if not init.exists() and MOVES.get(key) != key:  # (deploycheck.py becomes its init)
            doc = textwrap.fill(ROOMS.get(key, key), 88)
            doc = f"{doc}\n" if "\n" in doc else doc
            init.write_text(f'"""{doc}"""\n', encoding="utf-8")
            run("git", "add", str(init))


# -- 2. rewrites ----------------------------------------------------------------------


def files_in_scope() -> list[Path]:
    out = []
    for top, suffixes in SCOPE:
        p = Path(top)
        if p.is_file():
            out.append(p)
        elif p.is_dir():
            for f in sorted(p.rglob("*")):
                if f.is_file() and "__pycache__" not in f.parts and f.suffix in suffixes:
                    out.append(f)
    return out


def module_package(path: Path, old_package: list[str] | None) -> list[str] | None:
    """The package a .py file's relative imports are relative to (None: not in the package)."""
    if old_package is not None:
        return old_package
    if path.parts[0] != PACKAGE:
        return None
    parts = list(path.with_suffix("").parts)
    return parts[:-1]


def from_spans(
    source: str,
) -> dict[tuple[int, int], tuple[tuple[int, int], tuple[int, int], list[str]]]:
    """For each ``from X import`` statement's first line: the span of ``X`` and its tokens."""
    out = {}
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    for i, tok in enumerate(tokens):
        if tok.type == tokenize.NAME and tok.string == "from":
            j = i + 1
            parts = []
            while j < len(tokens) and tokens[j].type != tokenize.NEWLINE:
                if tokens[j].type == tokenize.NAME and tokens[j].string == "import":
                    break
                parts.append(tokens[j])
                j += 1
            stop = tokens[j] if j < len(tokens) else None
            if parts and stop is not None and stop.string == "import":
                out[tok.start[0], tok.start[1]] = (
                    parts[0].start,
                    parts[-1].end,
                    [p.string for p in parts],
                )
    return out


def relative_text(here: list[str], target: list[str]) -> str:
    """``from <this> import``: ``target`` (absolute, with the package) seen from ``here``."""
    common = 0
    while common < min(len(here), len(target)) and here[common] == target[common]:
        common += 1
    common = max(common, 1)
    level = len(here) - common + 1
    return "." * level + ".".join(target[common:])


def rewrite_imports(path: Path, source: str, old_package: list[str] | None) -> str:
    """Every import statement of a moved module, rewritten (relative ones recomputed)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    here_old = module_package(path, old_package)
    here_new = module_package(path, None)
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def at(pos: tuple[int, int]) -> int:
        return offsets[pos[0] - 1] + pos[1]  # tokenize counts characters

    edits: list[tuple[int, int, str]] = []
    spans = from_spans(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            span = spans.get((node.lineno, node.col_offset))
            if span is None:
                continue
            mod = [p for p in (node.module or "").split(".") if p]
            if node.level:
                if here_old is None:
                    continue
                base = here_old[: len(here_old) - node.level + 1]
                absolute = [*base, *mod]
            elif mod[:1] == [PACKAGE]:
                absolute = mod
            else:
                continue
            inner = absolute[1:]
            moved_file = bool(node.level) and here_old != here_new

            def module_text(target: list[str], level: int = node.level) -> str:
                if level and here_new is not None:
                    return relative_text(here_new, target)
                return ".".join(target)

            if not inner:
                # ``from . import budgets, ownership``: the names may be moved modules,
                # now in several rooms: one statement per room.
                groups: dict[str, list[str]] = {}
                public = defined_names("__init__")
                for alias in node.names:
                    # ``from letitloop import durable`` is the public function, not the module.
                    where = (None if alias.name in public else mapped(alias.name)) or alias.name
                    parent, _, leaf = where.rpartition(".")
                    bound = alias.asname or alias.name
                    groups.setdefault(parent, []).append(
                        leaf if bound == leaf else f"{leaf} as {bound}"
                    )
                if list(groups) == [""] and not moved_file:
                    continue
                indent = " " * node.col_offset
                statements = [
                    f"from {module_text([PACKAGE, *p.split('.')] if p else [PACKAGE])}"
                    f" import {', '.join(leaves)}"
                    for p, leaves in groups.items()
                ]
                whole_start = char_at(lines, offsets, node.lineno, node.col_offset)
                whole_end = char_at(lines, offsets, node.end_lineno or 0, node.end_col_offset or 0)
                text = ("\n" + indent).join(statements)
                if source[whole_start:whole_end] != text:
                    edits.append((whole_start, whole_end, text))
                continue
            names = [a.name for a in node.names]
            new_inner = resolve(inner, names)
            if new_inner is None:
                if not moved_file:
                    continue
                new_inner = inner
            text = module_text([PACKAGE, *new_inner])
            if text == "".join(span[2]):
                continue
            edits.append((at(span[0]), at(span[1]), text))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] != PACKAGE:
                    continue
                new_inner = resolve(parts[1:])
                if new_inner is None:
                    continue
                line_start = offsets[node.lineno - 1]
                seg_start = source.index(alias.name, line_start + node.col_offset)
                edits.append(
                    (seg_start, seg_start + len(alias.name), ".".join([PACKAGE, *new_inner]))
                )
    for start, end, text in sorted(edits, reverse=True):
        source = source[:start] + text + source[end:]
    return source


DOTTED = re.compile(
    r"(?<![\w.])letitloop((?:\.[A-Za-z_]\w*)+)(\()?( import \(?[A-Za-z_][\w, ]*| import \()?"
)
#: ``from letitloop import schemes`` in text: code in a string (a child's program), a doc.
FROM_TEXT = re.compile(
    r"(?<![\w.])from letitloop import "
    r"([A-Za-z_]\w*(?: as [A-Za-z_]\w*)?(?:, *[A-Za-z_]\w*(?: as [A-Za-z_]\w*)?)*)"
)
SLASHED = re.compile(r"(?<![\w.])letitloop/([A-Za-z_]\w*)\.py\b")


BARE = re.compile(r"(?<=`)([A-Za-z_]\w*)\.py(?=`)")


def rewrite_bare_names(source: str) -> str:
    """In the docs: a moved module named by its file alone (`` `journal.py` ``) gets its
    path in the package (`` `run/journal.py` ``)."""

    def bare(m: re.Match[str]) -> str:
        name = m.group(1)
        if MOVES.get(name) == name and Path(PACKAGE, name, "__init__.py").is_file():
            return f"{name}/__init__.py"
        new = mapped(name)
        return m.group(0) if new is None else f"{new.replace('.', '/')}.py"

    return BARE.sub(bare, source)


def rewrite_text(source: str) -> str:
    """Dotted and slash paths of moved modules in any text (strings, comments, docs)."""

    frozen = recorded_names()

    def dotted(m: re.Match[str]) -> str:
        if f"letitloop{m.group(1)}" in frozen:
            return m.group(0)  # a name files recorded
        parts = m.group(1).split(".")[1:]
        if len(parts) == 1 and parts[0] in defined_names("__init__"):
            return m.group(0)  # letitloop.unchecked(value), letitloop.durable: the public names
        names: list[str] | None = None
        if m.group(3):  # ``from letitloop.stores import schemes``: the names tell
            listed = m.group(3).removeprefix(" import ").strip("(")
            names = [n.strip().split(" as ")[0] for n in listed.split(",") if n.strip()]
            names = names or ["("]  # a parenthesised list: not read here, never the old module
        new = resolve(parts, names)
        if new is None:
            return m.group(0)
        return "letitloop." + ".".join(new) + (m.group(2) or "") + (m.group(3) or "")

    def slashed(m: re.Match[str]) -> str:
        name = m.group(1)
        if MOVES.get(name) == name and Path(PACKAGE, name, "__init__.py").is_file():
            return f"letitloop/{name}/__init__.py"
        new = mapped(name)
        if new is None:
            return m.group(0)
        return f"letitloop/{new.replace('.', '/')}.py"

    def from_text(m: re.Match[str]) -> str:
        public = defined_names("__init__")
        groups: dict[str, list[str]] = {}
        for item in m.group(1).split(","):
            name, _, bound = item.strip().partition(" as ")
            where = (None if name in public else mapped(name)) or name
            parent, _, leaf = where.rpartition(".")
            bound = bound or name
            groups.setdefault(parent, []).append(leaf if bound == leaf else f"{leaf} as {bound}")
        if list(groups) == [""]:
            return m.group(0)
        return "; ".join(
            f"from letitloop{'.' + p if p else ''} import {', '.join(names)}"
            for p, names in groups.items()
        )

    source = SLASHED.sub(slashed, DOTTED.sub(dotted, source))
    return FROM_TEXT.sub(from_text, source)


def char_at(lines: list[str], offsets: list[int], line: int, col: int) -> int:
    """The character offset in the source of ``ast``'s (line, UTF-8 byte column)."""
    return offsets[line - 1] + len(lines[line - 1].encode()[:col].decode(errors="ignore"))


def rewrite_architecture_tables(source: str, moved_now: set[str]) -> str:
    """tests/test_architecture.py: the bare module names of its tables, and the registry's."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    edits = []
    nodes: list[ast.stmt] = []
    for stmt in tree.body:
        targets = []
        if isinstance(stmt, ast.Assign):
            targets = [t for t in stmt.targets if isinstance(t, ast.Name)]
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            targets = [stmt.target]
        if any(t.id in ARCHITECTURE_TABLES for t in targets):
            nodes.append(stmt)
        if isinstance(stmt, ast.ClassDef) and stmt.name == "TestTheStorageBoundary":
            nodes.append(stmt)
    for stmt in nodes:
        for node in ast.walk(stmt):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            head, _, tail = node.value.partition(".")
            if not head.isidentifier() or node.value.count(" "):
                continue
            if tail and not tail[:1].isupper():
                continue  # only "module" and "module.Class"
            new = mapped(head)  # a table's bare name is a root module's
            if new is None or (exists(head) and head not in moved_now):
                continue  # (``stores``: the room, unless stores.py was moved by this run)
            text = '"' + new + (f".{tail}" if tail else "") + '"'
            start = char_at(lines, offsets, node.lineno, node.col_offset)
            end = char_at(lines, offsets, node.end_lineno or 0, node.end_col_offset or 0)
            edits.append((start, end, text))
    for start, end, text in sorted(edits, reverse=True):
        source = source[:start] + text + source[end:]
    return source


def main() -> int:
    if not Path(PACKAGE, "__init__.py").is_file():
        print("rooms: run me from the checkout's top folder", file=sys.stderr)
        return 1
    moved, unplaced = move_modules()
    changed = []
    for path in files_in_scope():
        try:
            source = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new = source
        if path.suffix == ".py":
            new = rewrite_imports(path, new, moved.get(path))
        if not TEXT_FROZEN.search(path.as_posix()) and path.as_posix() != "tools/rooms.py":
            new = rewrite_text(new)
            if path.suffix == ".md" and path.parts[0] in ("docs", "README.md"):
                new = rewrite_bare_names(new)
        if path.as_posix() == "tests/test_architecture.py":
            new = rewrite_architecture_tables(new, MOVED_NOW)
        if new != source:
            path.write_text(new, encoding="utf-8")
            changed.append(path)
    py = [str(p) for p in changed if p.suffix == ".py"]
    if py and shutil.which("ruff"):
        subprocess.run(["ruff", "check", "-q", "--fix", "--select", "I001", *py], check=False)
        subprocess.run(["ruff", "format", "-q", *py], check=False)
    print(f"rooms: {len(moved)} moved, {len(changed)} files rewritten")
    if unplaced:
        print(f"rooms: no room for letitloop/{{{','.join(unplaced)}}}.py", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

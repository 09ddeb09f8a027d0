"""The docs name everything a user meets: each public name, error, table, view and status.

A name added to the code and not to README.md or docs/ fails here, so the
pages cannot fall behind the code unnoticed (as the inspecting page's table
once lacked ``step_tries``, ``markers`` and the ``waiting``/``cancelled``
statuses).
"""

from __future__ import annotations

import inspect
import re
import sqlite3
from pathlib import Path

import pytest

import letitloop
from letitloop import Journal, errors
from letitloop.inspection.state import PAUSED, STATES

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
INSPECTING = (ROOT / "docs" / "inspecting.md").read_text(encoding="utf-8")
EVERY_PAGE = README + "".join(
    p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md"))
)
SCHEMA = (ROOT / "migrations" / "schema.sql").read_text(encoding="utf-8")


def table_row(page: str, name: str) -> str:
    """The line of ``page``'s table of the file that describes ``name`` (a table or view)."""
    rows = [ln for ln in page.splitlines() if ln.startswith("|") and f"`{name}`" in ln]
    assert rows, f"no row for `{name}` in the table of the file's tables"
    return " ".join(rows)


def checked(column: str, table: str) -> list[str]:
    """The values schema.sql's CHECK allows in ``table``'s ``column``."""
    body = SCHEMA[SCHEMA.index(f"CREATE TABLE {table} ") :]
    line = next(ln for ln in body.splitlines() if ln.strip().startswith(f"{column} "))
    return re.findall(r"'([a-z_]+)'", line)


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Every table and view of a journal file that was used (LangGraph's too, if installed)."""
    db = tmp_path_factory.mktemp("docs") / "journal.db"
    with Journal("customer_sync", path=db) as j:
        j.step("fetch", str, 1)
    try:
        from letitloop.adapters.langgraph import LetItLoopCheckpointSaver
    except ImportError:
        pass
    else:
        with LetItLoopCheckpointSaver(str(db)):
            pass
    with sqlite3.connect(db) as conn:
        names = [
            n
            for (n,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
                "AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
    # A goal's view and (since 0011) its compact table, as the docs name them.
    named = {"journal_customer_sync": "journal_<goal>", "_journal_customer_sync": "_journal_<goal>"}
    return [named.get(n, n) for n in names]


class TestThePublicNames:
    @pytest.mark.parametrize("name", [n for n in letitloop.__all__ if n != "__version__"])
    def test_each_is_in_the_docs(self, name: str) -> None:
        assert f"`{name}" in EVERY_PAGE or f"{name}(" in EVERY_PAGE, name

    @pytest.mark.parametrize(
        "name",
        [
            n
            for n, c in vars(errors).items()
            if inspect.isclass(c) and issubclass(c, errors.LetItLoopError)
        ],
    )
    def test_each_error_is_in_the_docs(self, name: str) -> None:
        assert f"`{name}`" in EVERY_PAGE, name


class TestTheTablesOfTheFile:
    def test_readme_and_the_inspecting_page_describe_every_table_and_view(
        self, objects: list[str]
    ) -> None:
        assert "runs" in objects and "step_tries" in objects and "markers" in objects
        for page in (README, INSPECTING):
            missing = [n for n in objects if not any(f"`{n}`" in row for row in _rows(page))]
            assert not missing, missing

    def test_the_runs_row_names_every_run_status(self) -> None:
        statuses = checked("status", "runs")
        assert "cancelled" in statuses
        for page in (README, INSPECTING):
            row = table_row(page, "runs")
            assert all(f"`{s}`" in row for s in statuses), (row, statuses)

    def test_the_journal_row_names_every_kind_and_status(self) -> None:
        kinds = ["step", "marker", "sleep", "wait"]
        statuses = ["done", "failed", "running", "pending", *PAUSED]
        row = table_row(INSPECTING, "journal_<goal>")
        for word in kinds + statuses:
            assert f"`{word}`" in row, (word, row)


class TestTheStatesLilShows:
    @pytest.mark.parametrize("state", STATES)
    def test_each_is_explained_in_readme_and_the_inspecting_page(self, state: str) -> None:
        assert state in README and f"`{state}`" in INSPECTING, state


def _rows(page: str) -> list[str]:
    return [ln for ln in page.splitlines() if ln.startswith("|")]


class TestStatementsThatWentStale:
    @pytest.mark.parametrize(
        ("page", "stale"),
        [
            ("docs/markers.md", "stay in the folder after use"),
            ("docs/langgraph.md", "The core has no usage API"),
            ("README.md", "for the exceptions you name"),
        ],
    )
    def test_they_are_gone(self, page: str, stale: str) -> None:
        assert stale not in (ROOT / page).read_text(encoding="utf-8")

    def test_the_default_retry_on_is_written_where_retries_are_explained(self) -> None:
        from letitloop import RetryPolicy

        assert RetryPolicy().retry_on == (Exception,)
        for page in ("README.md", "docs/primitives.md"):
            assert "`retry_on=(Exception,)`" in (ROOT / page).read_text(encoding="utf-8"), page


def readme_section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end > 0 else None]


class TestTheDocsIndex:
    def test_readme_lists_every_docs_page_once_with_what_it_is(self) -> None:
        index = readme_section("The docs, page by page")
        rows = [ln for ln in index.splitlines() if ln.startswith("| [docs/")]
        listed = [re.match(r"\| \[(docs/[^\]]+)\]\(\1\) \| (.+) \|$", ln) for ln in rows]
        assert all(listed), [r for r, m in zip(rows, listed, strict=True) if not m]
        pages = [m.group(1) for m in listed if m]
        on_disk = sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))
        assert pages == on_disk, "README's docs index must list every docs/*.md, in order"
        assert all(len(m.group(2)) > 20 for m in listed if m)


#: Each adapter package (letitloop/adapters/<name>/, and letitloop/mcp/) and how README's
#: "Frameworks:" line names it. A new adapter fails here until the line names it.
FRAMEWORKS = {
    "autogen": "[AutoGen]",
    "crewai": "[CrewAI]",
    "dspy": "[DSPy]",
    "langgraph": "[LangGraph]",
    "llamaindex": "[LlamaIndex workflows]",
    "openai_agents": "[OpenAI Agents SDK]",
    "pydantic_ai": "[Pydantic AI]",
    "smolagents": "[smolagents]",
    "mcp": "[MCP]",
    "openai": "[OpenAI client]",
}


class TestTheFrameworksLine:
    def test_it_names_and_links_every_adapter(self) -> None:
        packages = {p.name for p in (ROOT / "letitloop" / "adapters").iterdir() if p.is_dir()}
        packages.discard("__pycache__")
        assert packages | {"mcp"} == set(FRAMEWORKS), "a new adapter: add it to FRAMEWORKS"
        start = README.index("**Frameworks:**")
        line = README[start : README.index("\n\n", start)]
        for name in FRAMEWORKS.values():
            assert f"{name}(docs/" in line, name


class TestTheBenchmarksTable:
    def test_readmes_is_benchmarks_readmes_todays_figures_word_for_word(self) -> None:
        """One source: README's figures are benchmarks/README.md's, never other (older) ones."""

        def table(text: str) -> list[str]:
            return [ln for ln in text.splitlines() if ln.startswith("|")]

        bench = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
        start = bench.index("\n## Today's figures\n")
        todays = table(bench[start : bench.index("\n## ", start + 1)])
        shown = table(readme_section("Benchmarks"))
        assert len(shown) > 5
        assert shown == todays
        assert "(benchmarks/README.md)" in readme_section("Benchmarks")

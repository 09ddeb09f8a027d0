"""Where each trial of the crash test keeps its journal: a file, or a fresh PostgreSQL schema.

A trial's runs (the killed one and its reruns) share one journal, and no
trial sees another's. On the file (the default) that is ``journal.db`` in
the trial's own folder. When ``lil crashtest`` runs with ``LETITLOOP_DB`` a
``postgresql://`` URL, each trial (and the reference run) gets a schema of
its own on that database, made empty before the trial
(``CREATE SCHEMA lil_crashtest_…``), named in the URL's ``search_path``, and
dropped with its tables after it. The role needs the right to create
schemas in that database (``GRANT CREATE ON DATABASE …``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..stores.schemes import scheme_of

#: The schemes of the PostgreSQL store (stores/postgres).
POSTGRES = ("postgresql", "postgres")


def with_search_path(url: str, schema: str) -> str:
    """``url`` whose connections use ``schema`` (its ``options``' other settings kept)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    options = [v for k, v in query if k == "options"]
    kept = " ".join(
        word
        for value in options
        for word in value.split()
        if not word.startswith(("-csearch_path=", "-c search_path="))
    )
    query = [(k, v) for k, v in query if k != "options"]
    query.append(("options", f"{kept} -csearch_path={schema}".strip()))
    return urlunsplit(parts._replace(query=urlencode(query)))


class TrialJournals:
    """The journals of the crash test's trials, on the file or on ``base``'s PostgreSQL."""

    def __init__(self, base: str | None) -> None:
        #: The PostgreSQL database the trials' schemas are made in; None: journal files.
        self.base = base if base and scheme_of(base) in POSTGRES else None

    @contextmanager
    def journal(self, folder: Path) -> Iterator[str]:
        """The ``LETITLOOP_DB`` of one trial run in ``folder``: empty now, gone afterwards."""
        if self.base is None:
            yield str(folder / "journal.db")
            return
        from ..stores.postgres.database import connect  # only a test on PostgreSQL needs it

        # Unique across concurrent crash tests on one database; a name SQL needs no quotes for.
        schema = f"lil_crashtest_{uuid.uuid4().hex[:16]}"
        with connect(self.base) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        try:
            yield with_search_path(self.base, schema)
        finally:
            with connect(self.base) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")

"""A run as one JSON-ready document (:func:`export_run`) or a stream of records, one per
line of ``lil export --format ndjson`` (:func:`export_records`), results decoded.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .. import codec
from ..store import Store
from .detail import show_run
from .records import RunDetail, RunInfo
from .results import decode_result, json_ready


def export_run(
    store: Store, run: RunDetail | RunInfo | str, registry: codec.CodecRegistry | None = None
) -> dict[str, Any]:
    """The run, its rows (results decoded), attempts and supervisor events as one dict.

    Each row (and the run) keeps the stored JSON text as ``result_json``
    beside the decoded ``result``; ``result_error`` is None, or says why a
    damaged stored text could not be decoded (``result`` is then None). The
    run's ``input`` is decoded the same way (``input_json``, ``input_error``).
    The dict is JSON-ready for a strict writer (:func:`json_ready`).
    """
    detail = run if isinstance(run, RunDetail) else show_run(store, run)
    # The recorded columns first (a REAL column may hold an infinity), then the
    # results, which decode_result has made JSON-ready already.
    out: dict[str, Any] = json_ready(detail.as_dict())
    stored = detail.result_json
    out["run"]["result"], out["run"]["result_error"] = decode_result(stored, registry)
    out["run"]["result_json"] = stored
    out["run"]["input"], out["run"]["input_error"] = decode_result(detail.run.input_json, registry)
    for r, d in zip(detail.rows, out["rows"], strict=True):
        d["result_json"] = d.pop("result")
        d["result"], d["result_error"] = decode_result(r.result, registry)
    return out


def export_records(
    store: Store, run: RunDetail | RunInfo | str, registry: codec.CodecRegistry | None = None
) -> Iterator[dict[str, Any]]:
    """:func:`export_run` as a stream of records, one per line of ``--format ndjson``.

    Each record has ``record``: ``run`` first, then a ``row`` per step/marker in
    journal order, an ``attempt`` each, a ``supervisor_event`` each.
    """
    data = export_run(store, run, registry)
    yield {"record": "run", **data["run"], "previous_steps": data["previous_steps"]}
    for kind, items in (
        ("row", data["rows"]),
        ("attempt", data["attempts"]),
        ("supervisor_event", data["supervisor_events"]),
    ):
        for item in items:
            yield {"record": kind, **item}

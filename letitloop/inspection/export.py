"""A run as one JSON-ready document (:func:`export_run`) or a stream of records, one per
line of ``lil export --format ndjson`` (:func:`export_records`), results decoded: the same
record model, whole, in either form.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import replace
from typing import Any

from .. import codec
from ..integrity.redaction import redact_text
from ..stores.sqlite.store import Store
from .detail import show_run
from .inspector import Inspector
from .records import RunDetail, RunInfo
from .results import decode_result, json_ready


def export_run(
    inspector: Inspector | Store,
    run: RunDetail | RunInfo | str,
    registry: codec.CodecRegistry | None = None,
    redact: Collection[str] = (),
) -> dict[str, Any]:
    """The run, its rows (results decoded), attempts and supervisor events as one dict.

    Each row (and the run) keeps the stored JSON text as ``result_json``
    beside the decoded ``result``; ``result_error`` is None, or says why a
    damaged stored text could not be decoded (``result`` is then None). The
    run's ``input`` is decoded the same way (``input_json``, ``input_error``).
    The dict is JSON-ready for a strict writer (:func:`json_ready`).
    ``redact``: dict keys whose values, in the input, the result and every
    row's result, are replaced by ``"[redacted]"`` (letitloop.integrity.redaction).
    """
    detail = run if isinstance(run, RunDetail) else show_run(inspector, run)
    if redact:
        detail = redacted(detail, redact)
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


#: The record name of each item of a list of :func:`export_run`'s document.
RECORDS = {
    "rows": "row",
    "tries": "try",
    "attempts": "attempt",
    "supervisor_events": "supervisor_event",
    "reservations": "reservation",
}


def export_records(
    inspector: Inspector | Store,
    run: RunDetail | RunInfo | str,
    registry: codec.CodecRegistry | None = None,
    redact: Collection[str] = (),
) -> Iterator[dict[str, Any]]:
    """:func:`export_run` as a stream of records, one per line of ``--format ndjson``.

    The same record model as the one document, cut into lines, nothing left
    out: ``record: "run"`` first (the run, and the document's other plain
    values, ``previous_steps``); then one record per item of each list, in
    order (``row`` per step/marker in journal order, ``try`` per failed try,
    ``attempt``, ``supervisor_event``); then one per other object of the
    document (``usage``: the run's totals). A list the document gains later
    is streamed under its own name without a change here.
    """
    data = export_run(inspector, run, registry, redact)
    plain = {k: v for k, v in data.items() if k != "run" and not isinstance(v, (list, dict))}
    yield {"record": "run", **data["run"], **plain}
    for name, value in data.items():
        if isinstance(value, list):
            kind = RECORDS.get(name, name)
            for item in value:
                yield {"record": kind, **item}
    for name, value in data.items():
        if name != "run" and isinstance(value, dict):
            yield {"record": name, **value}


def redacted(detail: RunDetail, keys: Collection[str]) -> RunDetail:
    """``detail`` with the values of ``keys`` replaced in its input, result and rows' results."""
    return replace(
        detail,
        run=replace(detail.run, input_json=redact_text(detail.run.input_json, keys)),
        result_json=redact_text(detail.result_json, keys),
        rows=[replace(r, result=redact_text(r.result, keys)) for r in detail.rows],
    )

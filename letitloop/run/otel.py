"""OpenTelemetry spans: one per attempt, one per step it ran, per sleep, wait and marker it ran.

Loaded only by a journal that opens in a program which loaded OpenTelemetry
itself (``opentelemetry.trace`` in ``sys.modules``); spans are on only if it
also set a tracer provider (:func:`begin`). A program that did not load
OpenTelemetry never imports this module, and with spans off a step pays one
attribute check (``j._trace is None``). letitloop configures no exporter: the
spans go wherever the program's provider sends them. What each span carries,
and why replayed steps are one event rather than spans: docs/observability.md.

- The attempt's span starts when the journal opens (its start: when
  ``open`` began), as a child of the caller's current span, and ends when it
  closes, with the run's outcome; ``with``/``async with`` make it current in
  the block. Its span is recorded in the run's ``attempts`` row
  (``RunRows.trace_attempt``), and the next attempt links to the latest one
  recorded: a run's attempts are found together, whichever trace each ran in.
- A step that runs gets a span, current while its function runs (a step
  inside it, and the spans of the libraries it calls, are its children);
  a step with no span around it in its context (a worker thread) is the
  attempt's child. Failed retry tries are events on it; a failure sets its
  status and records the exception; reported usage becomes GenAI attributes.
- A replayed step gets no span: the attempt's span gets one ``letitloop.replayed``
  event when it ends (how many, what they had cost).

This module is the one owner of ``Journal._trace`` (an :class:`AttemptSpans`, or None while
tracing is off): set by :func:`begin` in the thread that opens the journal, cleared by
:meth:`AttemptSpans.end` in the thread that closes it; steps read it with no lock, as they
read the rest of the attempt. :meth:`AttemptSpans.note_replays` is called by any thread that
writes replays (a ``list.extend``, atomic under the GIL).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry import context, trace
from opentelemetry.trace import INVALID_SPAN, Span, SpanContext, Status, StatusCode

from ..errors import LetItLoopError, error_text

if TYPE_CHECKING:
    from ..primitives.costs import Usage
    from ..stores.storage import Storage
    from .journal import Journal
    from .retry import RetryPolicy, TryEnded

T = TypeVar("T")

#: ``LETITLOOP_OTEL=off`` keeps letitloop's spans out of a program that traces
#: otherwise (the only switch: spans are on wherever a tracer provider is set).
SWITCH = "LETITLOOP_OTEL"

#: The instrumentation scope of every span (the tracer's name).
SCOPE = "letitloop"


def begin(j: Journal, began_ns: int) -> None:
    """Start ``j``'s attempt span if the program set a tracer provider; else nothing.

    ``began_ns`` is when ``open`` began (``time.time_ns()``): the span covers
    the wait for the run's holder too. Never raises: the journal is open and
    holds its run by now, and tracing never stops a run (a provider that
    fails gives no spans; a recording that fails, only no link).
    """
    if os.environ.get(SWITCH, "").lower() in ("off", "0", "false"):
        return
    provider = trace.get_tracer_provider()
    # No provider set yet (the API's proxy) or tracing disabled: no spans, no cost.
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return
    try:
        j._trace = AttemptSpans(j, provider.get_tracer(SCOPE), began_ns)
    except Exception:  # the program's SDK or exporter failed: the run goes on untraced
        return


def traceparent(sc: SpanContext) -> str:
    """A span's context as a W3C ``traceparent`` header value."""
    return f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{int(sc.trace_flags):02x}"


def parse_traceparent(text: str) -> SpanContext | None:
    """The span context of a ``traceparent`` value; None for anything else."""
    parts = text.split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    try:
        sc = SpanContext(
            int(parts[1], 16),
            int(parts[2], 16),
            is_remote=True,
            trace_flags=trace.TraceFlags(int(parts[3], 16)),
        )
    except ValueError:
        return None
    return sc if sc.is_valid else None


def hidden(j: Journal) -> bool:
    """Whether ``j``'s run is encrypted: its error texts are then kept out of its spans."""
    return j._cipher is not None


def failed(span: Span, exc: BaseException, secret: bool = False) -> None:
    """``span`` ended by ``exc``: its status is an error, the exception an event;
    ``secret`` (an encrypted run): its type alone, no message, no stack trace."""
    if secret:
        kind = type(exc).__qualname__
        span.add_event("exception", {"exception.type": kind})
        span.set_status(Status(StatusCode.ERROR, kind))
        return
    span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, error_text(exc)))


def spent(span: Span, u: Usage) -> None:
    """Usage reported by a step's function, as GenAI attributes (docs/observability.md)."""
    if u.input_tokens is not None:
        span.set_attribute("gen_ai.usage.input_tokens", u.input_tokens)
    if u.output_tokens is not None:
        span.set_attribute("gen_ai.usage.output_tokens", u.output_tokens)
    if u.cost is not None:
        span.set_attribute("letitloop.usage.cost", u.cost)
    if u.model:
        span.set_attribute("gen_ai.response.model", u.model)


class OpenSpan:
    """A span made current until :meth:`end` (a marker's block, a sleep, a wait)."""

    __slots__ = ("secret", "span", "token")

    def __init__(self, span: Span, secret: bool = False) -> None:
        self.span = span
        self.secret = secret
        self.token = context.attach(trace.set_span_in_context(span))

    def end(self, exc: BaseException | None, **attributes: Any) -> None:
        """Detach and end the span; ``exc`` an Exception: failed; another (RunWaiting, an
        interrupt): ``letitloop.stopped`` names it."""
        context.detach(self.token)
        span = self.span
        for name, value in attributes.items():
            span.set_attribute(f"letitloop.{name}", value)
        if isinstance(exc, Exception):
            failed(span, exc, self.secret)
        elif exc is not None:
            span.set_attribute("letitloop.stopped", type(exc).__name__)
        span.end()

    def __enter__(self) -> OpenSpan:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.end(exc)


class AttemptSpans:
    """One attempt's spans: the attempt's own, and the spans of the work it runs."""

    __slots__ = ("context", "replayed", "secret", "span", "tokens", "tracer")

    def __init__(self, j: Journal, tracer: trace.Tracer, began_ns: int) -> None:
        self.tracer = tracer
        self.secret = hidden(j)
        kind = "new" if j._opened.created else "replay" if j.was_completed else "resumed"
        attributes: dict[str, Any] = {
            "letitloop.goal": j.goal,
            "letitloop.run.id": j.run_id,
            "letitloop.attempt": j.attempt,
            "letitloop.attempt.kind": kind,
        }
        if j.run_name is not None:
            attributes["letitloop.run.name"] = j.run_name
        self.span = span = tracer.start_span(
            f"run {j.goal}", attributes=attributes, start_time=began_ns
        )
        self.context = trace.set_span_in_context(span)
        self.tokens: list[object] = []
        self.replayed: list[str] = []
        sc = span.get_span_context()
        storage = j._opened.storage
        # A completed run opened again is no new attempt (its number is the last one's):
        # nothing to record. Replay-only journals write nothing.
        if not sc.is_valid or storage is None or j.was_completed or j.replay_only:
            return
        try:
            earlier = storage.trace_attempt(j.run_id, j.attempt, traceparent(sc))
        except LetItLoopError:
            return  # the spans go on without the link
        previous = None if earlier is None else parse_traceparent(earlier)
        if previous is not None:
            span.add_link(previous, {"letitloop.link": "previous attempt"})

    # -- the attempt ------------------------------------------------------------------

    def enter(self) -> None:
        """The journal's ``with`` block begins: the attempt's span is current in it."""
        self.tokens.append(context.attach(self.context))

    def leave(self) -> None:
        """The journal's ``with`` block ends."""
        if self.tokens:
            context.detach(self.tokens.pop())  # type: ignore[arg-type]

    def note_replays(self, keys: Sequence[str]) -> None:
        """Steps this attempt got back from the journal (replay.flush_replays)."""
        self.replayed.extend(keys)

    def end(self, j: Journal, outcome: str, exc: BaseException | None) -> None:
        """The attempt ends with the run ``outcome`` (closing.py): the replay event, the span."""
        span = self.span
        span.set_attribute("letitloop.run.outcome", outcome)
        if self.replayed:
            event: dict[str, Any] = {"letitloop.replayed.steps": len(self.replayed)}
            storage = j._opened.storage
            if storage is not None:
                try:
                    used = storage.usage_of(j.run_id, sorted(set(self.replayed)))
                except LetItLoopError:
                    used = (None, None, None)
                for name, value in zip(
                    ("input_tokens", "output_tokens", "cost"), used, strict=True
                ):
                    if value is not None:
                        event[f"letitloop.replayed.{name}"] = value
            span.add_event("letitloop.replayed", event)
        if outcome == "failed" and exc is not None:
            failed(span, exc, self.secret)
        span.end()
        j._trace = None

    # -- the work it runs -------------------------------------------------------------

    def start(self, name: str, attributes: dict[str, Any]) -> Span:
        """A span of this attempt's work: a child of the current span, else of the attempt's."""
        here = context.get_current()
        parent = here if trace.get_current_span(here) is not INVALID_SPAN else self.context
        return self.tracer.start_span(name, parent, attributes=attributes)

    def step(
        self,
        j: Journal,
        store: Storage,
        name: str,
        key: str,
        fn_name: str,
        fp: str,
        policy: RetryPolicy | None,
        fn: Callable[..., T],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        ended: TryEnded | None = None,
    ) -> T:
        """``fn(*args, **kwargs)`` (tried as ``policy`` says) inside step ``key``'s span."""
        with StepSpan(self, j, name, key, fn_name) as spans:
            if policy is None:
                return fn(*args, **kwargs)
            from . import retry as retries  # loaded with the RetryPolicy it was given

            tries = spans.retried()
            value: T = retries.call(
                j, store, key, fn_name, fp, policy, partial(tries.call, fn), args, kwargs, ended
            )
            return value

    async def async_step(
        self,
        j: Journal,
        store: Storage,
        name: str,
        key: str,
        fn_name: str,
        fp: str,
        policy: RetryPolicy | None,
        invoke: Callable[[], Awaitable[Any]],
        ended: TryEnded | None = None,
    ) -> Any:
        """:meth:`step` for ``async_step``: ``invoke()`` makes one try (async_steps.py)."""
        with StepSpan(self, j, name, key, fn_name) as spans:
            if policy is None:
                return await invoke()
            from . import retry as retries  # loaded with the RetryPolicy it was given

            tries = spans.retried()
            return await retries.async_call(
                j, store, key, fn_name, fp, policy, partial(tries.async_call, invoke), ended
            )

    def pause(self, kind: str, name: str, key: str) -> OpenSpan:
        """The span of a sleep or a wait that runs (``kind``), current until it ends."""
        return OpenSpan(self.start(f"{kind} {name}", {f"letitloop.{kind}.key": key}), self.secret)

    def marker(self, name: str, scope: str, claims: int, crashed_before: bool) -> OpenSpan:
        """The span of a marker's block that runs (offered), current until the block ends."""
        return OpenSpan(
            self.start(
                f"marker {name}",
                {
                    "letitloop.marker.name": name,
                    "letitloop.marker.scope": scope,
                    "letitloop.marker.claims": claims,
                    "letitloop.marker.crashed_before": crashed_before,
                },
            ),
            self.secret,
        )


class StepSpan:
    """A step's span, current inside ``with``: failed by what the block raises, then ended
    with the usage the step's calls reported in this attempt (and its tries', if retried)."""

    __slots__ = ("j", "key", "span", "token", "tries")

    def __init__(self, spans: AttemptSpans, j: Journal, name: str, key: str, fn_name: str):
        self.j = j
        self.key = key
        self.span = spans.start(
            f"step {name}", {"letitloop.step.key": key, "letitloop.step.function": fn_name}
        )
        self.token: object = None
        self.tries: Tries | None = None

    def __enter__(self) -> StepSpan:
        self.token = context.attach(trace.set_span_in_context(self.span))
        return self

    def retried(self) -> Tries:
        """The step runs under a retry policy: its tries, each failure an event of the span."""
        self.tries = Tries(self.j, self.span, self.key)
        return self.tries

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if exc is not None:
            failed(self.span, exc, hidden(self.j))
        context.detach(self.token)  # type: ignore[arg-type]
        ended(self.j, self.span, self.key, self.tries)


class Tries:
    """A retried step's tries in this attempt: each failure an event, their usage summed."""

    __slots__ = ("j", "key", "n", "span", "usage")

    def __init__(self, j: Journal, span: Span, key: str) -> None:
        self.j = j
        self.span = span
        self.key = key
        self.n = 0
        self.usage: Usage | None = None

    def failed_try(self, exc: Exception) -> None:
        """Try ``n`` raised: an event; its usage (retry.py takes it next) kept for the span."""
        attributes: dict[str, Any] = {
            "letitloop.try": self.n,
            "exception.type": type(exc).__qualname__,
        }
        if not hidden(self.j):  # an encrypted run's error texts stay in the journal, encrypted
            attributes["exception.message"] = str(exc)
        u = self.j._flight.usage.get(self.key)
        if u is not None:
            from ..primitives.costs import Usage

            if self.usage is None:
                self.usage = Usage()
            self.usage.add(u)
        self.span.add_event("letitloop.try_failed", attributes)

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self.n += 1
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            self.failed_try(exc)
            raise

    async def async_call(self, invoke: Callable[[], Awaitable[Any]]) -> Any:
        self.n += 1
        try:
            return await invoke()
        except Exception as exc:
            self.failed_try(exc)
            raise


def ended(j: Journal, span: Span, key: str, tries: Tries | None) -> None:
    """End a step's span with the usage its calls reported in this attempt."""
    usage = j._flight.usage
    u = usage.get(key) if usage else None
    if tries is not None and tries.usage is not None:
        if u is not None:
            tries.usage.add(u)
        u = tries.usage
    if u is not None:
        spent(span, u)
    span.end()

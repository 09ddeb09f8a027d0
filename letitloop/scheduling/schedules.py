"""Schedules: a durable function's runs started by a cron expression, once per tick.

:class:`Schedule` (and the decorator :func:`schedule`) joins a ``@durable`` or
``@durable_async`` function to a cron expression read in a time zone, with
the two policies of a scheduler that was not running when a tick came
(``catch_up``) or whose last run is still going (``overlap``). This module
is the schedule's arithmetic: which ticks are due at a time
(:meth:`Schedule.due`), each tick's run name (:meth:`Schedule.run_name`).
The loop that claims and starts them is ``scheduler.py``.

The cron expressions and their time zones are cronsim's
(https://github.com/cuu508/cronsim, the optional extra
``schedules``), imported by this module only, when a schedule is
made: it reads an expression in the zone as Debian's cron does, through
daylight-saving changes too (a time skipped by the spring change runs at the
first minute after it; a fixed time repeated by the autumn change runs once;
``*/15``-style steps run on each real quarter-hour). Zones are the standard
library's ``zoneinfo``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ..errors import LetItLoopError, MisuseError
from ..identity.names import check_name
from ..run.decoration import durable_of

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

CatchUp = Literal["skip", "latest", "all"]
Overlap = Literal["skip", "queue", "allow"]
F = TypeVar("F", bound=Callable[..., Any])

CATCH_UPS = ("skip", "latest", "all")
OVERLAPS = ("skip", "queue", "allow")

#: How late a scheduler may see a tick and still count it on time, in seconds: a
#: scheduler polls the clock (scheduler.POLL_S) and may be slowed by a busy machine.
#: A tick seen later than this was missed (the machine slept, no scheduler ran), and the
#: catch-up policy decides whether its run starts.
DEFAULT_GRACE_S = 60.0

#: The attribute of a decorated function that lists its schedules (``@schedule`` adds one).
SCHEDULES_ATTR = "__letitloop_schedules__"


def _cronsim() -> Any:
    try:
        import cronsim
    except ImportError:
        raise LetItLoopError(
            "schedules need the cronsim package, which is not installed; install the "
            "schedules extra (pip install -e '.[schedules]' in a checkout)"
        ) from None
    return cronsim


def _seconds(value: float | timedelta | None, what: str, name: str) -> float | None:
    if value is None:
        return None
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        raise MisuseError(
            f"schedule {name!r}: {what}= expects a positive number of seconds or a timedelta, "
            f"got {value!r}"
        )
    return float(seconds)


class Schedule:
    """A durable function's runs, one per tick of a cron expression read in a time zone.

    ``fn`` is a ``@durable``/``@durable_async`` function called with no argument,
    or with the tick (an aware ``datetime`` in ``tz``) if it has one parameter
    without a default. ``name`` names the schedule (default: the goal); each
    tick's run is the goal's run named ``<name>@<tick in UTC, ISO-8601>``.

    ``catch_up`` decides for ticks missed while no scheduler ran (later than
    ``grace`` seconds when one sees them): ``"skip"`` starts none,
    ``"latest"`` (the default) only the most recent, ``"all"`` each one later
    than ``window`` before now (required for ``"all"``). ``overlap`` decides
    for a tick whose schedule's run is still going: ``"skip"`` (the default)
    starts nothing, ``"queue"`` starts it when the run ends (one queued at
    most: later ones are skipped), ``"allow"`` starts it beside the other.
    Bad arguments raise MisuseError at once (so at import); a missing cronsim
    package LetItLoopError.
    """

    def __init__(
        self,
        cron: str,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        tz: str = "UTC",
        catch_up: CatchUp = "latest",
        window: float | timedelta | None = None,
        overlap: Overlap = "skip",
        grace: float | timedelta = DEFAULT_GRACE_S,
    ) -> None:
        info = durable_of(fn)
        self.fn = fn
        self.goal = info.goal
        self.name = check_name("schedule", info.goal if name is None else name)
        if catch_up not in CATCH_UPS:
            raise MisuseError(
                f"schedule {self.name!r}: catch_up= expects one of {', '.join(CATCH_UPS)}, "
                f"got {catch_up!r}"
            )
        if overlap not in OVERLAPS:
            raise MisuseError(
                f"schedule {self.name!r}: overlap= expects one of {', '.join(OVERLAPS)}, "
                f"got {overlap!r}"
            )
        self.catch_up: CatchUp = catch_up
        self.overlap: Overlap = overlap
        self.window = _seconds(window, "window", self.name)
        if catch_up == "all" and self.window is None:
            raise MisuseError(
                f"schedule {self.name!r}: catch_up='all' needs window=, how far back missed "
                f"ticks are started (window=timedelta(hours=1)): without one a long sleep "
                f"would start every tick it missed"
            )
        self.grace = _seconds(grace, "grace", self.name) or DEFAULT_GRACE_S
        self.tz = tz
        self.zone = _zone(tz, self.name)
        self.cron = cron
        self._cronsim = _cronsim()
        try:
            self._cronsim.CronSim(cron, datetime.now(self.zone))
        except self._cronsim.CronSimError as exc:
            raise MisuseError(
                f"schedule {self.name!r}: expected a cron expression of five fields "
                f"('*/15 * * * *'), got {cron!r}: {exc}"
            ) from None
        self.takes_tick = _takes_tick(info.signature, self.name)

    def __repr__(self) -> str:
        return f"Schedule({self.cron!r}, goal={self.goal!r}, name={self.name!r}, tz={self.tz!r})"

    # -- the ticks -----------------------------------------------------------------------

    def _after(self, when: datetime) -> Iterator[datetime]:
        """The ticks strictly after ``when``, in order, as aware datetimes in the zone."""
        it: Iterator[datetime] = self._cronsim.CronSim(self.cron, when.astimezone(self.zone))
        return it

    def ticks_between(self, after: datetime, until: datetime) -> list[datetime]:
        """The ticks later than ``after`` and not later than ``until``, in order."""
        found = []
        for tick in self._after(after):
            if tick > until:
                break
            found.append(tick)
        return found

    def next_tick(self, after: datetime) -> datetime:
        """The first tick later than ``after``."""
        return next(self._after(after))

    def latest_tick(self, at: datetime) -> datetime | None:
        """The last tick at or before ``at`` (None: the expression never matched before)."""
        # cronsim walks back from a minute strictly before its start: start a minute on,
        # added in UTC (wall-clock arithmetic in the zone would lose a repeated hour's fold).
        start = (at + timedelta(minutes=1)).astimezone(self.zone)
        it = self._cronsim.CronSim(self.cron, start, reverse=True)
        for tick in it:
            if tick <= at:
                return tick  # type: ignore[no-any-return]
        return None

    def due(self, cursor: datetime, now: datetime) -> list[datetime]:
        """The ticks to claim at ``now``, every tick at or before ``cursor`` being decided.

        A tick at most ``grace`` seconds before ``now`` is on time and due
        whatever the policy. Earlier ones were missed: ``catch_up`` says which
        of them are due (none, the latest, or those later than ``window``
        before now). In order, oldest first.
        """
        if now <= cursor:
            return []
        on_time_from = max(cursor, now - timedelta(seconds=self.grace))
        on_time = self.ticks_between(on_time_from, now)
        late: list[datetime] = []
        if self.catch_up == "latest" and not on_time:
            latest = self.latest_tick(on_time_from)
            if latest is not None and latest > cursor:
                late = [latest]
        elif self.catch_up == "all":
            assert self.window is not None
            start = max(cursor, now - timedelta(seconds=self.window))
            if start < on_time_from:
                late = self.ticks_between(start, on_time_from)
        return late + on_time

    def run_name(self, tick: datetime) -> str:
        """The name of the tick's run: ``<schedule>@<tick in UTC, ISO-8601>``."""
        return f"{self.name}@{tick_text(tick)}"

    def call_args(self, tick: datetime) -> tuple[Any, ...]:
        """The arguments the function is called with for ``tick``."""
        return (tick.astimezone(self.zone),) if self.takes_tick else ()


def tick_text(tick: datetime) -> str:
    """A tick as the journal records it: ISO-8601 UTC, to the second (``…T09:15:00+00:00``)."""
    return tick.astimezone(timezone.utc).isoformat(timespec="seconds")


def tick_time(text: str) -> datetime:
    """A tick's time from its text (:func:`tick_text`, or any ISO-8601 with an offset)."""
    return datetime.fromisoformat(text)


def _zone(tz: str, name: str) -> ZoneInfo:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise MisuseError(
            f"schedule {name!r}: tz= expects an IANA time zone name ('Europe/Paris', 'UTC'), "
            f"got {tz!r}"
        ) from None


def _takes_tick(signature: inspect.Signature, name: str) -> bool:
    required = [
        p
        for p in signature.parameters.values()
        if p.default is inspect.Parameter.empty
        and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]
    if len(required) > 1 or any(p.kind is inspect.Parameter.KEYWORD_ONLY for p in required):
        raise MisuseError(
            f"schedule {name!r}: a scheduled function is called with no argument or with its "
            f"tick, found required parameters {', '.join(p.name for p in required)}; give "
            f"the others defaults"
        )
    return bool(required)


def schedule(
    cron: str,
    *,
    name: str | None = None,
    tz: str = "UTC",
    catch_up: CatchUp = "latest",
    window: float | timedelta | None = None,
    overlap: Overlap = "skip",
    grace: float | timedelta = DEFAULT_GRACE_S,
) -> Callable[[F], F]:
    """Schedule the ``@durable`` function below: ``Schedule(cron, fn, ...)``, kept on it.

    The function is returned unchanged (calling it runs it as before); its
    schedules are what ``run_schedules`` and ``lil schedules run`` start.
    Stack several for several schedules (give each a ``name``).
    """

    def decorate(fn: F) -> F:
        made = Schedule(
            cron,
            fn,
            name=name,
            tz=tz,
            catch_up=catch_up,
            window=window,
            overlap=overlap,
            grace=grace,
        )
        kept: list[Schedule] = list(getattr(fn, SCHEDULES_ATTR, []))
        if any(s.name == made.name for s in kept):
            raise MisuseError(
                f"two schedules named {made.name!r} on one function; give each a name= of its own"
            )
        setattr(fn, SCHEDULES_ATTR, [*kept, made])
        return fn

    return decorate


def schedules_of(target: object) -> list[Schedule]:
    """The schedules of ``target``: a Schedule, a scheduled function, or a module's (in the
    module's order); an iterable of them, flattened."""
    if isinstance(target, Schedule):
        return [target]
    found = getattr(target, SCHEDULES_ATTR, None)
    if isinstance(found, list):
        return list(found)
    if inspect.ismodule(target):
        kept: list[Schedule] = []
        for value in vars(target).values():
            for s in schedules_of_value(value):
                if all(s is not k for k in kept):
                    kept.append(s)
        return kept
    if isinstance(target, (list, tuple, set, frozenset)):
        return [s for item in target for s in schedules_of(item)]
    raise MisuseError(
        f"expected a Schedule, a @schedule function or a module holding them, got "
        f"{type(target).__name__} {target!r}"
    )


def schedules_of_value(value: object) -> list[Schedule]:
    """A module attribute's schedules: a Schedule or a scheduled function's; else none."""
    if isinstance(value, Schedule):
        return [value]
    found = getattr(value, SCHEDULES_ATTR, None) if callable(value) else None
    return list(found) if isinstance(found, list) else []


def next_tick_of(cron: str, tz: str, after: datetime) -> datetime | None:
    """The first tick of ``cron`` read in ``tz`` after ``after``, for readers (``lil
    schedules``); None when it cannot be told (no cronsim, a zone or expression this
    installation cannot read)."""
    try:
        from zoneinfo import ZoneInfo

        return next(_cronsim().CronSim(cron, after.astimezone(ZoneInfo(tz))))  # type: ignore[no-any-return]
    except Exception:  # a reader says "unknown" rather than fail
        return None

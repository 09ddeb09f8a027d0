"""What ``lil schedules`` prints: each schedule, its last and next tick, the runs it started."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from ..scheduling.schedules import next_tick_of, tick_time
from ..stores.storage_schedules import ScheduleRow, TickRow


def schedule_records(
    schedules: list[ScheduleRow], ticks: list[TickRow], now: float, limit: int | None
) -> list[dict[str, Any]]:
    """One record per schedule: its definition, its last tick claimed, its next tick after
    ``now`` (or after its cursor, if later), and its ticks newest first (``limit`` of them;
    None: all)."""
    out = []
    for name, goal, cron, tz, catch_up, window, overlap, cursor, updated in schedules:
        own = [t for t in ticks if t[0] == name]
        after = max(datetime.fromtimestamp(now, timezone.utc), tick_time(cursor))
        nxt = next_tick_of(cron, tz, after)
        out.append(
            {
                "schedule": name,
                "goal": goal,
                "cron": cron,
                "tz": tz,
                "catch_up": catch_up,
                "window_s": window,
                "overlap": overlap,
                "last_tick": own[0][1] if own else None,
                "next_tick": None if nxt is None else nxt.astimezone(timezone.utc).isoformat(),
                "updated_at": updated,
                "ticks": [
                    {
                        "tick": t[1],
                        "run": t[2],
                        "status": t[3],
                        "claimed_at": t[4],
                        "claimed_by": t[5],
                        "finished_at": t[6],
                    }
                    for t in (own if limit is None else own[:limit])
                ],
            }
        )
    return out


def schedule_lines(records: list[dict[str, Any]]) -> list[str]:
    """``lil schedules``: a paragraph per schedule."""
    if not records:
        return ["no schedules in this journal (start one with 'lil schedules run MODULE')"]
    out = []
    for r in records:
        policy = f"catch_up={r['catch_up']}"
        if r["window_s"] is not None:
            policy += f" window={r['window_s']:g}s"
        out.append(
            f"{r['schedule']}  goal {r['goal']}  '{r['cron']}' {r['tz']}  {policy} "
            f"overlap={r['overlap']}"
        )
        out.append(f"  last tick {r['last_tick'] or '-'}  next tick {r['next_tick'] or 'unknown'}")
        for t in r["ticks"]:
            out.append(f"  {t['tick']}  {t['status']:<9}  {t['run']}")
    return out

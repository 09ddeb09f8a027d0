-- letitloop schema, version 20: schedules that fire exactly once per tick (issue 54).
--
-- A schedule (`@schedule("*/15 * * * *")`, letitloop/schedules.py) has one row in
-- `schedules`: its definition as the last scheduler to start saw it, and its cursor,
-- the latest tick decided (started, queued or let go by the catch-up policy).
-- Every tick that starts a run (or is skipped or queued by the overlap policy) has
-- one row in `schedule_ticks`, inserted by the one scheduler that claimed it: the
-- primary key makes the claim atomic, so any number of schedulers on one file start
-- each tick's run once. The run is the goal's run named `run_name`
-- (`<schedule>@<tick>`): a tick whose run was killed is resumed under that name.
-- Times are ISO-8601 UTC text, so that text order is time order.

CREATE TABLE schedules (
    name        TEXT PRIMARY KEY,          -- the schedule's name (its goal's, by default)
    goal        TEXT NOT NULL,             -- the goal whose runs it starts
    cron        TEXT NOT NULL,             -- the cron expression, as given
    tz          TEXT NOT NULL,             -- the IANA time zone the expression is read in
    catch_up    TEXT NOT NULL CHECK (catch_up IN ('skip', 'latest', 'all')),
    window_s    REAL,                      -- catch_up='all': how far back, in seconds
    overlap     TEXT NOT NULL CHECK (overlap IN ('skip', 'queue', 'allow')),
    cursor      TEXT NOT NULL,             -- every tick at or before it was decided
    updated_at  TEXT NOT NULL              -- when a scheduler last recorded the definition
);

CREATE TABLE schedule_ticks (
    schedule    TEXT NOT NULL,             -- schedules.name
    tick        TEXT NOT NULL,             -- the tick's time
    run_name    TEXT NOT NULL,             -- the run it starts: runs.name of the goal
    status      TEXT NOT NULL CHECK (status IN ('started', 'queued', 'skipped', 'completed', 'failed')),
    claimed_at  TEXT NOT NULL,             -- when a scheduler claimed it (the real time)
    claimed_by  TEXT NOT NULL,             -- 'host:pid' of that scheduler
    finished_at TEXT,                      -- when its run completed or failed
    PRIMARY KEY (schedule, tick)
);

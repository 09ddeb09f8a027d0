-- Schedules and their ticks on PostgreSQL (issue 54), as SQLite's 0020_schedules: one
-- row per schedule (its definition and cursor, the latest tick decided) and one per
-- tick claimed, inserted by the one scheduler that claimed it (the primary key makes
-- the claim atomic across every host on the database). Times are ISO-8601 UTC text, as
-- SQLite's, so that a tick's text is its identity on both stores.
CREATE TABLE ll_schedules (
    name        text PRIMARY KEY,
    goal        text NOT NULL,
    cron        text NOT NULL,
    tz          text NOT NULL,
    catch_up    text NOT NULL CHECK (catch_up IN ('skip', 'latest', 'all')),
    window_s    double precision,
    overlap     text NOT NULL CHECK (overlap IN ('skip', 'queue', 'allow')),
    cursor      text NOT NULL,
    updated_at  text NOT NULL
);
CREATE TABLE ll_schedule_ticks (
    schedule    text NOT NULL,
    tick        text NOT NULL,
    run_name    text NOT NULL,
    status      text NOT NULL
        CHECK (status IN ('started', 'queued', 'skipped', 'completed', 'failed')),
    claimed_at  text NOT NULL,
    claimed_by  text NOT NULL,
    finished_at text,
    PRIMARY KEY (schedule, tick)
);

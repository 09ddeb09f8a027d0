-- lil watch on a PostgreSQL journal (issue 34): the supervisor's records, as a journal
-- file's supervisor_events (SQLite's 0001), and the watcher of each attempt (the
-- LETITLOOP_WATCH_ID and LETITLOOP_ATTEMPT of the lil watch that started its process),
-- which tell a watcher that its child's run was cancelled or waits for outside input.
ALTER TABLE ll_attempts ADD COLUMN IF NOT EXISTS watch_id text;
ALTER TABLE ll_attempts ADD COLUMN IF NOT EXISTS watch_attempt integer;
CREATE TABLE IF NOT EXISTS ll_supervisor_events (
    id bigserial PRIMARY KEY,
    watch_id text NOT NULL,             -- one watcher session
    at timestamptz NOT NULL,
    event text NOT NULL,                -- start | exit | restart | give_up | stop
    target text NOT NULL,               -- the script or -m module as given
    attempt integer NOT NULL,           -- 1 for the first start
    watcher_pid integer NOT NULL,
    host text NOT NULL,
    child_pid integer,
    exit_code integer,                  -- the child's status, 128+N for signal N
    signal text,                        -- 'SIGKILL' for a signal death
    uptime_s double precision,
    delay_s double precision,           -- the backoff before the next start
    message text                        -- the one line printed on stderr
);
CREATE INDEX IF NOT EXISTS ll_supervisor_events_watch ON ll_supervisor_events (watch_id, id);

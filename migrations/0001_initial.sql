-- letitloop schema, version 1.
--
-- Statements that mention {journal} are applied to the journal template
-- table and to every goal's journal table listed in `goals`: that is how a
-- later migration reaches every goal's table. A goal's table is created as a
-- copy of `_journal_template` (table and indexes).
--
-- Timestamps are ISO-8601 UTC text; results are JSON text.

CREATE TABLE goals (
    goal          TEXT PRIMARY KEY,          -- the goal name exactly as given
    journal_table TEXT NOT NULL UNIQUE,      -- the table holding its steps and markers
    created_at    TEXT NOT NULL
);

CREATE TABLE runs (
    id          TEXT PRIMARY KEY,            -- sortable id (ULID), unique in the file
    goal        TEXT NOT NULL REFERENCES goals(goal),
    name        TEXT,                        -- the explicit run key, NULL for an unnamed run
    status      TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
    attempts    INTEGER NOT NULL DEFAULT 0,  -- how many times a process opened this run
    holder_pid  INTEGER,                     -- the process holding (or last holding) it
    holder_host TEXT,
    started_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    finished_at TEXT,
    result      TEXT,                        -- the @durable function's return value as JSON
    error       TEXT                         -- 'Type: message' of the exception that failed it
);
CREATE UNIQUE INDEX runs_goal_name ON runs (goal, name) WHERE name IS NOT NULL;
CREATE INDEX runs_goal_status ON runs (goal, status, id);

-- One row per process attempt of a run.
CREATE TABLE attempts (
    run        TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    attempt    INTEGER NOT NULL,
    pid        INTEGER NOT NULL,
    host       TEXT NOT NULL,
    watch_id   TEXT,                         -- the `lil watch` session that started it, if any
    started_at TEXT NOT NULL,
    PRIMARY KEY (run, attempt)
);

-- The journal table of one goal: its steps and markers, one row each.
CREATE TABLE "{journal}" (
    run         TEXT NOT NULL,
    key         TEXT NOT NULL,               -- 'fetch_user', 'fetch_user#2', a marker name
    kind        TEXT NOT NULL CHECK (kind IN ('step', 'marker')),
    status      TEXT NOT NULL,               -- step: done|failed; marker: pending|done
    fn          TEXT,                        -- module.qualname of the step's function
    result      TEXT,                        -- JSON
    started_at  TEXT,
    finished_at TEXT,
    duration_ms REAL,
    attempt     INTEGER NOT NULL,            -- the run attempt that wrote the row
    error       TEXT,                        -- 'Type: message' of a failed step
    traceback   TEXT,
    PRIMARY KEY (run, key)
);

-- What `lil watch` and @supervise did: one row per start, exit and decision.
CREATE TABLE supervisor_events (
    id          INTEGER PRIMARY KEY,
    watch_id    TEXT NOT NULL,               -- one watcher session
    at          TEXT NOT NULL,
    event       TEXT NOT NULL,               -- start | exit | restart | give_up | stop
    target      TEXT NOT NULL,               -- the script or -m module as given
    attempt     INTEGER NOT NULL,            -- 1 for the first start
    watcher_pid INTEGER NOT NULL,
    host        TEXT NOT NULL,
    child_pid   INTEGER,
    exit_code   INTEGER,                     -- the child's status, 128+N for signal N
    signal      TEXT,                        -- 'SIGKILL' for a signal death
    uptime_s    REAL,
    delay_s     REAL,                        -- the backoff before the next start
    message     TEXT                         -- the one line printed on stderr
);
CREATE INDEX supervisor_events_watch ON supervisor_events (watch_id, id);

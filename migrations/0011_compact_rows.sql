-- letitloop schema, version 11: the compact row.
--
-- A goal's steps and markers move to a compact table, `_journal_<goal>`, a copy
-- of the new `_journal_template` below; `journal_<goal>` becomes a view with the
-- columns the table had (run ids, ISO-8601 times, function names, results as
-- JSON text), so a person, `lil` and every SQL example read the file as before.
-- The view takes writes too (INSTEAD OF triggers write the compact row); the
-- step path writes the compact table itself (letitloop/goals.py makes both).
--
-- What a compact row holds instead of text repeated in every row:
-- * run: the run's `runs.num`, an integer made once per run (0 for a goal-scoped
--   marker, shown as '*'): the 26-character run id was in every row and again in
--   the primary key's index;
-- * started: microseconds since the epoch; duration: microseconds (the view's
--   finished_at is started + duration, except for a step still 'running', whose
--   duration is how long it had run): two 32-character timestamps before;
-- * fn: the id of the function's qualified name in `functions` (or, for a step
--   whose process could not add a new name without waiting for the write lock,
--   the name itself as text; the view shows either as the name).
-- Results stay JSON text (json_extract works on the view and on the table).
--
-- This file is the migration's first transaction. The runner
-- (letitloop/migrate.py, compact_rows) then moves each goal's rows in a
-- transaction of its own, under a record no older letitloop knows (so an
-- older one refuses the file, untouched, from the first transaction on), and
-- writes this migration's own record with the last goal: a process killed at
-- any point leaves a file the next open finishes. Rows whose run no longer
-- exists (no `runs` row; no reader could reach them) are not carried over.
--
-- (Column comments are kept above each ALTER: SQLite copies the text of an
-- added column into the table's CREATE statement.)

-- the run's number in this file: what its step and marker rows carry as `run`
ALTER TABLE runs ADD COLUMN num INTEGER;
UPDATE runs SET num = rowid;
CREATE UNIQUE INDEX runs_num ON runs (num);
-- A new run takes the next number, whoever inserts it (an opener, `lil fork`).
CREATE TRIGGER runs_num AFTER INSERT ON runs WHEN NEW.num IS NULL BEGIN
    UPDATE runs SET num = (SELECT coalesce(max(num), 0) + 1 FROM runs) WHERE rowid = NEW.rowid;
END;

-- Every step function's qualified name (module.qualname), once per file.
CREATE TABLE functions (
    id   INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);

DROP TABLE _journal_template;

-- The journal table of one goal: its steps, markers, sleeps and waits, one row each.
CREATE TABLE _journal_template (
    run           INTEGER NOT NULL,          -- runs.num; 0: a goal-scoped marker ('*')
    key           TEXT NOT NULL,             -- 'fetch_user', 'fetch_user#2', a marker name
    kind          TEXT NOT NULL CHECK (kind = 'step' OR kind = 'marker' OR kind = 'sleep' OR kind = 'wait'),
    status        TEXT NOT NULL,             -- step: done|failed|running|retrying; marker: pending|done|failed
    fn            INTEGER,                   -- functions.id of the step's function (or its name)
    result        TEXT,                      -- JSON
    started       INTEGER,                   -- microseconds since the epoch
    duration      INTEGER,                   -- microseconds (a 'running' step: so far)
    attempt       INTEGER NOT NULL,          -- the run attempt that wrote the row
    error         TEXT,                      -- 'Type: message' of a failed step
    traceback     TEXT,
    claims        INTEGER,                   -- marker: how many times it was offered
    crashes       INTEGER,                   -- marker: how many holders died inside the block
    holder_pid    INTEGER,                   -- marker: the process holding (or last holding) it
    holder_host   TEXT,
    holder_run    TEXT,                      -- marker: the run id holding (or last holding) it
    holder_token  TEXT,                      -- marker: its holder's random claim token
    args_fp       TEXT,                      -- step: one digest per argument (see 0005)
    input_tokens  INTEGER,                   -- usage the step's function reported
    output_tokens INTEGER,
    cost          REAL,
    model         TEXT,
    wake_at       TEXT,                      -- sleep: when it wakes; wait: its deadline; retrying: next try
    PRIMARY KEY (run, key)
);

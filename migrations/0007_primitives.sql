-- letitloop schema, version 7: retries, durable sleeps, waits for outside input,
-- cancellation, and what each step consumed (tokens and money).
--
-- Every primitive is a row (docs/primitives.md):
--
-- * A sleep (`j.sleep`) and a wait for outside input (`j.wait_for`) are rows of
--   the goal's journal table, keyed and numbered like steps (`nap`, `nap#2`),
--   with kind 'sleep' or 'wait'. A sleep is written 'sleeping' with its wake-up
--   time (`wake_at`) when it starts and 'done' when it wakes; a wait is written
--   'waiting' (with its deadline in `wake_at`, if it has a timeout) and becomes
--   'done' when a value is sent to it (`lil send`, `letitloop.send`): the value
--   is its `result`, like a step's; a wait that timed out is 'done' with its
--   `error` ('WaitTimeoutError: …'), so a replay raises it again.
-- * A step with a retry policy that failed a try and waits for the next one has
--   status 'retrying', the try's error, and `wake_at` = when the next try is due.
--   Every failed try is also a row of `step_tries` below.
-- * Usage (`letitloop.usage(...)` inside a step's function) is four plain
--   columns of the step's row: `SELECT sum(cost) FROM journal_<goal>` in any
--   SQLite browser totals a goal.
-- * A cancel is asked for in `runs.cancel_requested_at`; a run that ended
--   cancelled has status 'cancelled'. A run that stopped while waiting for
--   outside input (`wait_for(..., stop_after=...)`) has status 'waiting'.
--
-- (Column comments are kept above each ALTER: SQLite copies the text of an
-- added column into the table's CREATE statement.)

-- input tokens the step's function reported (cache reads and writes included)
ALTER TABLE "{journal}" ADD COLUMN input_tokens INTEGER;
-- output tokens the step's function reported
ALTER TABLE "{journal}" ADD COLUMN output_tokens INTEGER;
-- money the step's function reported spending, in the user's currency (letitloop keeps no prices)
ALTER TABLE "{journal}" ADD COLUMN cost REAL;
-- the model (or models, comma-separated) the step's function reported using
ALTER TABLE "{journal}" ADD COLUMN model TEXT;
-- sleep: when it wakes; wait: its deadline; step between two tries: when the next try is due
ALTER TABLE "{journal}" ADD COLUMN wake_at TEXT;

-- when `lil cancel` or letitloop.cancel() asked for the run to stop (its holder stops at
-- its next step, marker or wait; status becomes 'cancelled')
ALTER TABLE runs ADD COLUMN cancel_requested_at TEXT;
-- who asked, and why: 'lil cancel (pid 4242 on host): <reason>'
ALTER TABLE runs ADD COLUMN cancel_reason TEXT;

-- Every failed try of a step that has a retry policy, in the order they were made.
-- Its key never depends on timing: the step's run and key, and the try's number.
CREATE TABLE step_tries (
    run           TEXT NOT NULL,             -- runs.id
    key           TEXT NOT NULL,             -- the step's key in its goal's journal table
    try           INTEGER NOT NULL,          -- 1, 2, … over the step's whole life in the run
    attempt       INTEGER NOT NULL,          -- the run attempt (process) that made the try
    started_at    TEXT NOT NULL,
    failed_at     TEXT NOT NULL,
    error         TEXT NOT NULL,             -- 'Type: message'
    next_at       TEXT,                      -- when the next try is due; NULL: none (gave up)
    input_tokens  INTEGER,                   -- usage the failed try reported, if any
    output_tokens INTEGER,
    cost          REAL,
    model         TEXT,
    PRIMARY KEY (run, key, try)
);

-- Two new run statuses and two new row kinds. SQLite cannot ALTER a CHECK, and
-- recreating `runs` (the 12-step procedure) would cascade-delete every
-- `attempts` row (ON DELETE CASCADE, with foreign_keys=ON inside this
-- transaction). A constraint that only gets looser is changed in place instead,
-- with the procedure SQLite documents for that case (lang_altertable.html,
-- "the simpler procedure ... for removing CHECK ... constraints"): edit the
-- table's CREATE text in sqlite_master under writable_schema. Every row
-- already stored satisfies the looser constraint, so nothing is rewritten.
-- The migration runner (letitloop/migrate.py) does what SQL cannot say here:
-- it raises `PRAGMA schema_version` by one, so that every connection (this
-- one too) reloads the schema, and checks that each edited table still parses.
-- It runs after the ALTERs above: ADD COLUMN edits the same text by offset.
PRAGMA writable_schema = ON;
UPDATE sqlite_master
SET sql = replace(sql,
    'CHECK (status IN (''running'', ''completed'', ''failed''))',
    'CHECK (status IN (''running'', ''completed'', ''failed'', ''waiting'', ''cancelled''))')
WHERE type = 'table' AND name = 'runs';
-- The kinds are spelled as ORs, not as an IN list: SQLite evaluates an IN list of
-- more than two values through a temporary b-tree built at every execution of
-- the statement, which cost every step's INSERT about 3 µs (measured; the ORs
-- cost nothing measurable).
UPDATE sqlite_master
SET sql = replace(sql,
    'CHECK (kind IN (''step'', ''marker''))',
    'CHECK (kind = ''step'' OR kind = ''marker'' OR kind = ''sleep'' OR kind = ''wait'')')
WHERE type = 'table' AND name = '{journal}';
PRAGMA writable_schema = OFF;

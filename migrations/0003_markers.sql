-- letitloop schema, version 3: markers (atomic_marker).
--
-- A run-scoped marker is a row of its goal's journal table with kind
-- 'marker', run = the run id and key = the marker name. A goal-scoped marker
-- is a row of the same table with run = '*' (shared by every run of the
-- goal). A global marker is a row of the `markers` table below.
--
-- Marker status: 'pending' while a holder is inside the block (or after its
-- process died there), 'done' once the block exited cleanly, 'failed' when
-- the block raised (with error and traceback). The holder columns identify
-- who holds, or last held, the marker; a holder commits 'done' only if the
-- row still carries its own holder_token (compare-and-set).
--
-- (Column comments are kept above each ALTER: SQLite copies the text of an
-- added column into the table's CREATE statement, and a trailing comment
-- there would swallow the closing parenthesis.)

-- marker: how many times it was offered (entered with True); its attempt number
ALTER TABLE "{journal}" ADD COLUMN claims INTEGER;
-- marker: how many of those holders died inside the block
ALTER TABLE "{journal}" ADD COLUMN crashes INTEGER;
-- marker: the process holding (or last holding) it
ALTER TABLE "{journal}" ADD COLUMN holder_pid INTEGER;
ALTER TABLE "{journal}" ADD COLUMN holder_host TEXT;
-- marker: the run holding (or last holding) it; for run = '*' this says which run
ALTER TABLE "{journal}" ADD COLUMN holder_run TEXT;
-- marker: the random claim token of that holder, checked when it commits
ALTER TABLE "{journal}" ADD COLUMN holder_token TEXT;

-- Global markers (scope='global'): one row per name, shared by every goal.
CREATE TABLE markers (
    key          TEXT PRIMARY KEY,           -- the marker name, also its idempotency key
    status       TEXT NOT NULL CHECK (status IN ('pending', 'done', 'failed')),
    started_at   TEXT,                       -- when the current/last holder entered
    finished_at  TEXT,
    duration_ms  REAL,
    claims       INTEGER NOT NULL,           -- how many times it was offered
    crashes      INTEGER NOT NULL DEFAULT 0, -- how many holders died inside the block
    holder_goal  TEXT,                       -- the goal of the run holding (or last holding) it
    holder_run   TEXT,                       -- that run's id
    holder_pid   INTEGER,
    holder_host  TEXT,
    holder_token TEXT,                       -- the holder's random claim token
    attempt      INTEGER,                    -- the holder run's attempt
    error        TEXT,                       -- 'Type: message' when the block raised
    traceback    TEXT
);

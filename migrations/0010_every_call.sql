-- letitloop schema, version 10: every paid call counted once.
--
-- * `step_tries` now holds every call of a step that did not give the step its
--   recorded result: each failed try of a retry policy (as before), each call
--   that raised without one, and each call cut short by the death of its
--   process that had reported usage (`ended` = 'crashed'). With the step's own
--   row (the call that gave its result, or the last that failed), a sum over
--   the journal table plus `step_tries` counts every paid call once.
-- * `step_replays`: which steps each attempt got back from the journal instead
--   of calling them again ("saved by replay" counts these rows only).

-- how the try ended: 'failed' (its function raised) or 'crashed' (the process died
-- during it; kept for the usage it had reported, and not counted as a failed try)
ALTER TABLE step_tries ADD COLUMN ended TEXT NOT NULL DEFAULT 'failed';

-- Each time steps' results were got back from the journal: a row per batch of
-- replays, written when the journal next runs a step of its own, and when it
-- closes (one killed while only replaying leaves none). `keys` is a JSON list of
-- the replayed steps' keys, one entry per replay (`json_each(keys)` reads it).
-- A completed named run opened again replays under its last attempt's number.
CREATE TABLE step_replays (
    run     TEXT NOT NULL,                   -- runs.id
    attempt INTEGER NOT NULL,                -- the attempt that got the results back
    keys    TEXT NOT NULL                    -- JSON list of the steps' keys
);

CREATE INDEX step_replays_run ON step_replays (run);

-- letitloop schema, version 19: how each attempt ended, and every failed try kept.
--
-- An attempt that closed the run records how, as it was known then: `outcome`
-- (completed, failed, waiting, cancelled), its `error` ('Type: message', as the
-- run's own, which a later attempt overwrites) and when (`ended_at`). An attempt
-- that did not close it (a SIGKILL, a power loss) leaves them NULL: `lil show`
-- tells its ending from what it left, as before. Attempts before 0019: NULL.
ALTER TABLE attempts ADD COLUMN ended_at TEXT;
ALTER TABLE attempts ADD COLUMN outcome TEXT;
ALTER TABLE attempts ADD COLUMN error TEXT;

-- A failed try's traceback. A step that raised is a try (with or without a retry
-- policy), whose error and traceback stay when a later attempt runs the step again
-- and its row says `done`. Tries before 0019: NULL.
ALTER TABLE step_tries ADD COLUMN traceback TEXT;

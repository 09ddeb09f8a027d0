-- How each attempt ended and every failed try kept, as SQLite's 0019_attempt_endings:
-- an attempt that closed the run records its outcome (completed, failed, waiting,
-- cancelled), its error and when; one that did not (a SIGKILL) leaves them NULL. A
-- failed try keeps its traceback.
ALTER TABLE ll_attempts ADD COLUMN ended_at timestamptz, ADD COLUMN outcome text, ADD COLUMN error text;
ALTER TABLE ll_tries ADD COLUMN traceback text;

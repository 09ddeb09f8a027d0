-- letitloop schema, version 5: what a run was called with, what each step was called with.
--
-- A run records its input: the arguments of its @durable call (by parameter
-- name), or Journal(goal, input=...), as codec JSON text, and a fingerprint
-- of it. An unnamed opener resumes only an unfinished run whose input has the
-- same fingerprint (NULL: opened without an input). A step row records the
-- fingerprint of its call's arguments: one short digest per argument, so a
-- replay hands a recorded result only to the same call and a mismatch can
-- name the argument that differs (letitloop/fingerprint.py). Rows written
-- before this version have NULL there and are matched by position alone.
--
-- (Column comments are kept above each ALTER: SQLite copies the text of an
-- added column into the table's CREATE statement.)

-- the run's input as JSON text (codec); an argument the codec cannot encode is its type name
ALTER TABLE runs ADD COLUMN input TEXT;
-- 32 hex characters: the digest of the input, compared by unnamed openers
ALTER TABLE runs ADD COLUMN input_fp TEXT;
CREATE INDEX runs_resume ON runs (goal, input_fp, id) WHERE name IS NULL;

-- the supervisor's attempt number (LETITLOOP_ATTEMPT) when `lil watch` started this attempt
ALTER TABLE attempts ADD COLUMN watch_attempt INTEGER;

-- step: one digest per argument, "a1b2c3d4e5f6 user_id=0a1b2c3d4e5f" ('~' for unchecked)
ALTER TABLE "{journal}" ADD COLUMN args_fp TEXT;

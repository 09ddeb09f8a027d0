-- letitloop schema, version 8: find a run by its name alone.
--
-- `lil show user-7`, `lil reset user-7` and `letitloop.send("user-7", …)` look a
-- run up by its name without its goal; the unique index on (goal, name)
-- cannot answer that, so SQLite read every run.

CREATE INDEX runs_name ON runs (name) WHERE name IS NOT NULL;

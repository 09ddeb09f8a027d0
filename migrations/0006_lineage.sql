-- letitloop schema, version 6: where a forked run came from.
--
-- `lil fork RUN --from-step KEY` starts a new run that keeps the source's
-- results before KEY; the new run records its source and the step it was
-- forked from, so `lil show` can say "forked from RUN at step KEY".

-- the run this one was forked from (`lil fork`), NULL for a run started by an opener
ALTER TABLE runs ADD COLUMN forked_from TEXT;
-- the step key the fork re-executes from
ALTER TABLE runs ADD COLUMN forked_at TEXT;

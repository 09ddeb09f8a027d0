-- letitloop schema, version 23: a queue's child runs linked to their parent, and the
-- indexes the listings need (issue 52).
--
-- `parent_run` is the id of the run that enqueued the entry (a child run, whose result
-- the parent awaits as a step): `lil gc` keeps a child while its parent has not ended,
-- and a child's end makes its suspended parent due at once. NULL for an entry enqueued
-- outside a run, and for the entries of files made before this version (gc then reads
-- the parent from the child's run name, `<parent run id>:<step key>`).
ALTER TABLE queue_entries ADD COLUMN parent_run TEXT;
-- `lil runs` tags each run of a page with its entry; a child's end finds its parent.
CREATE INDEX queue_entries_run ON queue_entries (run_id) WHERE run_id IS NOT NULL;
CREATE INDEX queue_entries_parent ON queue_entries (parent_run) WHERE parent_run IS NOT NULL;

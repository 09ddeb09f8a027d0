-- A queue's child runs linked to their parent, and the listings' indexes (issue 52), as
-- SQLite's 0023_queue_links: `parent_run` is the run that enqueued the entry (NULL
-- outside a run, and for entries made before this version).
ALTER TABLE ll_queue_entries ADD COLUMN IF NOT EXISTS parent_run text;
CREATE INDEX IF NOT EXISTS ll_queue_entries_run ON ll_queue_entries (run_id)
    WHERE run_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS ll_queue_entries_parent ON ll_queue_entries (parent_run)
    WHERE parent_run IS NOT NULL;

-- Rows as a reader expects them (issue 34, 35): times as timestamptz, each step and
-- marker row with its checksum (checksums.py: a CRC-32 of what a replay depends on, as in
-- SQLite's 0012), and a record of each migration applied.
CREATE TABLE ll_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    applied_by integer NOT NULL DEFAULT pg_backend_pid()
);
-- Rows written before this migration hold NULL: they replay unchecked.
ALTER TABLE ll_journal ADD COLUMN checksum bigint;
ALTER TABLE ll_journal
    ALTER COLUMN started_at TYPE timestamptz USING started_at::timestamptz,
    ALTER COLUMN finished_at TYPE timestamptz USING finished_at::timestamptz,
    ALTER COLUMN wake_at TYPE timestamptz USING wake_at::timestamptz;
ALTER TABLE ll_runs
    ALTER COLUMN started_at TYPE timestamptz USING started_at::timestamptz,
    ALTER COLUMN updated_at TYPE timestamptz USING updated_at::timestamptz,
    ALTER COLUMN finished_at TYPE timestamptz USING finished_at::timestamptz,
    ALTER COLUMN cancel_requested_at TYPE timestamptz USING cancel_requested_at::timestamptz;
-- (ll_runs.forked_at stays text: it names the step a fork was made from.)
ALTER TABLE ll_tries
    ALTER COLUMN started_at TYPE timestamptz USING started_at::timestamptz,
    ALTER COLUMN failed_at TYPE timestamptz USING failed_at::timestamptz,
    ALTER COLUMN next_at TYPE timestamptz USING next_at::timestamptz;
ALTER TABLE ll_attempts
    ALTER COLUMN started_at TYPE timestamptz USING started_at::timestamptz;

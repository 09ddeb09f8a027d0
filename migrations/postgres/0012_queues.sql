-- Work queues (issue 52), as SQLite's 0021_queues: a queue's entries and the claims
-- a rate limit counts. A claimed entry is held by a session advisory lock of its
-- worker (postgres_queue.py), and by a lease its worker renews (`lease_until`): an
-- entry whose lease ran out is taken over even while its holder's sessions live (a
-- host that vanished), and those sessions are ended. `attempt` fences the holder's
-- writes.
CREATE TABLE IF NOT EXISTS ll_queue_entries (
    id text PRIMARY KEY,
    queue text NOT NULL,
    task text NOT NULL,
    run_name text NOT NULL,
    run_id text,
    args text NOT NULL,
    priority integer NOT NULL DEFAULT 0,
    dedup_key text,
    status text NOT NULL CHECK (status IN ('queued', 'claimed', 'completed', 'failed', 'cancelled')),
    not_before text NOT NULL,
    attempt integer NOT NULL DEFAULT 0,
    holder_pid integer,
    holder_host text,
    lease_until text,
    enqueued_at text NOT NULL,
    claimed_at text,
    finished_at text,
    result text,
    error text,
    cancel_requested_at text
);
CREATE INDEX IF NOT EXISTS ll_queue_entries_ready
    ON ll_queue_entries (queue, status, priority DESC, not_before, id);
CREATE UNIQUE INDEX IF NOT EXISTS ll_queue_entries_dedup ON ll_queue_entries (queue, dedup_key)
    WHERE dedup_key IS NOT NULL AND status IN ('queued', 'claimed');
CREATE TABLE IF NOT EXISTS ll_queue_starts (queue text NOT NULL, at text NOT NULL, entry text NOT NULL);
CREATE INDEX IF NOT EXISTS ll_queue_starts_at ON ll_queue_starts (queue, at);

-- letitloop schema, version 21: work queues (issue 52).
--
-- `Queue("emails").enqueue(fn, ...)` adds an entry here; a worker claims it (one
-- `BEGIN IMMEDIATE` transaction: the queue's concurrency and rate limit counted,
-- the entry's lock file taken) and runs it as an ordinary run of the goal named
-- by `task`, named `run_name`, in this same file. A claimed entry is held by its
-- worker's lock file (`<journal>-locks/queue-<hash>.lock`): the kernel drops it
-- with the worker's process, and the next claim takes the entry over at once.
-- `attempt` counts the claims: every write a holder makes on its entry names the
-- attempt it claimed, so a holder that was taken over writes nothing.
CREATE TABLE queue_entries (
    id          TEXT PRIMARY KEY,      -- sortable id (ULID); the run's name unless run= was given
    queue       TEXT NOT NULL,         -- the queue's name
    task        TEXT NOT NULL,         -- the function's registered name: the run's goal
    run_name    TEXT NOT NULL,         -- the run's name (its idempotency key)
    run_id      TEXT,                  -- runs.id, once a worker started it
    args        TEXT NOT NULL,         -- the call's [args, kwargs], codec JSON
    priority    INTEGER NOT NULL DEFAULT 0,  -- higher is claimed first
    dedup_key   TEXT,                  -- at most one queued or claimed entry per key and queue
    status      TEXT NOT NULL CHECK (status IN ('queued', 'claimed', 'completed', 'failed', 'cancelled')),
    not_before  TEXT NOT NULL,         -- ISO-8601 UTC: no worker claims it earlier (delay=)
    attempt     INTEGER NOT NULL DEFAULT 0,  -- claims so far; fences the holder's writes
    holder_pid  INTEGER,               -- the worker process holding (or last holding) it
    holder_host TEXT,
    enqueued_at TEXT NOT NULL,
    claimed_at  TEXT,                  -- the last claim
    finished_at TEXT,
    result      TEXT,                  -- the run's result, codec JSON
    error       TEXT,                  -- 'Type: message' of a failed or cancelled run
    cancel_requested_at TEXT           -- Handle.cancel() of a claimed entry
);
CREATE INDEX queue_entries_ready ON queue_entries (queue, status, priority DESC, not_before, id);
CREATE UNIQUE INDEX queue_entries_dedup ON queue_entries (queue, dedup_key)
    WHERE dedup_key IS NOT NULL AND status IN ('queued', 'claimed');

-- Every claim of a queue with a rate limit, kept for the limit's window: a claim
-- is refused while the window ending now holds as many as the limit allows.
CREATE TABLE queue_starts (
    queue TEXT NOT NULL,
    at    TEXT NOT NULL,               -- ISO-8601 UTC of the claim
    entry TEXT NOT NULL                -- queue_entries.id
);
CREATE INDEX queue_starts_at ON queue_starts (queue, at);

-- The sealed chain on PostgreSQL (issue 35; letitloop/postgres_seals.py), as SQLite's
-- 0013_seals: with a seal key (LETITLOOP_SEAL_KEY, or Journal(..., seal=key); the key
-- never reaches the server), every row of a run that reaches a final state (a step done
-- or failed, a run's marker done or failed, a sleep or a wait done) adds one entry here,
-- in the same transaction as the row: its position in the run's chain, the row's key,
-- kind and status, a SHA-256 of the row's content and an HMAC-SHA256 of all that and the
-- previous entry's seal, computed by the writing process (letitloop/seals.py). Append-only:
-- a row written again adds a new entry. `lil verify` walks each run's chain
-- (docs/audit.md). A run deleted (lil reset, lil gc) takes its chain with it.
CREATE TABLE ll_seals (
    run    text NOT NULL REFERENCES ll_runs (id) ON DELETE CASCADE,  -- the run's id
    n      integer NOT NULL,  -- the entry's position in the run's chain: 1, 2, 3, ...
    key    text NOT NULL,     -- the row's key
    kind   text NOT NULL,     -- step, marker, sleep, wait
    status text NOT NULL,     -- the row's status when it was sealed
    digest text NOT NULL,     -- hex SHA-256 of the row's content (seals.row_digest)
    seal   text NOT NULL,     -- hex HMAC-SHA256 of this entry and the previous one's seal
    prev   text,              -- the previous entry's seal (NULL for the first)
    prev_n integer GENERATED ALWAYS AS (CASE WHEN n > 1 THEN n - 1 END) STORED,
    PRIMARY KEY (run, n),
    UNIQUE (run, n, seal),
    -- Each entry names the entry it follows: a writer whose kept head is stale (its
    -- position taken, or its previous seal not the stored one) is refused by the key
    -- or by this reference, and nothing of its statement is written (postgres_seals.py).
    FOREIGN KEY (run, prev_n, prev) REFERENCES ll_seals (run, n, seal)
);

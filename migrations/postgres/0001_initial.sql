-- The PostgreSQL journal's first schema (letitloop's postgres_storage.py, version 1).
-- Never edited once released: later changes are the following numbered files.
CREATE TABLE IF NOT EXISTS ll_meta (version integer NOT NULL);
CREATE TABLE IF NOT EXISTS ll_goals (goal text PRIMARY KEY);
CREATE TABLE IF NOT EXISTS ll_runs (
    num bigserial UNIQUE,
    id text PRIMARY KEY,
    goal text NOT NULL,
    name text,
    status text NOT NULL,
    attempts integer NOT NULL,
    holder_pid integer,
    holder_host text,
    started_at text,
    updated_at text,
    finished_at text,
    input text,
    input_fp text,
    result text,
    error text,
    cancel_requested_at text,
    cancel_reason text,
    forked_from text,
    forked_at text
);
CREATE INDEX IF NOT EXISTS ll_runs_goal ON ll_runs (goal, num);
CREATE TABLE IF NOT EXISTS ll_journal (
    rowid bigserial PRIMARY KEY,
    goal text NOT NULL,
    run text NOT NULL,
    key text NOT NULL,
    status text,
    kind text,
    fn text,
    result text,
    started_at text,
    finished_at text,
    duration_ms double precision,
    attempt integer,
    error text,
    traceback text,
    args_fp text,
    input_tokens bigint,
    output_tokens bigint,
    cost double precision,
    model text,
    wake_at text,
    claims integer,
    crashes integer,
    holder_pid integer,
    holder_host text,
    holder_run text,
    holder_token text,
    holder_goal text,
    UNIQUE (goal, run, key)
);
CREATE TABLE IF NOT EXISTS ll_tries (
    run text NOT NULL,
    key text NOT NULL,
    try integer NOT NULL,
    attempt integer,
    started_at text,
    failed_at text,
    error text,
    next_at text,
    ended text NOT NULL,
    input_tokens bigint,
    output_tokens bigint,
    cost double precision,
    model text,
    PRIMARY KEY (run, key, try)
);
CREATE TABLE IF NOT EXISTS ll_attempts (
    run text NOT NULL,
    attempt integer NOT NULL,
    pid integer,
    host text,
    started_at text,
    PRIMARY KEY (run, attempt)
);
CREATE TABLE IF NOT EXISTS ll_replays (run text NOT NULL, attempt integer, keys text[]);
CREATE TABLE IF NOT EXISTS ll_commits (pid integer PRIMARY KEY, n bigint NOT NULL);
CREATE OR REPLACE FUNCTION ll_count_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ll_commits AS c (pid, n) VALUES (pg_backend_pid(), 1)
    ON CONFLICT (pid) DO UPDATE SET n = c.n + 1;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS ll_runs_commit ON ll_runs;
CREATE TRIGGER ll_runs_commit AFTER INSERT OR UPDATE OR DELETE ON ll_runs
    FOR EACH STATEMENT EXECUTE FUNCTION ll_count_commit();
DROP TRIGGER IF EXISTS ll_journal_commit ON ll_journal;
CREATE TRIGGER ll_journal_commit AFTER INSERT OR UPDATE OR DELETE ON ll_journal
    FOR EACH STATEMENT EXECUTE FUNCTION ll_count_commit();

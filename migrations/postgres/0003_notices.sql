-- Change notices by LISTEN/NOTIFY (issue 34): a journal waiting for a value sent or a
-- cancel LISTENs on channel 'letitloop' and wakes on a notice whose payload is its schema.
-- Step rows no longer count a commit each (ll_commits, a second row written per step):
-- what a pause waits for is written by an inspector (lil send, lil cancel), which
-- notifies, or to ll_runs, whose statements notify.
DROP TRIGGER IF EXISTS ll_journal_commit ON ll_journal;
DROP TRIGGER IF EXISTS ll_runs_commit ON ll_runs;
DROP FUNCTION IF EXISTS ll_count_commit();
DROP TABLE IF EXISTS ll_commits;
CREATE FUNCTION ll_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('letitloop', current_schema());
    RETURN NULL;
END $$;
CREATE TRIGGER ll_runs_notify AFTER INSERT OR UPDATE OR DELETE ON ll_runs
    FOR EACH STATEMENT EXECUTE FUNCTION ll_notify();

-- Views for a person browsing the journal file with any SQLite browser.
-- They hold no data and letitloop itself never writes through them.

-- Every goal's steps and markers in one place: the goal, `seq` (the row's
-- rowid in its goal's table, i.e. journal order), then the journal columns.
-- A view cannot union a changing set of tables, so this definition (over
-- the always-empty template) is a placeholder that letitloop rebuilds over
-- every goal's table whenever a goal is added and after each upgrade
-- (letitloop.store.refresh_journal_rows). Past 200 goals (VIEW_MAX_GOALS) it
-- stays this empty placeholder: see docs/inspecting.md, "Limits".
CREATE VIEW journal_rows AS
SELECT NULL AS goal, rowid AS seq, * FROM _journal_template;

-- Every run with its step and marker counts and its duration in seconds
-- (to finished_at, or to the last activity for an unfinished run). The
-- status is as recorded: a 'running' run whose process died still says
-- 'running' here; `lil runs` tells crashed runs apart by their lock.
CREATE VIEW run_summary AS
SELECT
    r.id AS run,
    r.goal,
    r.name,
    r.status,
    r.attempts,
    coalesce(c.steps_done, 0) AS steps_done,
    coalesce(c.steps_failed, 0) AS steps_failed,
    coalesce(c.markers, 0) AS markers,
    r.started_at,
    r.finished_at,
    round((julianday(coalesce(r.finished_at, r.updated_at)) - julianday(r.started_at))
          * 86400.0, 3) AS duration_s,
    r.error
FROM runs AS r
LEFT JOIN (
    SELECT
        goal,
        run,
        sum(kind = 'step' AND status = 'done') AS steps_done,
        sum(kind = 'step' AND status = 'failed') AS steps_failed,
        sum(kind = 'marker') AS markers
    FROM journal_rows
    GROUP BY goal, run
) AS c ON c.goal = r.goal AND c.run = r.id;

-- Every step that failed (its last failure: a step that failed and then
-- succeeded on a later attempt is no longer here), newest first.
CREATE VIEW failed_steps AS
SELECT goal, run, key, attempt, finished_at, fn, error, traceback
FROM journal_rows
WHERE kind = 'step' AND status = 'failed'
ORDER BY finished_at DESC;

-- What the supervisor (`lil watch`) did around each run: the events of every
-- watcher session that started one of the run's attempts.
CREATE VIEW run_supervisor_events AS
SELECT DISTINCT a.run, e.*
FROM attempts AS a
JOIN supervisor_events AS e ON e.watch_id = a.watch_id;

-- letitloop schema, version 18: budgets that bound the bill (issue 48).
--
-- A paid call of a run with a budget reserves what it may cost before it starts
-- (`letitloop.reserve`, and every adapter's model call): one row here, committed
-- before the call. When the call reports its usage (`letitloop.usage`) the
-- reservation is settled: replaced by that usage, which is on the step's row (or
-- its `step_tries` row), and no longer counted itself. A reservation whose
-- process died during its call is never settled, and stays counted as spent on
-- every later attempt: the provider may have billed the call, and no one can
-- tell. So the run's spend is its rows' and tries' usage plus the reservations
-- with `settled_at IS NULL`:
--
--   SELECT sum(tokens) FROM reservations WHERE run = ? AND settled_at IS NULL

CREATE TABLE reservations (
    run            TEXT NOT NULL,     -- runs.id
    call           INTEGER NOT NULL,  -- 1, 2, … in the run, in the order reserved
    key            TEXT NOT NULL,     -- the step whose call reserved, in its goal's journal table
    attempt        INTEGER NOT NULL,  -- the run attempt (process) that made the call
    reserved_at    TEXT NOT NULL,     -- ISO-8601 UTC, committed before the call started
    tokens         INTEGER,           -- tokens reserved (NULL: the budget has no token limit)
    cost           REAL,              -- money reserved (NULL: the budget has no money limit)
    model          TEXT,              -- the call's model, if known
    settled_at     TEXT,              -- NULL: not settled (in flight, or cut short: counted)
    settled_tokens INTEGER,           -- the tokens its call reported (NULL: none reported)
    settled_cost   REAL,              -- the money its call reported (NULL: none reported)
    PRIMARY KEY (run, call)
);

-- Paid calls' reservations on PostgreSQL (issue 48), as SQLite's 0018_reservations: a
-- call of a run with a budget reserves what it may cost before it starts (one row,
-- committed before the call); its usage report settles it (`settled_at`). A reservation
-- whose process died during its call is never settled and stays counted as spent on every
-- later attempt, so the provider's bill stays within the budget.
CREATE TABLE ll_reservations (
    run            text NOT NULL,         -- ll_runs.id
    call           integer NOT NULL,      -- 1, 2, … in the run, in the order reserved
    key            text NOT NULL,         -- the step whose call reserved
    attempt        integer NOT NULL,      -- the run attempt that made the call
    reserved_at    timestamptz NOT NULL,  -- committed before the call started
    tokens         bigint,                -- tokens reserved (NULL: no token limit)
    cost           double precision,      -- money reserved (NULL: no money limit)
    model          text,
    settled_at     timestamptz,           -- NULL: not settled (in flight, or cut short)
    settled_tokens bigint,                -- the tokens its call reported
    settled_cost   double precision,      -- the money its call reported
    PRIMARY KEY (run, call)
);

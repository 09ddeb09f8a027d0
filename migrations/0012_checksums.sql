-- letitloop schema, version 12: row checksums.
--
-- SQLite keeps no checksum of a row's content, so a damaged journal file can
-- open and hand back another value. Each step row now carries a CRC-32 of what
-- its replay depends on (its run's id, key, kind, status, function name,
-- argument fingerprint, result and error; letitloop/checksums.py), written in
-- the same statement as the row and checked when it replays. Rows written
-- before this migration keep NULL and replay unchecked, as before.
--
-- The runner (letitloop/migrate.py) applies this to the template and to every
-- goal's compact table, then rebuilds each goal's readable view and its
-- triggers (they list their columns), which now show `checksum` too.

-- step: checksums.step_sum; marker: checksums.marker_sum; NULL before 0012, sleep, wait
ALTER TABLE "{journal}" ADD COLUMN checksum INTEGER;

-- A marker's row (in a goal's table above, and a global marker's here) carries
-- checksums.marker_sum of its run, name and status, checked when it is claimed.
-- global marker: checksums.marker_sum of ('', key, status); NULL before 0012
ALTER TABLE markers ADD COLUMN checksum INTEGER;

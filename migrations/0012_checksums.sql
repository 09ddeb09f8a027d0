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

-- step: checksums.step_sum of the row; NULL before 0012, and for other kinds
ALTER TABLE "{journal}" ADD COLUMN checksum INTEGER;

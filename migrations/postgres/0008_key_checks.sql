-- Each goal's encryption key check on PostgreSQL (issue 35), as SQLite's 0017_key_checks:
-- with an encryption key (LETITLOOP_ENCRYPTION_KEY, or Journal(..., encryption_key=key);
-- the key never reaches the server), the first journal that opens a goal with it records
-- here a check value of the key: an HKDF-SHA256 of the key under a fixed label
-- (encryption.Cipher.check), which tells one key from another and reveals neither the key
-- nor the AES key made from it. A journal that opens the goal with another key, or without
-- one, is refused then, before it writes anything (docs/audit.md); `lil send` encrypts a
-- value sent into the goal's runs, and refuses to send one without the key.
CREATE TABLE ll_key_checks (
    goal      text PRIMARY KEY,     -- the goal whose values are encrypted (ll_goals.goal)
    key_check text NOT NULL,        -- hex check value of the key they are encrypted with
    set_at    timestamptz NOT NULL  -- when it was recorded
);

-- letitloop schema, version 17: each goal's encryption key check.
--
-- With an encryption key (LETITLOOP_ENCRYPTION_KEY, or Journal(...,
-- encryption_key=key); the key is never stored in the file), the first journal
-- that opens a goal with it records here a check value of the key: an
-- HKDF-SHA256 of the key under a fixed label (encryption.Cipher.check), which
-- tells one key from another and reveals neither the key nor the AES key made
-- from it. A journal that opens the goal with another key, or without one, is
-- refused then, before it writes anything (docs/audit.md); `lil send` encrypts
-- a value sent into the goal's runs, and refuses to send one without the key.
-- `lil rekey` changes it with the values it re-encrypts, in one transaction.

CREATE TABLE key_checks (
    goal      TEXT PRIMARY KEY,   -- the goal whose values are encrypted (goals.goal)
    key_check TEXT NOT NULL,      -- hex check value of the key they are encrypted with
    set_at    TEXT NOT NULL       -- when it was recorded (ISO-8601 UTC)
);

-- Authenticated identities (operators' issue §1). The installation's identity
-- record is made once, by the bootstrap: the certificate authority whose client
-- certificates name principals (the subject's common name), and the first
-- administrator. Every act on principals after it needs an authorised principal and
-- is kept in the append-only identity journal.
CREATE TABLE installation_identity (
    singleton        INTEGER NOT NULL PRIMARY KEY CHECK (singleton = 1),
    ca_certificate   TEXT    NOT NULL,
    administrator    TEXT    NOT NULL REFERENCES principals (id),
    bootstrapped_ms  INTEGER NOT NULL
);

CREATE TABLE identity_journal (
    seq        INTEGER NOT NULL PRIMARY KEY,
    kind       TEXT    NOT NULL CHECK (kind IN ('bootstrap', 'registered', 'roles_changed', 'revoked')),
    at_ms      INTEGER NOT NULL,
    actor      TEXT    NOT NULL,
    actor_role TEXT    NOT NULL,
    principal  TEXT    NOT NULL,
    detail     TEXT    NOT NULL DEFAULT ''
);

CREATE TRIGGER installation_identity_no_update BEFORE UPDATE ON installation_identity
BEGIN
    SELECT RAISE(ABORT, 'table installation_identity is append-only');
END;
CREATE TRIGGER installation_identity_no_delete BEFORE DELETE ON installation_identity
BEGIN
    SELECT RAISE(ABORT, 'table installation_identity is append-only');
END;
CREATE TRIGGER identity_journal_no_update BEFORE UPDATE ON identity_journal
BEGIN
    SELECT RAISE(ABORT, 'table identity_journal is append-only');
END;
CREATE TRIGGER identity_journal_no_delete BEFORE DELETE ON identity_journal
BEGIN
    SELECT RAISE(ABORT, 'table identity_journal is append-only');
END;

-- A blanket approval's expiry (a standing grant is never open-ended). A grant made
-- before this version gets seven days from its grant.
ALTER TABLE blanket_approvals ADD COLUMN expires_ms INTEGER;
UPDATE blanket_approvals SET expires_ms = granted_ms + 604800000;

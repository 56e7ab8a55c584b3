-- Authenticated identities (operators' issue §1). The installation's identity
-- record is made once, by the bootstrap: the certificate authority whose client
-- certificates name principals (the subject's common name), and the first
-- administrator. Every act on principals after it needs an authorised principal and
-- is kept in the append-only identity journal.
CREATE TABLE installation_identity (
    singleton        INTEGER NOT NULL PRIMARY KEY CHECK (singleton = 1),
    ca_certificate   TEXT    NOT NULL,
    administrator    TEXT    NOT NULL REFERENCES principals (id),
    bootstrapped_ms  BIGINT  NOT NULL
);

CREATE TABLE identity_journal (
    seq        BIGINT NOT NULL PRIMARY KEY,
    kind       TEXT   NOT NULL CHECK (kind IN ('bootstrap', 'registered', 'roles_changed', 'revoked')),
    at_ms      BIGINT NOT NULL,
    actor      TEXT   NOT NULL,
    actor_role TEXT   NOT NULL,
    principal  TEXT   NOT NULL,
    detail     TEXT   NOT NULL DEFAULT ''
);

CREATE TRIGGER installation_identity_append_only BEFORE UPDATE OR DELETE ON installation_identity
    FOR EACH ROW EXECUTE FUNCTION refuse_journal_change();
CREATE TRIGGER identity_journal_append_only BEFORE UPDATE OR DELETE ON identity_journal
    FOR EACH ROW EXECUTE FUNCTION refuse_journal_change();

-- A blanket approval's expiry (a standing grant is never open-ended). A grant made
-- before this version gets seven days from its grant.
ALTER TABLE blanket_approvals ADD COLUMN expires_ms BIGINT;
UPDATE blanket_approvals SET expires_ms = granted_ms + 604800000;

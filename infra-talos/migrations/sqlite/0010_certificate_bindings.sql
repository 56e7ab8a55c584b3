-- Certificate bindings (issue 36, the trust root). Every client certificate the
-- installation accepts is bound here to its principal by its fingerprint (the
-- SHA-256 of its DER encoding, 64 lowercase hex digits), in the same act that
-- journals it (`certificate_bound` in the identity journal); a certificate signed by
-- the installation's authority but never bound is refused. Revoking an identity
-- ends its bindings (`ended_ms`).
--
-- UPGRADING FROM VERSION 9: certificates issued before this version are bound to
-- nothing, so none of them is accepted until bound. The first administrator binds
-- its own certificate on the database (`infra-talos --database ... --certificate
-- FILE --private-key KEY --as recovery-admin principal bind-certificate ID FILE`,
-- allowed while no certificate is bound at all), then binds the others' the same way
-- (docs/operations.md, "Bootstrap").
CREATE TABLE principal_certificates (
    fingerprint  TEXT    NOT NULL PRIMARY KEY CHECK (length(fingerprint) = 64),
    principal_id TEXT    NOT NULL REFERENCES principals (id),
    bound_ms     INTEGER NOT NULL,
    bound_by     TEXT    NOT NULL,
    ended_ms     INTEGER
);
CREATE INDEX principal_certificates_by_principal ON principal_certificates (principal_id);

-- The identity journal's kinds gain `certificate_bound`: SQLite cannot change a
-- CHECK constraint, so the table is rebuilt with every row, and its append-only
-- triggers made again.
CREATE TABLE identity_journal_rebuilt (
    seq        INTEGER NOT NULL PRIMARY KEY,
    kind       TEXT    NOT NULL CHECK (kind IN ('bootstrap', 'registered', 'roles_changed', 'revoked', 'certificate_bound')),
    at_ms      INTEGER NOT NULL,
    actor      TEXT    NOT NULL,
    actor_role TEXT    NOT NULL,
    principal  TEXT    NOT NULL,
    detail     TEXT    NOT NULL DEFAULT ''
);
INSERT INTO identity_journal_rebuilt (seq, kind, at_ms, actor, actor_role, principal, detail)
    SELECT seq, kind, at_ms, actor, actor_role, principal, detail FROM identity_journal;
DROP TABLE identity_journal;
ALTER TABLE identity_journal_rebuilt RENAME TO identity_journal;
CREATE TRIGGER identity_journal_no_update BEFORE UPDATE ON identity_journal
BEGIN
    SELECT RAISE(ABORT, 'table identity_journal is append-only');
END;
CREATE TRIGGER identity_journal_no_delete BEFORE DELETE ON identity_journal
BEGIN
    SELECT RAISE(ABORT, 'table identity_journal is append-only');
END;

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
    fingerprint  TEXT   NOT NULL PRIMARY KEY CHECK (length(fingerprint) = 64),
    principal_id TEXT   NOT NULL REFERENCES principals (id),
    bound_ms     BIGINT NOT NULL,
    bound_by     TEXT   NOT NULL,
    ended_ms     BIGINT
);
CREATE INDEX principal_certificates_by_principal ON principal_certificates (principal_id);

-- The identity journal's kinds gain `certificate_bound`.
ALTER TABLE identity_journal DROP CONSTRAINT identity_journal_kind_check;
ALTER TABLE identity_journal ADD CONSTRAINT identity_journal_kind_check
    CHECK (kind IN ('bootstrap', 'registered', 'roles_changed', 'revoked', 'certificate_bound'));

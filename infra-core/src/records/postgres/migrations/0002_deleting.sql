-- Ledger rows marked before their resource's delete was sent, until the delete is
-- confirmed.

ALTER TABLE infra_ledger_rows ADD COLUMN deleting BOOLEAN NOT NULL DEFAULT FALSE;

-- The installation's approval policy, chosen at its bootstrap. FALSE, the contract's
-- own reading (§2, choice §10.4): an approver may approve a plan it made, or whose
-- release it contributed to, and the approval is marked self-approval. TRUE: such an
-- approval is refused, so every plan is approved by a second person.
ALTER TABLE installation ADD COLUMN approvals_need_second_person BOOLEAN NOT NULL DEFAULT FALSE;

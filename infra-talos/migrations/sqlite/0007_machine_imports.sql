-- The configuration digest an existing-cluster import read from a machine (§6.3).
-- Inventory records it and nothing more: Applied is set only by an adoption record,
-- whose adopt plan binds this digest as its baseline and whose approval and fresh
-- observation §8 invariant 3 asks for.
ALTER TABLE machines ADD COLUMN import_digest TEXT;

-- The key binding's name and identity kept apart, so a plan's artifact can be opened
-- from the store alone; the node's redacted message with each response; and the
-- principal at whose request a controller acted (a takeover by recovery-admin).

-- The key's name, as the provider addresses it; NULL for artifacts published with
-- only the key's identifier.
ALTER TABLE artifacts ADD COLUMN key_name TEXT;
-- The key's identity, which the provider never gives another key.
ALTER TABLE artifacts ADD COLUMN key_identity TEXT;
-- Until now the identifier stored was the key's identity.
UPDATE artifacts SET key_identity = key_id WHERE key_identity IS NULL;

-- The node's message as the dispatch client gave it: already redacted.
ALTER TABLE attempts ADD COLUMN response_text TEXT;

-- The principal who asked for the act, when a controller acted at someone's request.
ALTER TABLE timeline ADD COLUMN requested_by TEXT;

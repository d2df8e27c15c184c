-- Retrying an archive import (docs/archive.md#retrying-failed-jobs): where each failed conversation
-- sits in its file and how often it was tried, whether a retry asked for it again, and where the
-- retry pass over the file has got to (NULL while none runs).
-- depends: 0024_flagged_memories

ALTER TABLE archive_import_failure ADD COLUMN position integer;
ALTER TABLE archive_import_failure ADD COLUMN attempts integer NOT NULL DEFAULT 1;
ALTER TABLE archive_import_failure ADD COLUMN retry boolean NOT NULL DEFAULT false;
ALTER TABLE archive_import ADD COLUMN retry_next integer;

-- A failure named by its place in the file ("#12") has that place; others are found by their id.
UPDATE archive_import_failure SET position = substr(conversation_ref, 2)::integer
WHERE conversation_ref ~ '^#[0-9]{1,9}$';

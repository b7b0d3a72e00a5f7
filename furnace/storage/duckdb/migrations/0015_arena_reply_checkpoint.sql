-- A recorded reply is its speaker's checkpoint (status done) from here on (issue #16: one INSERT
-- fewer per speaker); arena_checkpoints keeps the failed speakers, and the done rows older files
-- hold, which DuckDBArenaStore.checkpoints reads beside the replies.
ALTER TABLE arena_replies ADD COLUMN attempts INTEGER DEFAULT 1;

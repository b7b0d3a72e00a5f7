-- Accounting of every attempt: requests made for a logical call (retries, re-asks) and,
-- for an unusable reply, a scrubbed excerpt of it (never a provider error message).
ALTER TABLE llm_calls ADD COLUMN IF NOT EXISTS attempts INTEGER DEFAULT 1;
ALTER TABLE llm_calls ADD COLUMN IF NOT EXISTS detail VARCHAR DEFAULT '';
CREATE INDEX IF NOT EXISTS llm_responses_created ON llm_responses (created_at);

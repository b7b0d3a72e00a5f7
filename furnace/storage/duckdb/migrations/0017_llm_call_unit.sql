-- The unit of work within a run each call was made for (an experiment's `g<generation>/s<slot>`):
-- a generation's figures come from the ledger, calls a killed run paid for included.
ALTER TABLE llm_calls ADD COLUMN IF NOT EXISTS unit VARCHAR DEFAULT '';

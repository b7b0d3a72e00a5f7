-- Judge feedback: the short structured note ("missing: ...; tone: too formal") a judge
-- returns with each score, kept per individual, probe and scorer ('' for other scorers).

ALTER TABLE experiment_scores ADD COLUMN IF NOT EXISTS feedback VARCHAR DEFAULT '';

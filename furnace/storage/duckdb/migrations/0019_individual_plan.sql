-- The content key of the plan that made each individual (operator, parents, seed, params): a rerun reads a
-- record back only for the same plan, so a slot whose plan changed after a retried failure is made again.
-- '' for rows written before (their seal was made without it).
ALTER TABLE experiment_individuals ADD COLUMN IF NOT EXISTS plan VARCHAR DEFAULT '';

-- The listing's fields as columns (issue #16): `elixir list` reads the language and expertise of
-- the latest versions from here instead of parsing every JSON body. Written with each new version
-- (DuckDBStore._save_many); existing rows are filled from their bodies.
ALTER TABLE elixir_versions ADD COLUMN language VARCHAR;
ALTER TABLE elixir_versions ADD COLUMN expertise VARCHAR[];
UPDATE elixir_versions
SET language = body ->> '$.language', expertise = from_json(body -> '$.expertise', '["VARCHAR"]');

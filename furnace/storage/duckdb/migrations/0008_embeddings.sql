-- Embedding vectors by model and text hash (sha256 of the UTF-8 text): the embedding model
-- loads only for texts never embedded before (furnace.fusion.embedding.StoredEmbedder).
CREATE TABLE IF NOT EXISTS embeddings (
    model      VARCHAR NOT NULL,
    text_hash  VARCHAR NOT NULL,
    vector     DOUBLE[] NOT NULL,  -- exact: a stored vector equals the one first computed
    created_at TIMESTAMP DEFAULT current_timestamp,
    PRIMARY KEY (model, text_hash)
);

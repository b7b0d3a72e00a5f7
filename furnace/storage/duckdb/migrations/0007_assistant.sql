-- Lab assistant sessions: the locked scope and the question/answer history.
CREATE TABLE IF NOT EXISTS assistant_sessions (
    session_id VARCHAR PRIMARY KEY,
    state      JSON NOT NULL,
    updated_at TIMESTAMP NOT NULL DEFAULT current_timestamp
);

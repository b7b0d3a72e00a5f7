"""Read models for the app's pages: pure functions over the stores.

Pages stay thin: they call these (and the feature functions) and render.
Nothing here imports streamlit, duckdb or litellm; collaborators come in as
arguments.
"""

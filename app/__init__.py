"""The Streamlit app (a face): started by path (``furnace app`` runs ``streamlit_app.py``)."""

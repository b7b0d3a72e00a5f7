"""The app's pages: Streamlit scripts run by path from ``streamlit_app.py``."""

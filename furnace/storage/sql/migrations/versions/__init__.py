"""Numbered revisions: ``NNNN_name.py``, each ``down_revision`` the one before."""

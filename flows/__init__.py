"""Prefect 3 flows over furnace functions (thin: tasks call furnace, flows compose)."""

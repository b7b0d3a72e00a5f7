"""Environment defaults that keep every dependency off the network.

Call :func:`apply` at an entry point *before* litellm, mlflow or prefect are
imported (their settings freeze at import). Existing values are kept.
"""

from __future__ import annotations

import os

OFFLINE_DEFAULTS = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_OFFLINE_MODE": "true",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false",
    "MLFLOW_LOGGING_LEVEL": "WARNING",
}


def apply() -> None:
    """Set the offline defaults that are not already set."""
    for key, value in OFFLINE_DEFAULTS.items():
        os.environ.setdefault(key, value)

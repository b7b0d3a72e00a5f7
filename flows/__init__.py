"""Prefect 3 flows over furnace functions (thin: tasks call furnace, flows compose).

In a checkout this is ``flows/``; installed, the package ``furnace_flows`` (see setup.py).
``flows/prefect.yaml`` declares their deployments (``prefect deploy --all``; docs/prefect.md).
"""

from furnace import offline_env

offline_env.apply()  # before Prefect, litellm or MLflow are imported: their settings freeze at import

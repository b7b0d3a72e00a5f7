"""Which packages the wheel holds (everything else is in pyproject.toml).

The faces live at the top of the checkout, where a Prefect or Streamlit user looks for them
(``flows/``, ``app/``), and install under names of their own: ``furnace_flows`` and ``furnace_app``.
A wheel never installs generic top-level ``flows`` or ``app`` packages that would clash with another
project's. Sub-packages are found, not listed, so a new one cannot be left out of the wheel.
"""

from setuptools import find_packages, setup

FACES = {"furnace_flows": "flows", "furnace_app": "app"}  # import name -> folder in the checkout

setup(
    packages=[
        *find_packages(include=["furnace", "furnace.*"]),
        *(f"{name}.{sub}" if sub else name for name, folder in FACES.items() for sub in ["", *find_packages(folder)]),
    ],
    package_dir=FACES,
)

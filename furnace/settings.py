"""Settings, read once at the edges (CLI, flow entry, app start) and passed down.

Every variable is ``FURNACE_<NAME>``. Core code never reads ``os.environ``.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class FurnaceSettings(BaseSettings):
    """Configuration for one furnace process."""

    model_config = SettingsConfigDict(env_prefix="FURNACE_", extra="ignore")

    home: Path = Field(default=Path("data"), description="folder holding furnace.duckdb, mlflow.db, caches")
    model: str | None = Field(default=None, description="litellm model string; unset = offline engine")
    judge_model: str | None = Field(
        default=None, description="the judge scorers' model (experiments); unset = the experiment's model"
    )
    api_base: str | None = Field(default=None, description="OpenAI-compatible base URL for the model")
    api_key: SecretStr | None = Field(default=None, description="optional key; else the provider's usual variable")
    seal_key: SecretStr | None = Field(
        default=None, description="the records' seal key for a shared store; unset = the key file in home"
    )
    timeout_s: float = 60.0
    max_retries: int = 2
    context_limit: int = 32_000
    similarity_threshold: float = 0.55  # measured with all-MiniLM-L6-v2: paraphrases 0.53-0.68, unrelated <= 0.49
    ensemble_threshold: float = 0.8
    synth_ttl_s: int = 30 * 24 * 3600
    cache_ttl_days: float = Field(
        default=90.0, gt=0, description="model responses older than this are not served and are purged"
    )
    embedder: str = Field(default="auto", description="auto | minilm | hash")
    mlflow_uri: str | None = None
    mlflow_ui_url: str | None = Field(default=None, description="a running `mlflow ui` (the app links runs to it)")
    prefect_ui_url: str | None = Field(default=None, description="a Prefect UI (the app links flow runs to it)")
    dask_address: str | None = Field(
        default=None, description="a Dask scheduler for --runner dask (tcp://host:8786); unset = local worker processes"
    )
    dask_workers: int = Field(default=2, ge=1, description="worker processes of the local Dask cluster")
    app_host: str = "127.0.0.1"
    app_port: int = 8501

    @property
    def db_path(self) -> Path:
        return self.home.resolve() / "furnace.duckdb"

    @property
    def tracking_uri(self) -> str:
        return self.mlflow_uri or f"sqlite:///{self.home.resolve() / 'mlflow.db'}"

    @property
    def model_name(self) -> str:
        """The model in use, as shown to users (the offline engine when unset)."""
        from furnace.llm.seam import OFFLINE_MODEL_NAME

        return self.model or OFFLINE_MODEL_NAME

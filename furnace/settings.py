"""Settings, read once at the edges (CLI, flow entry, app start) and passed down.

Every variable is ``FURNACE_<NAME>``. Core code never reads ``os.environ``. A value that does not
parse is an :class:`~furnace.domain.errors.InputError` naming the variable and what it accepts
(never a validation dump, never a secret's value).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from furnace.domain.errors import InputError

SQLITE_FILE = "furnace.sqlite"  # the live store in a home (furnace.storage.sql)


class FurnaceSettings(BaseSettings):
    """Configuration for one furnace process."""

    model_config = SettingsConfigDict(env_prefix="FURNACE_", extra="ignore")

    home: Path = Field(default=Path("data"), description="folder holding furnace.sqlite, mlflow.db, snapshots")
    model: str | None = Field(default=None, description="litellm model string; unset = offline engine")
    judge_model: str | None = Field(
        default=None, description="the judge scorers' model (experiments); unset = the experiment's model"
    )
    api_base: str | None = Field(default=None, description="OpenAI-compatible base URL for the model")
    api_key: SecretStr | None = Field(default=None, description="optional key; else the provider's usual variable")
    database_url: SecretStr | None = Field(
        default=None,
        description="the live store: sqlite:///PATH or postgresql+psycopg://USER@HOST/DB; unset = home/furnace.sqlite",
    )
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
    prefect_start_timeout_s: float = Field(
        default=300.0, gt=0, description="how long --prefect waits for its temporary Prefect server to answer"
    )
    prefect_task_retries: int = Field(
        default=2, ge=0, le=10, description="Prefect retries of a unit task after a transient (non-model) failure"
    )
    dask_address: str | None = Field(
        default=None, description="a Dask scheduler for --runner dask (tcp://host:8786); unset = local worker processes"
    )
    dask_workers: int = Field(default=2, ge=1, description="worker processes of the local Dask cluster")
    app_host: str = "127.0.0.1"
    app_port: int = 8501
    serve_key: SecretStr | None = Field(
        default=None, description="the bearer key `furnace agent serve` requires of clients; unset = none"
    )

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as err:
            raise _settings_error(err) from None

    @field_validator("home", mode="before")
    @classmethod
    def _home_not_empty(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():  # Path("") is the current folder: never meant
            raise ValueError("FURNACE_HOME is empty: set it to the data folder, or unset it for ./data")
        return value

    @property
    def sqlite_path(self) -> Path:
        """The home's live store when no ``database_url`` names another (and where the snapshots are named from)."""
        return self.home.resolve() / SQLITE_FILE

    @property
    def db_path(self) -> Path:
        """An old home's DuckDB store (before furnace.sqlite): it moves into the live store on first open."""
        return self.home.resolve() / "furnace.duckdb"

    @property
    def tracking_uri(self) -> str:
        return self.mlflow_uri or f"sqlite:///{self.home.resolve() / 'mlflow.db'}"

    @property
    def model_name(self) -> str:
        """The model in use, as shown to users (the offline engine when unset)."""
        from furnace.llm.seam import OFFLINE_MODEL_NAME

        return self.model or OFFLINE_MODEL_NAME


def _accepts(name: str) -> str:
    """What ``FURNACE_<NAME>`` accepts, in words ("a whole number >= 1 (default 2)")."""
    field = FurnaceSettings.model_fields[name]
    text = {int: "a whole number", float: "a number", bool: "true or false", Path: "a folder path"}.get(
        field.annotation,  # type: ignore[arg-type]
        field.description or "text",
    )
    for rule in field.metadata:
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            if getattr(rule, attr, None) is not None:
                text += f" {sign} {getattr(rule, attr)}"
    if field.default is not None and not isinstance(field.default, SecretStr):
        text += f" (default {field.default})"
    return text


def _settings_error(err: ValidationError) -> InputError:
    """One line naming each bad ``FURNACE_*`` variable, the value given (not a secret's) and what it accepts."""
    problems: list[tuple[str, str]] = []
    for item in err.errors():
        name = str(item["loc"][0]) if item["loc"] else ""
        variable = f"FURNACE_{name.upper()}"
        if name not in FurnaceSettings.model_fields:
            problems.append((variable, f"{variable}: {item['msg']}"))
            continue
        if item["type"] == "value_error":  # a validator's own message says it all
            problems.append((variable, str(item.get("ctx", {}).get("error", item["msg"]))))
            continue
        secret = "SecretStr" in str(FurnaceSettings.model_fields[name].annotation)
        given = "" if secret else f"={str(item.get('input'))[:40]!r}"
        problems.append((variable, f"{variable}{given} is not allowed: it must be {_accepts(name)}"))
    return InputError("; ".join(message for _, message in problems), field=problems[0][0], problems=problems)

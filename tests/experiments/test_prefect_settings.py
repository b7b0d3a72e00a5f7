"""Prefect's retry condition and the temporary server's start timeout (no Prefect server needed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def _failed(error: BaseException):
    from prefect.states import Failed

    return Failed(data=error)


def test_a_unit_task_retries_only_transient_failures_that_are_not_model_errors():
    """A model error went through the model-call policy already: Prefect never retries it (attempts never
    multiply); a budget stop or an input error is final; a dropped connection or a file error is retried."""
    from furnace.domain.errors import BudgetExceeded, InputError, LLMRateLimit, LLMTimeout, StoreError
    from furnace_flows._common import retry_options, transient_failure

    for transient in (ConnectionResetError("worker comm closed"), OSError("disk"), TimeoutError("slow nfs")):
        assert transient_failure(None, None, _failed(transient)), transient
    for final in (LLMRateLimit("429"), LLMTimeout("t"), BudgetExceeded("b"), InputError("i"), StoreError("s")):
        assert not transient_failure(None, None, _failed(final)), final
    assert not transient_failure(None, None, _failed(ValueError("a bug")))
    options = retry_options(2)
    assert options["retries"] == 2 and len(options["retry_delay_seconds"]) == 2
    assert retry_options(0)["retries"] == 0


def test_the_unit_task_takes_its_retries_from_the_settings(monkeypatch):
    from furnace_flows.evolution import evaluation_task

    monkeypatch.setenv("FURNACE_PREFECT_TASK_RETRIES", "3")
    from furnace_flows._common import task_retries

    assert task_retries() == 3
    task = evaluation_task("v", "/tmp/results", task_retries())
    assert task.retries == 3 and task.retry_condition_fn is not None
    monkeypatch.setenv("FURNACE_PREFECT_TASK_RETRIES", "many")
    from furnace.domain.errors import InputError

    with pytest.raises(InputError, match="FURNACE_PREFECT_TASK_RETRIES"):
        task_retries()


def test_a_temporary_server_that_never_answers_stops_with_the_setting_named(tmp_path: Path, monkeypatch):
    """The start timeout is a setting: past it, one clear error naming FURNACE_PREFECT_START_TIMEOUT_S, and the
    server process furnace started is stopped."""
    import furnace.adapters.prefect_server as prefect_server
    from furnace.domain.errors import FurnaceError

    started: list[subprocess.Popen[bytes]] = []

    def silent_server(_command, *, env=None):  # a process that never answers the health check
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        started.append(proc)
        return proc

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setattr(prefect_server, "start_child", silent_server)
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with (
        # no API configured, whatever an earlier test in this worker set in Prefect's settings context
        temporary_settings(restore_defaults={PREFECT_API_URL}),
        pytest.raises(FurnaceError, match="not up after 0.5s.*FURNACE_PREFECT_START_TIMEOUT_S"),
        prefect_server.prefect_api(tmp_path, timeout_s=0.5),
    ):
        pass
    [proc] = started
    assert proc.poll() is not None  # stopped, not left running


def test_the_start_timeout_setting_has_a_sane_default_and_refuses_nonsense(monkeypatch):
    from furnace.domain.errors import InputError
    from furnace.settings import FurnaceSettings

    assert FurnaceSettings().prefect_start_timeout_s >= 120
    monkeypatch.setenv("FURNACE_PREFECT_START_TIMEOUT_S", "0")
    with pytest.raises(InputError, match="FURNACE_PREFECT_START_TIMEOUT_S"):
        FurnaceSettings()


def test_every_flow_task_retries_transient_failures_alike():
    from furnace_flows import fusion_generation, mutation_sweep, preferences
    from furnace_flows._common import task_retries, transient_failure

    tasks = [
        fusion_generation.fuse_and_score,
        fusion_generation.log_fusion,
        mutation_sweep.mutate_and_score,
        mutation_sweep.record,
        preferences.extract,
        preferences.log_batch,
    ]
    assert all(t.retries == task_retries() > 0 and t.retry_condition_fn is transient_failure for t in tasks)

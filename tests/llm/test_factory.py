"""build_llm: the offline engine or litellm, behind the response cache and accounting."""

from __future__ import annotations

import subprocess
import sys

from pydantic import SecretStr

from furnace.adapters.litellm_client import LiteLLMClient
from furnace.llm.cache import CachedLLM, MemoryCallLedger, MemoryResponseCache
from furnace.llm.offline import OfflineEngine
from furnace.llm.seam import OFFLINE_MODEL_NAME, TaskKind, system_user
from furnace.runtime import Runtime, build_llm
from furnace.settings import FurnaceSettings
from furnace.storage.sql.llm_calls import SQLCallLedger, SQLResponseCache

PERSONA = {"name": "Ada", "language": "en", "identity": "x", "expertise": ["testing"], "principles": ["Be precise."]}


def test_offline_by_default_in_memory(settings):
    llm = build_llm(settings)
    assert isinstance(llm, CachedLLM) and isinstance(llm.inner, OfflineEngine)
    assert isinstance(llm.cache, MemoryResponseCache) and isinstance(llm.ledger, MemoryCallLedger)
    assert llm.model_name == OFFLINE_MODEL_NAME == settings.model_name


def test_offline_on_the_live_store_caches_across_runtimes(settings):
    request = system_user(TaskKind.REPLY, "sys", "hi", inputs={"persona": PERSONA, "message": "How to start?"})
    runtime = Runtime(settings)
    first = runtime.llm
    assert isinstance(first.cache, SQLResponseCache) and isinstance(first.ledger, SQLCallLedger)
    made = first.for_run("r1").complete(request)
    other = Runtime(settings)  # another process on the same home
    served = other.llm.for_run("r2").complete(request)
    other.close()
    assert not made.cached and served.cached and served.text == made.text
    assert first.totals("r1").calls == 1 and first.totals("r2").cached_calls == 1
    runtime.close()


def test_model_setting_builds_litellm_client(home):
    settings = FurnaceSettings(
        home=home,
        model="deepseek/deepseek-chat",
        api_base="http://127.0.0.1:9/v1",
        api_key=SecretStr("sk-fake-factory-key"),
        timeout_s=5,
        max_retries=1,
    )
    llm = build_llm(settings)
    inner = llm.inner
    assert isinstance(inner, LiteLLMClient)
    assert (inner.model_name, inner.api_base, inner.timeout_s, inner.max_retries) == (
        "deepseek/deepseek-chat",
        "http://127.0.0.1:9/v1",
        5,
        1,
    )
    assert "sk-fake-factory-key" not in repr(llm)


def test_importing_the_seam_does_not_import_litellm():
    code = (
        "import sys, furnace.runtime, furnace.adapters.litellm_client, furnace.llm.cache, furnace.llm.offline;"
        "from furnace.settings import FurnaceSettings;"
        "furnace.runtime.build_llm(FurnaceSettings());"
        "print('litellm' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"

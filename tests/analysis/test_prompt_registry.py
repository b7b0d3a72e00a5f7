"""furnace.adapters.mlflow_prompts and ``furnace agent register|alias|load|promote`` on a temp sqlite MLflow."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from furnace.domain.errors import InputError, LineageError, NotFound


def test_register_reuse_alias_and_load(lab, mlflow_ready) -> None:
    from furnace.adapters import mlflow_prompts as mp

    uri = lab.settings.tracking_uri
    assert uri.startswith("sqlite:///") and str(lab.settings.home.resolve()) in uri
    first = mp.register_agent_prompt(
        lab.store, lab.grandchild.id, tracking_uri=uri, name="furnace-lab", alias="champion"
    )
    assert (first.version, first.reused, first.aliases) == (1, False, ("champion",))
    again = mp.register_agent_prompt(lab.store, lab.grandchild.id, tracking_uri=uri, name="furnace-lab")
    assert again.version == 1 and again.reused
    other = mp.register_agent_prompt(lab.store, lab.mutant.id, tracking_uri=uri, name="furnace-lab", alias="candidate")
    assert other.version == 2 and other.aliases == ("candidate",)

    loaded = mp.load_agent(lab.store, "prompts:/furnace-lab@champion", tracking_uri=uri)
    assert loaded.agent.id == lab.grandchild.id and loaded.prompt.version == 1
    system, user = loaded.template
    assert user == {"role": "user", "content": "{{ user_message }}"}
    assert system["content"] == lab.grandchild.system_prompt.replace("{{", "{ {")
    assert mp.load_agent(lab.store, "prompts:/furnace-lab@candidate", tracking_uri=uri).agent.id == lab.mutant.id

    client = mp.client_for(uri)
    tags = client.get_prompt_version("furnace-lab", 1).tags
    assert tags[mp.TAG_LINEAGE] == lab.grandchild.lineage_hash
    assert tags[mp.TAG_PARENTS] == f"{lab.crossover.id}@1"
    assert tags[mp.TAG_OPERATOR] == "mutation"
    assert tags[mp.TAG_OP_VERSIONS].split(",") == sorted(
        {f"crossover:{lab.crossover.lineage.op_version}", f"mutation:{lab.grandchild.lineage.op_version}"}
    )

    moved = mp.set_alias(uri, "furnace-lab", 2, "champion")
    assert "champion" in moved.aliases and moved.agent_id == lab.mutant.id
    assert mp.load_agent(lab.store, "prompts:/furnace-lab@champion", tracking_uri=uri).agent.id == lab.mutant.id
    assert mp.load_agent(lab.store, "prompts:/furnace-lab/1", tracking_uri=uri).agent.id == lab.grandchild.id

    # errors: one clear message each
    client.register_prompt("foreign", "Hello {{ name }}")
    with pytest.raises(InputError, match="not registered by furnace"):
        mp.load_agent(lab.store, "prompts:/foreign/1", tracking_uri=uri)
    client.register_prompt("forged", "x", tags={mp.TAG_AGENT: lab.mutant.id, mp.TAG_LINEAGE: "0" * 64})
    with pytest.raises(LineageError, match="lineage hash"):
        mp.load_agent(lab.store, "prompts:/forged/1", tracking_uri=uri)
    with pytest.raises(NotFound):
        mp.load_agent(lab.store, "prompts:/foreign@champion", tracking_uri=uri)
    with pytest.raises(NotFound):
        mp.load_agent(lab.store, "prompts:/nope@champion", tracking_uri=uri)
    with pytest.raises(InputError, match="prompts:/NAME@ALIAS"):
        mp.load_agent(lab.store, "furnace-lab@champion", tracking_uri=uri)
    with pytest.raises(InputError, match="alias"):
        mp.register_agent_prompt(lab.store, lab.mutant.id, tracking_uri=uri, alias="production")
    with pytest.raises(NotFound):
        mp.set_alias(uri, "foreign", 9, "champion")
    with pytest.raises(NotFound):
        mp.register_agent_prompt(lab.store, "agt-missing", tracking_uri=uri)


def test_cli_promote_registers_and_load_gives_back_the_agent(lab, mlflow_ready, monkeypatch) -> None:
    from furnace.cli import cli

    monkeypatch.setenv("FURNACE_EMBEDDER", "hash")
    runner = CliRunner()

    def run(*args: str) -> str:
        result = runner.invoke(cli, list(args))
        assert result.exit_code == 0, (result.output, result.exception)
        return result.output

    promoted = run("agent", "promote", lab.grandchild.id, "--name", "Lab Star")
    assert "promoted" in promoted and "prompts:/furnace-lab-star/1" in promoted and "candidate" in promoted
    loaded = json.loads(run("agent", "load", "prompts:/furnace-lab-star@candidate", "--json"))
    assert loaded["agent_id"] == lab.grandchild.id and loaded["lineage_hash"] == lab.grandchild.lineage_hash
    assert loaded["system_prompt"] == lab.grandchild.system_prompt

    reg = json.loads(run("agent", "register", lab.crossover.id, "--name", "furnace-lab-star", "--json"))
    assert reg["version"] == 2 and reg["aliases"] == []
    assert "@champion → version 2" in run("agent", "alias", "furnace-lab-star", "2", "champion")
    text = run("agent", "load", "prompts:/furnace-lab-star@champion")
    assert f"agent         {lab.crossover.id}" in text and "version 2" in text

    bad = runner.invoke(cli, ["agent", "alias", "furnace-lab-star", "2", "production"])
    assert bad.exit_code != 0
    missing = runner.invoke(cli, ["agent", "load", "prompts:/furnace-lab-star@champion-x"])
    assert missing.exit_code != 0


def test_an_agent_registered_under_a_name_is_found_under_it_and_reused_there(lab, mlflow_ready) -> None:
    """`make demo` registers its champion as furnace-demo-champion; :func:`registered_name` finds that name, and
    registering the agent again under it reuses its version: no second name holds the agent."""
    from furnace.adapters import mlflow_prompts as mp

    uri = lab.settings.tracking_uri
    assert mp.registered_name(uri, lab.grandchild.id) is None
    mp.register_agent_prompt(
        lab.store, lab.grandchild.id, tracking_uri=uri, name="furnace-demo-champion", alias="champion"
    )
    mp.register_agent_prompt(lab.store, lab.mutant.id, tracking_uri=uri, name="furnace-other", alias="candidate")
    assert mp.registered_name(uri, lab.grandchild.id) == "furnace-demo-champion"
    assert mp.registered_name(uri, lab.mutant.id) == "furnace-other"
    again = mp.register_agent_prompt(
        lab.store,
        lab.grandchild.id,
        tracking_uri=uri,
        name=mp.registered_name(uri, lab.grandchild.id),
        alias="champion",
    )
    assert (again.name, again.version, again.reused) == ("furnace-demo-champion", 1, True)
    holding = {p.name for p in mp.aliased_prompts(uri) if p.agent_id == lab.grandchild.id}
    assert holding == {"furnace-demo-champion"}
    assert mp.prompt_name(lab.grandchild) != "furnace-demo-champion"  # the default would have added a second name

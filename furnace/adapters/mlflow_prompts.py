"""Agents' prompts in MLflow's Prompt Registry: register, alias, load back to the agent.

A registered version is a chat template: the system message is the agent's
rendered prompt (verbatim, except that a literal ``{{`` becomes ``{ {`` so text
quoted inside the persona can never pose as a template variable) and the user
message is the variable ``{{ user_message }}``. Version tags carry the lineage:

- ``furnace.agent_id`` — the agent, so ``prompts:/NAME@champion`` loads it back;
- ``furnace.lineage_hash`` — checked against the stored agent on load;
- ``furnace.parents`` (``id@version`` list), ``furnace.operator``,
  ``furnace.op_versions`` (``operator:op_version`` of the agent and every agent
  ancestor) and, after a promotion, ``furnace.elixir`` (the library ref).

Registering the same agent again reuses its latest version (same lineage hash
and template) instead of adding one. Aliases (``champion``, ``candidate``) move
between versions with :func:`set_alias`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from furnace import offline_env

offline_env.apply()

from mlflow import MlflowClient  # noqa: E402
from mlflow.exceptions import MlflowException  # noqa: E402

from furnace.adapters import mlflow_store  # noqa: E402
from furnace.adapters.mlflow_tracker import link_prompt_to_runs  # noqa: E402
from furnace.domain.agent import AGENT_PREFIX, Agent  # noqa: E402
from furnace.domain.elixir import slugify  # noqa: E402
from furnace.domain.errors import InputError, LineageError, NotFound  # noqa: E402
from furnace.storage.store import ElixirStore  # noqa: E402

CHAMPION = "champion"
CANDIDATE = "candidate"
ALIASES = (CHAMPION, CANDIDATE)
USER_VARIABLE = "user_message"
TAG_AGENT = "furnace.agent_id"
TAG_LINEAGE = "furnace.lineage_hash"
TAG_PARENTS = "furnace.parents"
TAG_OPERATOR = "furnace.operator"
TAG_OP_VERSIONS = "furnace.op_versions"
TAG_ELIXIR = "furnace.elixir"
_URI = re.compile(r"^prompts:/(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:@(?P<alias>[A-Za-z0-9_-]+)|/(?P<version>\d+))$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


@dataclass(frozen=True)
class RegisteredPrompt:
    """One registered prompt version and the agent it holds."""

    name: str
    version: int
    agent_id: str
    lineage_hash: str
    aliases: tuple[str, ...] = ()
    reused: bool = False
    runs: tuple[str, ...] = ()  # the MLflow experiment runs this version is linked to (their best agent)

    @property
    def uri(self) -> str:
        return f"prompts:/{self.name}/{self.version}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "uri": self.uri,
            "agent_id": self.agent_id,
            "lineage_hash": self.lineage_hash,
            "aliases": list(self.aliases),
            "reused": self.reused,
            "runs": list(self.runs),
        }


@dataclass(frozen=True)
class LoadedAgent:
    """What ``prompts:/NAME@alias`` resolved to: the prompt version and the stored agent."""

    agent: Agent
    prompt: RegisteredPrompt
    template: Any


def client_for(tracking_uri: str) -> MlflowClient:
    """An MLflow client whose tracking and registry are both ``tracking_uri`` (no global state)."""
    mlflow_store.prepare(tracking_uri)
    return MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)


def prompt_name(agent: Agent, elixir_id: str | None = None) -> str:
    """The default registry name: ``furnace-<library id>`` after a promotion, else ``furnace-<agent name slug>``."""
    return "furnace-" + (elixir_id or slugify(agent.elixir.name))[:90]


def prompt_template(agent: Agent) -> list[dict[str, str]]:
    """The chat template: the rendered system prompt (defused) and ``{{ user_message }}``."""
    return [
        {"role": "system", "content": agent.system_prompt.replace("{{", "{ {")},
        {"role": "user", "content": "{{ " + USER_VARIABLE + " }}"},
    ]


def lineage_tags(store: ElixirStore, agent: Agent) -> dict[str, str]:
    """The version tags for ``agent``: id, lineage hash, parents, operator and the op versions of its ancestry."""
    ops = {f"{agent.lineage.operator}:{agent.lineage.op_version}"}
    for node in store.ancestors(agent.id):
        if node.id.startswith(AGENT_PREFIX):
            lin = store.get_agent(node.id).lineage
            ops.add(f"{lin.operator}:{lin.op_version}")
    return {
        TAG_AGENT: agent.id,
        TAG_LINEAGE: agent.lineage_hash,
        TAG_PARENTS: ",".join(str(p) for p in agent.lineage.parents),
        TAG_OPERATOR: agent.lineage.operator,
        TAG_OP_VERSIONS: ",".join(sorted(ops)),
    }


def _check_name(name: str) -> str:
    if not _NAME.match(name):
        raise InputError(f"prompt name {name!r} must be letters, digits, '.', '_' or '-' (at most 100)", field="name")
    return name


def _check_alias(alias: str) -> str:
    if alias not in ALIASES:
        raise InputError(f"alias must be one of {', '.join(ALIASES)}, got {alias!r}", field="alias")
    return alias


def _latest(client: MlflowClient, name: str) -> Any:
    try:
        return client.load_prompt(f"prompts:/{name}@latest", cache_ttl_seconds=0)
    except MlflowException:
        return None


def register_agent_prompt(
    store: ElixirStore,
    agent_id: str,
    *,
    tracking_uri: str,
    name: str | None = None,
    alias: str | None = None,
    elixir_ref: str | None = None,
    message: str | None = None,
) -> RegisteredPrompt:
    """Register ``agent_id``'s prompt (reusing an identical latest version) and optionally set ``alias``."""
    agent = store.get_agent(agent_id)  # NotFound / LineageError from the store
    elixir_id = elixir_ref.split("@")[0] if elixir_ref else None
    name = _check_name(name or prompt_name(agent, elixir_id))
    if alias is not None:
        _check_alias(alias)
    client = client_for(tracking_uri)
    template = prompt_template(agent)
    tags = lineage_tags(store, agent) | ({TAG_ELIXIR: elixir_ref} if elixir_ref else {})
    latest = _latest(client, name)
    if latest is not None and latest.tags.get(TAG_LINEAGE) == agent.lineage_hash and latest.template == template:
        version, reused = int(latest.version), True
    else:
        created = client.register_prompt(
            name=name, template=template, tags=tags, commit_message=message or f"{agent.id} ({agent.lineage.operator})"
        )
        version, reused = int(created.version), False
    if alias is not None:
        client.set_prompt_alias(name, alias, version)
    runs = link_prompt_to_runs(client, name, version, agent.id)  # the experiment runs that bred it
    aliases = _aliases(client, name, version)
    return RegisteredPrompt(name, version, agent.id, agent.lineage_hash, aliases, reused, tuple(runs))


def _aliases(client: MlflowClient, name: str, version: int) -> tuple[str, ...]:
    found = client.get_prompt_version(name, version)
    return tuple(sorted(getattr(found, "aliases", None) or ()))


def set_alias(tracking_uri: str, name: str, version: int, alias: str) -> RegisteredPrompt:
    """Point ``alias`` (champion | candidate) of prompt ``name`` at ``version``."""
    _check_alias(alias)
    client = client_for(tracking_uri)
    try:
        found = client.get_prompt_version(_check_name(name), int(version))
    except MlflowException:
        found = None
    if found is None:
        raise NotFound(f"prompt {name} has no version {version} (see mlflow ui, Prompts)")
    client.set_prompt_alias(name, alias, int(version))
    return RegisteredPrompt(
        name,
        int(version),
        found.tags.get(TAG_AGENT, ""),
        found.tags.get(TAG_LINEAGE, ""),
        _aliases(client, name, int(version)),
    )


def load_agent(store: ElixirStore, uri: str, *, tracking_uri: str) -> LoadedAgent:
    """Resolve ``prompts:/NAME@alias`` (or ``prompts:/NAME/VERSION``) to the stored agent.

    Raises NotFound for an unknown prompt, version or alias, InputError for a
    prompt not registered by furnace, and LineageError when the prompt's
    lineage hash does not match the stored agent's.
    """
    m = _URI.match(uri.strip())
    if not m:
        raise InputError(f"expected prompts:/NAME@ALIAS or prompts:/NAME/VERSION, got {uri!r}", field="uri")
    client = client_for(tracking_uri)
    try:
        found = client.load_prompt(uri.strip(), cache_ttl_seconds=0)
    except MlflowException as err:
        raise NotFound(f"{uri}: {str(err).splitlines()[0]}") from None
    if found is None:
        raise NotFound(f"{uri}: no such prompt")
    agent_id = found.tags.get(TAG_AGENT)
    if not agent_id:
        raise InputError(f"{uri} (version {found.version}) has no {TAG_AGENT} tag: it was not registered by furnace")
    agent = store.get_agent(agent_id)
    stored_hash = found.tags.get(TAG_LINEAGE)
    if stored_hash and stored_hash != agent.lineage_hash:
        raise LineageError(
            f"{uri} (version {found.version}) names {agent_id} with lineage hash {stored_hash[:12]}…, "
            f"but the stored agent has {agent.lineage_hash[:12]}…"
        )
    prompt = RegisteredPrompt(
        m.group("name"),
        int(found.version),
        agent.id,
        agent.lineage_hash,
        tuple(sorted(getattr(found, "aliases", None) or ())),
    )
    return LoadedAgent(agent, prompt, found.template)


def aliased_prompts(tracking_uri: str) -> list[RegisteredPrompt]:
    """The furnace prompt versions an alias (champion, candidate) points at, by name, one per version
    (``aliases`` names its aliases). Opening a ``sqlite:///`` store that does not exist creates it: a caller
    that only reads looks first (``furnace.server.catalogue``)."""
    client = client_for(tracking_uri)
    names: list[str] = []
    page_token = None
    while True:
        page = client.search_prompts(max_results=1000, page_token=page_token)
        names += [p.name for p in page]
        page_token = getattr(page, "token", None)
        if not page_token:
            break
    found: list[RegisteredPrompt] = []
    for name in sorted(set(names)):
        versions: dict[int, Any] = {}
        for alias in ALIASES:
            try:
                version = client.get_prompt_version_by_alias(name, alias)
            except MlflowException:
                continue
            if version is not None and version.tags.get(TAG_AGENT):
                versions[int(version.version)] = version
        for number, version in sorted(versions.items()):
            aliases = tuple(sorted(a for a in (getattr(version, "aliases", None) or ()) if a in ALIASES))
            found.append(
                RegisteredPrompt(name, number, version.tags[TAG_AGENT], version.tags.get(TAG_LINEAGE, ""), aliases)
            )
    return found


def registered_name(tracking_uri: str, agent_id: str) -> str | None:
    """The registry name whose aliased version holds ``agent_id`` (``furnace-demo-champion`` after ``make
    demo``), the one its ``champion`` alias points at first, then by name; None when no alias points at it.
    Registering the agent again under that name reuses its version instead of adding a second name."""
    held = [p for p in aliased_prompts(tracking_uri) if p.agent_id == agent_id]
    held.sort(key=lambda p: (CHAMPION not in p.aliases, p.name))
    return held[0].name if held else None

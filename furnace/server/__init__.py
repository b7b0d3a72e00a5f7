"""``furnace agent serve``: bred agents and library elixirs over the OpenAI chat-completions protocol (a face).

- :mod:`furnace.server.app` — the FastAPI app and its uvicorn server;
- :mod:`furnace.server.catalogue` — the model ids (agents, elixirs, Prompt Registry aliases) and pre-warming;
- :mod:`furnace.server.wire` — the OpenAI wire format (request, completion, stream chunks, error bodies).

Started by the CLI (``furnace.cli.serve_cmd``, its one lazy launcher edge), on the CLI's runtime.
See docs/serving.md.
"""

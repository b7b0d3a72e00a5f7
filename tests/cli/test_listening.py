"""``furnace app`` and ``furnace agent serve`` refuse an address they cannot listen on before anything
starts: one line naming the address and why, exit 1."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from furnace.cli.listening import ensure_can_listen
from furnace.domain.errors import InputError
from tests.conftest import run_cli


def test_a_port_in_use_is_refused_before_either_server_starts(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[object] = []
    monkeypatch.setattr("furnace.adapters.processes.run_child", lambda *args, **kw: started.append(args) or 0)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, out, err = run_cli(capsys, "app", "--port", str(port))
        assert code == 1 and err.startswith(f"error: cannot listen on 127.0.0.1:{port}: the port is in use")
        assert not started and "furnace app on" not in out  # no Streamlit, nothing announced
        code, out, err = run_cli(capsys, "agent", "serve", "--port", str(port))
        assert code == 1 and err.startswith(f"error: cannot listen on 127.0.0.1:{port}: the port is in use")
        assert "OpenAI-compatible API on" not in err
    ensure_can_listen("127.0.0.1", port)  # free again once its listener is gone
    run_cli(capsys, "app", "--port", str(port))
    assert len(started) == 1  # the app's server is started when its port is free


def test_localhost_is_checked_where_the_servers_bind_it_on_ipv4() -> None:
    """uvicorn and Streamlit bind "localhost" as 127.0.0.1: a port busy there is busy for "localhost" too,
    whatever address family the resolver lists first."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(InputError, match=f"cannot listen on localhost:{port}: the port is in use"):
            ensure_can_listen("localhost", port)


def test_a_host_that_is_not_this_machines_is_refused() -> None:
    with pytest.raises(InputError, match="cannot listen on 192.0.2.1:8501: not an address of this machine"):
        ensure_can_listen("192.0.2.1", 8501)  # TEST-NET-1: never a local address


def test_a_host_no_resolver_knows_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def unknown(*_args: object, **_kw: object) -> None:  # the resolver's answer, without asking a network
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", unknown)
    with pytest.raises(InputError, match=r"cannot listen on lab-box:8501: unknown host \(Name or service not known\)"):
        ensure_can_listen("lab-box", 8501)

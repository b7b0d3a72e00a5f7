"""Whether a server furnace starts (``furnace app``, ``furnace agent serve``) can listen where it is told:
checked before it starts, so a port in use or a host that is not this machine's is one line naming the
address, not a server's traceback after a line announcing it."""

from __future__ import annotations

import errno
import socket

from furnace.domain.errors import InputError

_REASONS = {
    errno.EADDRINUSE: "the port is in use (another server there? choose another --port)",
    errno.EADDRNOTAVAIL: "not an address of this machine (see --host)",
    errno.EACCES: "permission denied (ports below 1024 need privileges)",
}


def ensure_can_listen(host: str, port: int) -> None:
    """Bind, and let go of, a socket where the server will listen (with ``SO_REUSEADDR``, as the servers
    bind: a port left in ``TIME_WAIT`` is free, one another process listens on is not); an
    :class:`InputError` naming ``host:port`` and why when that fails. Port 0 (any free port) checks the
    host alone."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET  # as uvicorn binds: "localhost" is 127.0.0.1
    try:
        found = socket.getaddrinfo(host, port, family=family, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as err:
        raise InputError(f"cannot listen on {host}:{port}: unknown host ({err.strerror})", field="host") from None
    family, kind, proto, _, address = found[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as err:
            reason = _REASONS.get(err.errno or 0, err.strerror or str(err))
            raise InputError(f"cannot listen on {host}:{port}: {reason}", field="port") from None

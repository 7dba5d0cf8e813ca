"""Listening sockets: the SMTP listener's and the HTTP side's, bound by
``pbm serve`` itself, so that a port in use is an error at start, at once."""

from __future__ import annotations

import socket


def listening_socket(host: str | None, port: int, *, v6_only: bool = False, backlog: int = 512) -> socket.socket:
    """A TCP socket bound and listening on the first address ``host``
    resolves to (``None``: every interface), with SO_REUSEADDR.  ``v6_only``
    keeps an IPv6 socket to IPv6 (as asyncio binds one).  Resolving or
    binding fails with the OSError the system gives (a port in use:
    EADDRINUSE)."""
    family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                      flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if v6_only and family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(addr)
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return sock

"""How the routing API is served: uvicorn with h11 and timeouts on slow clients.

uvicorn closes an idle keep-alive connection after ``timeout_keep_alive`` seconds, but only once a
response was sent, and any byte received stops that clock: a client that opens connections and
sends a request's headers slowly (or never) would hold them forever. :class:`TimedH11Protocol`
closes a connection whose request headers are not complete ``HEADER_TIMEOUT`` seconds after the
connection opened or the previous response ended.

Every accepted connection gets ``TCP_NODELAY`` (uvicorn sets it on none: its issue #3149). Without
it, Nagle's algorithm holds a response's last small segment until the client acknowledges the
previous one, and a client that delays its ACKs (Linux: up to 40 ms) makes every request after the
first on a kept-open connection wait that long — every HTTP client library keeps connections open.
Where the system has it, each read also sends its ACK at once (``TCP_QUICKACK``), so a client that
itself sends small writes late (Nagle's algorithm on its side) is not held up either.
"""

from __future__ import annotations

import asyncio
import socket

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = [
    "HEADER_TIMEOUT",
    "KEEP_ALIVE",
    "LOG_LEVELS",
    "TimedH11Protocol",
    "no_delay",
    "quick_ack",
    "server_config",
]

HEADER_TIMEOUT = 5.0  # seconds for a request's headers to arrive whole
KEEP_ALIVE = 5  # seconds an idle keep-alive connection stays open
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
MAX_HEADER_BYTES = 64 * 1024  # request line and headers (h11's own limit is 16 KiB)


class TimedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request headers are late."""

    header_timeout: float = HEADER_TIMEOUT

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.tcp_socket = no_delay(transport)
        super().connection_made(transport)
        self.header_clock: asyncio.TimerHandle | None = None
        self.start_header_clock()

    def data_received(self, data: bytes) -> None:
        quick_ack(self.tcp_socket)
        super().data_received(data)

    def start_header_clock(self) -> None:
        """Give the next request ``header_timeout`` seconds to finish its headers (they are
        whole once uvicorn starts a new request cycle)."""
        self.stop_header_clock()
        self.awaited_after = self.cycle  # the cycle in place: a new one means the headers came
        self.header_clock = self.loop.call_later(self.header_timeout, self.headers_late)

    def stop_header_clock(self) -> None:
        clock = getattr(self, "header_clock", None)
        if clock is not None:
            clock.cancel()
            self.header_clock = None

    def headers_late(self) -> None:
        self.header_clock = None
        if self.transport.is_closing() or self.cycle is not self.awaited_after:
            return  # a request's headers came (it is being read or answered)
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a pipelined request that started with the previous response's end
        self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self.start_header_clock()  # the next request on this connection gets its own time

    def connection_lost(self, exc: Exception | None) -> None:
        self.stop_header_clock()
        super().connection_lost(exc)


def no_delay(transport: asyncio.BaseTransport):
    """Send small writes on ``transport``'s TCP socket at once (``TCP_NODELAY``) and return the
    socket; a Unix socket, or one already closed, is left as it is (``None``)."""
    sock = transport.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return None
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        return None  # the peer is gone already: uvicorn finds that out on its own
    return sock


def quick_ack(sock) -> None:
    """Acknowledge what ``sock`` received now rather than after the delayed-ACK timer (Linux
    ``TCP_QUICKACK``, which lasts until the stack falls back to delaying: set on every read). A
    client that sends a request's headers and its body in two writes without ``TCP_NODELAY`` —
    Python's ``http.client`` does — holds the body until the headers are acknowledged."""
    if sock is not None and QUICKACK is not None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, QUICKACK, 1)
        except OSError:
            pass


QUICKACK = getattr(socket, "TCP_QUICKACK", None)  # Linux only


def server_config(app, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info", **extra) -> dict:
    """The keyword arguments of ``uvicorn.Config`` / ``uvicorn.run`` the API is served with."""
    return dict(
        app=app,
        host=host,
        port=port,
        log_level=log_level,
        http=TimedH11Protocol,
        timeout_keep_alive=KEEP_ALIVE,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        **extra,
    )


def server(app, **kwargs) -> uvicorn.Server:
    """A uvicorn server of ``app`` (:func:`server_config`'s settings)."""
    return uvicorn.Server(uvicorn.Config(**server_config(app, **kwargs)))

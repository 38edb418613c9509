"""An HTTP client whose calls can be cut off from another thread: `CutOff.client()` is the `openai`
client's `http_client`; `cut()` shuts the sockets of the calls in flight (a server that is frozen or
shutting down holds them open until the read timeout, which may be minutes) and refuses new
connections at once until `restore()`. The cascade cuts its judge off when the judge stops
answering, so a run goes on without waiting --judge-timeout per call.

The sockets are found through httpcore2's public network-backend hook (`NetworkStream.get_extra_info
("socket")`), on a subclass of httpx2's `HTTPTransport` that replaces its pool (`_pool`, httpx2 2.x)
with one built on that hook. Calls through a proxy from the environment (the client's own transports)
cannot be cut off. Knows nothing about models or verdicts.
"""
from __future__ import annotations

import contextlib
import socket
import threading
import weakref
from typing import Any


class CutOff:
    """The switch, and the sockets opened through it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.refusing = False
        self.sockets: weakref.WeakSet = weakref.WeakSet()

    def client(self, **kwargs: Any):
        """An `openai.DefaultHttpxClient` (the openai client's own defaults) whose connections go through
        this switch."""
        import httpcore2
        import httpx2
        import openai

        switch = self

        class Backend(httpcore2.SyncBackend):
            def connect_tcp(self, *a, **k):
                if switch.refusing:
                    raise httpcore2.ConnectError("cut off: the server stopped answering")
                stream = super().connect_tcp(*a, **k)
                sock = stream.get_extra_info("socket")
                if sock is not None:
                    with switch.lock:
                        switch.sockets.add(sock)
                return stream

        class Transport(httpx2.HTTPTransport):
            """httpx2's transport with a connection pool whose connections go through Backend."""

            def __init__(self, limits) -> None:
                super().__init__(limits=limits)
                self._pool = httpcore2.ConnectionPool(
                    ssl_context=httpx2.create_ssl_context(), max_connections=limits.max_connections,
                    max_keepalive_connections=limits.max_keepalive_connections,
                    keepalive_expiry=limits.keepalive_expiry, network_backend=Backend())

        limits = kwargs.pop("limits", openai.DEFAULT_CONNECTION_LIMITS)
        return openai.DefaultHttpxClient(transport=Transport(limits), limits=limits, **kwargs)

    def cut(self) -> None:
        """Refuse new connections and end the calls in flight (each fails with a connection error)."""
        with self.lock:
            self.refusing = True
            open_now = list(self.sockets)
        for sock in open_now:
            with contextlib.suppress(OSError):  # closed already
                sock.shutdown(socket.SHUT_RDWR)

    def restore(self) -> None:
        """Connect again (the server answers again)."""
        with self.lock:
            self.refusing = False

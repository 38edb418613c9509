"""An HTTP client whose calls can be cut off from another thread: `CutOff.client()` is the `openai`
client's `http_client`; `cut()` shuts the sockets of the calls in flight (a frozen server holds them
open until the read timeout) and refuses new connections until `restore()`. The sockets are found
through httpcore's network-backend hook (`NetworkStream.get_extra_info("socket")`), on a subclass of
httpx's `HTTPTransport` with a pool built on that hook (httpx2/httpcore2 under openai 3.x,
httpx/httpcore under 1.x). Calls through a proxy from the environment cannot be cut off. Knows
nothing about models or verdicts.
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
        this switch; None (the openai client's own, which cannot be cut off) where the HTTP library under
        this openai release lacks the hooks."""
        import importlib

        import openai

        http = next((c.__module__.split(".")[0] for c in openai.DefaultHttpxClient.__mro__[1:]
                     if c.__name__ == "Client"), None)  # httpx2 under openai 3.x, httpx under 1.x
        try:
            httpx = importlib.import_module(http or "")
            core = importlib.import_module({"httpx2": "httpcore2", "httpx": "httpcore"}[http])
            limits = kwargs.pop("limits", openai.DEFAULT_CONNECTION_LIMITS)
            return openai.DefaultHttpxClient(transport=self._transport(httpx, core, limits), limits=limits, **kwargs)
        except (ImportError, KeyError, AttributeError, TypeError, ValueError):
            return None

    def _transport(self, httpx, core, limits):
        """httpx's transport with a connection pool whose connections go through this switch."""
        switch = self

        class Backend(core.SyncBackend):
            def connect_tcp(self, *a, **k):
                if switch.refusing:
                    raise core.ConnectError("cut off: the server stopped answering")
                stream = super().connect_tcp(*a, **k)
                sock = stream.get_extra_info("socket")
                if sock is not None:
                    with switch.lock:
                        switch.sockets.add(sock)
                return stream

        class Transport(httpx.HTTPTransport):
            def __init__(self) -> None:
                super().__init__(limits=limits)
                self._pool = core.ConnectionPool(
                    ssl_context=httpx.create_ssl_context(), max_connections=limits.max_connections,
                    max_keepalive_connections=limits.max_keepalive_connections,
                    keepalive_expiry=limits.keepalive_expiry, network_backend=Backend())

        return Transport()

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

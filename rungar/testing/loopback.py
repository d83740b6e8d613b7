"""An HTTP server on a free loopback port, served from a daemon thread: the fakes that stand in
for a cloud API on loopback (the GCE fake, the demo's Spot market) are each one of these."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LoopbackHttpServer:
    def __init__(self, handler: type[BaseHTTPRequestHandler], poll_interval: float) -> None:
        self._handler = handler
        self._poll_interval = poll_interval  # how soon stop() is noticed
        self._server: ThreadingHTTPServer | None = None

    @property
    def endpoint(self) -> str:
        assert self._server is not None, "start() the server first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler)
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": self._poll_interval},
            daemon=True,
        ).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

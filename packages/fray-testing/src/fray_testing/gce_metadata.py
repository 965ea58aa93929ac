"""A fake GCE metadata server on 127.0.0.1 for tests of preemption handling.

It answers ``GET /computeMetadata/v1/instance/preempted`` (``TRUE``/``FALSE``) to requests
carrying ``Metadata-Flavor: Google``, like the real server; a test flips the answer. Point
code at it with ``GCE_METADATA_HOST=<server.host>`` (the env var Google's libraries and
fray-tpu read)::

    with FakeGceMetadataServer() as server:
        server.preempt_next(1)          # the next question answers TRUE, then FALSE again
        env = {"GCE_METADATA_HOST": server.host}
"""

from __future__ import annotations

import http.server
import threading
from types import TracebackType

__all__ = ["FakeGceMetadataServer"]

_PREFIX = "/computeMetadata/v1/"


class FakeGceMetadataServer:
    """A metadata server whose ``instance/preempted`` answer the test controls.

    Attributes:
        queries: How many ``instance/preempted`` questions were answered.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._preempted = False
        self._true_answers_left: int | None = None
        self.queries = 0
        self.values: dict[str, str] = {"instance/id": "1234567890", "instance/hostname": "fake"}
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- control ---------------------------------------------------------------------------

    def set_preempted(self, value: bool) -> None:
        """Answers ``TRUE`` (or ``FALSE``) from now on."""
        with self._lock:
            self._preempted = value
            self._true_answers_left = None

    def preempt_next(self, count: int = 1) -> None:
        """Answers ``TRUE`` to the next ``count`` questions, then ``FALSE`` again."""
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count}")
        with self._lock:
            self._preempted = True
            self._true_answers_left = count

    def _answer_preempted(self) -> str:
        with self._lock:
            self.queries += 1
            if not self._preempted:
                return "FALSE"
            if self._true_answers_left is not None:
                self._true_answers_left -= 1
                if self._true_answers_left <= 0:
                    self._preempted = False
                    self._true_answers_left = None
            return "TRUE"

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def host(self) -> str:
        """``127.0.0.1:<port>``, the value for ``GCE_METADATA_HOST``."""
        if self._server is None:
            raise RuntimeError("the fake metadata server is not running")
        return f"127.0.0.1:{self._server.server_address[1]}"

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>/computeMetadata/v1/``."""
        return f"http://{self.host}{_PREFIX}"

    def start(self) -> FakeGceMetadataServer:
        """Starts serving on a free port of 127.0.0.1 (in a daemon thread)."""
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.headers.get("Metadata-Flavor") != "Google":
                    self._reply(403, "Missing Metadata-Flavor:Google header.")
                    return
                path = self.path.split("?", 1)[0]
                if not path.startswith(_PREFIX):
                    self._reply(404, "not found")
                    return
                key = path[len(_PREFIX) :]
                if key == "instance/preempted":
                    self._reply(200, owner._answer_preempted())
                elif key in owner.values:
                    self._reply(200, owner.values[key])
                else:
                    self._reply(404, "not found")

            def _reply(self, code: int, body: str) -> None:
                data = body.encode()
                self.send_response(code)
                self.send_header("Metadata-Flavor", "Google")
                self.send_header("Content-Type", "application/text")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="fake-gce-metadata", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stops serving and closes the socket."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> FakeGceMetadataServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

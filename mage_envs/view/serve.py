"""Serve a report page over HTTP, on the loopback interface unless told otherwise.

Example:
    >>> import threading, urllib.request, tempfile, pathlib
    >>> page = pathlib.Path(tempfile.mkdtemp()) / "report.html"
    >>> _ = page.write_text("<p>hi</p>")
    >>> server = report_server(page, port=0)
    >>> threading.Thread(target=server.serve_forever, daemon=True).start()
    >>> urllib.request.urlopen(f"http://127.0.0.1:{server.server_address[1]}/").read()
    b'<p>hi</p>'
    >>> server.shutdown(); server.server_close()
"""

from __future__ import annotations

import http.server
from pathlib import Path

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def report_server(page: str | Path, host: str = "127.0.0.1", port: int = 8765) -> http.server.ThreadingHTTPServer:
    """A server answering ``GET /`` (and ``/report.html``) with ``page``, read afresh each time."""
    path = Path(page)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the http.server name)
            if self.path.split("?")[0] not in ("/", "/report.html"):
                self.send_error(404, "only the report is served here: /")
                return
            body = path.read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
            pass

    return http.server.ThreadingHTTPServer((host, port), Handler)


def serve(page: str | Path, host: str = "127.0.0.1", port: int = 8765, allow_remote: bool = False) -> None:
    """Serve ``page`` until interrupted; a host other than loopback needs ``allow_remote``."""
    if host not in LOOPBACK and not allow_remote:
        raise ValueError(f"--host {host} would serve the report beyond this machine: pass --allow-remote to mean it")
    server = report_server(page, host, port)
    print(f"serving {page} at http://{host}:{server.server_address[1]}/ (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()

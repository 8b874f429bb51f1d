"""A real `mage serve` (uvicorn, in a subprocess) on a free loopback port, and small clients for it."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path


def free_port():
    """A loopback port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """`mage serve --port <port> <flags>` as a subprocess; `url` once it answers `/health`."""

    def __init__(self, log: Path, *flags, port=None):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.command = [sys.executable, "-m", "mage_envs.cli", "serve", "--port", str(self.port), *map(str, flags)]
        self.process = None

    def start(self, timeout=60):
        with open(self.log, "a") as out:
            self.process = subprocess.Popen(self.command, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while True:
            try:
                urllib.request.urlopen(self.url + "/health", timeout=1).close()
                return self
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.process.kill()
                    raise RuntimeError(f"the server did not start:\n{self.log.read_text()}") from None
                time.sleep(0.05)

    def stop(self, sig=signal.SIGTERM):
        """Stop the server with `sig` (SIGKILL: as a crash would)."""
        if self.process is None or self.process.poll() is not None:
            return
        os.kill(self.process.pid, sig)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@contextlib.contextmanager
def running(log, *flags):
    """A started :class:`Server`, stopped at the end of the block."""
    server = Server(log, *flags).start()
    try:
        yield server
    finally:
        server.stop()


def request(url, method="GET", body=None, headers=None, raw=None, timeout=30):
    """(status, JSON answer) of one HTTP request; 4xx/5xx answers are returned, not raised."""
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def health(url):
    """The server's `/health` answer."""
    return request(url + "/health")[1]


def wait_for_sessions(url, count, timeout=10.0):
    """Wait until the server has `count` open sessions; the time it took."""
    start = time.monotonic()
    while health(url)["active_sessions"] != count:
        assert time.monotonic() - start < timeout, f"still not {count} sessions after {timeout} s: {health(url)}"
        time.sleep(0.05)
    return time.monotonic() - start

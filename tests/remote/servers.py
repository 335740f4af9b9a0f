"""Servers on 127.0.0.1 for the remote-reading tests: nginx (real range serving), docker-registry, and a
small scriptable HTTP server for the faults real servers will not make."""

from __future__ import annotations

import http.server
import os
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


def free_port() -> int:
    """A port nothing listens on now (nginx cannot bind port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_up(url: str, process: subprocess.Popen, log: Path) -> None:
    """Poll `url` until the server answers anything (a 401 or 404 counts)."""
    for _ in range(200):
        if process.poll() is not None:
            raise RuntimeError(f"server exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"server did not come up at {url}")


def stop(process: subprocess.Popen) -> None:
    """End a server this module started, by its process id."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@dataclass
class Nginx:
    """nginx serving `roots` (one server block each, on its own port); the access log records each request's
    Range and Authorization headers."""

    roots: list[Path]
    workdir: Path
    ports: list[int] = field(default_factory=list)
    process: subprocess.Popen | None = None

    def start(self) -> None:
        ngx = self.workdir / "ngx"
        for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (ngx / "tmp" / sub).mkdir(parents=True, exist_ok=True)
        self.ports = [free_port() for _ in self.roots]
        servers = "\n".join(
            f"    server {{ listen 127.0.0.1:{port}; root {root}; }}"
            for port, root in zip(self.ports, self.roots, strict=True)
        )
        # As root, workers must run as root to read pytest's 0700 temporary folders; otherwise the line is ignored.
        user = "user root root;" if os.geteuid() == 0 else ""
        temps = "\n".join(
            f"    {kind}_temp_path {ngx}/tmp/{sub};"
            for kind, sub in (("client_body", "body"), ("proxy", "proxy"), ("fastcgi", "fastcgi"), ("uwsgi", "uwsgi"),
                              ("scgi", "scgi"))
        )  # fmt: skip
        config = f"""daemon off;
worker_processes 1;
{user}
pid {ngx}/nginx.pid;
error_log {ngx}/error.log warn;
events {{ worker_connections 64; }}
http {{
{temps}
    default_type application/octet-stream;
    types {{ }}
    sendfile on;
    log_format wk '"$request" $status range="$http_range" auth="$http_authorization"';
    access_log {ngx}/access.log wk;
{servers}
}}
"""
        (self.workdir / "nginx.conf").write_text(config)
        log = ngx / "error.log"
        self.process = subprocess.Popen(
            ["nginx", "-e", str(log), "-p", str(ngx), "-c", str(self.workdir / "nginx.conf")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for port in self.ports:
            wait_until_up(f"http://127.0.0.1:{port}/", self.process, log)

    def url(self, name: str, root: int = 0, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.ports[root]}/{name}"

    def access_log(self) -> list[str]:
        return (self.workdir / "ngx" / "access.log").read_text().splitlines()

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)


# The fixture user for Basic auth: alice / secret (bcrypt, cost 5: made with `htpasswd -Bbn alice secret`;
# docker-registry takes bcrypt only).
HTPASSWD = "alice:$2y$05$QOOWiIO3ntTaBflQY4nKiunoP3BAY6miQShu1E2Ih9Ld56g47qkzm\n"


def have(program: str) -> bool:
    return shutil.which(program) is not None


# --- the scriptable server ---------------------------------------------------------------------------------


@dataclass
class Seen:
    """One request the scriptable server received."""

    host: str
    path: str
    headers: dict[str, str]


Handler = Callable[["Request"], None]


class Request(http.server.BaseHTTPRequestHandler):
    """Answers by the route the server's `routes` map the path (without query) to."""

    protocol_version = "HTTP/1.1"
    server: FaultServer

    def do_GET(self) -> None:
        self.server.seen.append(Seen(self.headers.get("Host", ""), self.path, dict(self.headers.items())))
        route = self.server.routes.get(self.path.partition("?")[0])
        if route is None:
            self.reply(404, b"not here\n", {"Content-Type": "text/plain"})
        else:
            route(self)

    def log_message(self, format: str, *args: object) -> None:  # keep test output clean
        pass

    def reply(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        headers = {"Content-Length": str(len(body)), **(headers or {})}
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def byte_range(self, size: int) -> tuple[int, int] | None:
        """The single range asked for, clamped to `size`, or None (no Range header)."""
        m = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
        if m is None:
            return None
        return int(m[1]), min(int(m[2]), size - 1)


def serve_bytes(data: bytes, size: int | None = None) -> Handler:
    """Serve `data` with ranges, as a file of `size` bytes (zeros after `data`): a huge file costs nothing."""
    total = len(data) if size is None else size

    def route(req: Request) -> None:
        rng = req.byte_range(total)
        if rng is None or rng[0] >= total:
            req.reply(416, headers={"Content-Range": f"bytes */{total}"})
            return
        first, last = rng
        body = data[first : last + 1]
        body += bytes(last + 1 - first - len(body))
        req.reply(206, body, {"Content-Range": f"bytes {first}-{last}/{total}"})

    return route


class FaultServer(http.server.ThreadingHTTPServer):
    """A threaded server on 127.0.0.1 whose answers are set per path (`routes`); `seen` lists the requests.
    It answers as `localhost` too: another host, as far as credentials go."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Request)
        self.routes: dict[str, Handler] = {}
        self.seen: list[Seen] = []
        self.thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.server_address[1]}{path}"

    def handle_error(self, request, client_address) -> None:
        """Stay quiet: clients hang up mid-answer on purpose here, and stderr belongs to the code under test."""

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

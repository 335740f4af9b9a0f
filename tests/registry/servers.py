"""Real servers for the registry tests, all on 127.0.0.1: docker-registry (Debian's 2.8.2), a docker-token-spec
token server and a fault-injecting proxy in front of any of them (nginx, the redirect storage, and the htpasswd
fixture user are the remote tests' own)."""

from __future__ import annotations

import base64
import datetime
import hashlib
import http.client
import json
import re
import shutil
import socket
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

USER, PASSWORD = "alice", "secret"
SERVICE, ISSUER = "weightkit-test-registry", "weightkit-test-issuer"


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        pass  # a client that went away (killed, or cut by a fault) is part of these tests


class Registry:
    """A docker-registry process with its own storage; `auth` is its config's auth section, `middleware`
    its storage middleware (a redirect to storage)."""

    def __init__(
        self,
        root: Path,
        auth: dict | None = None,
        middleware: dict | None = None,
        storage: Path | None = None,
        tls: tuple[Path, Path] | None = None,
    ) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.storage = storage or root / "storage"
        config = {
            "version": 0.1,
            "log": {"level": "info", "accesslog": {"disabled": True}},
            "storage": {"filesystem": {"rootdirectory": str(self.storage)}, "delete": {"enabled": True}},
            "http": {"addr": "127.0.0.1:0", "secret": "weightkit-test"},
        }
        if auth:
            config["auth"] = auth
        if middleware:
            config["middleware"] = middleware
        if tls:
            config["http"]["tls"] = {"certificate": str(tls[0]), "key": str(tls[1])}
        (root / "config.yml").write_text(json.dumps(config))  # YAML reads JSON
        self.log = root / "registry.log"
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(["docker-registry", "serve", str(root / "config.yml")], stdout=log,
                                            stderr=subprocess.STDOUT)  # fmt: skip
        self.port = self._port()
        self.host = f"127.0.0.1:{self.port}"

    def _port(self) -> int:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if match := re.search(rb"listening on 127\.0\.0\.1:(\d+)", self.log.read_bytes()):
                return int(match[1])
            if self.process.poll() is not None:
                break
            time.sleep(0.01)
        self.stop()
        raise RuntimeError(f"docker-registry did not start: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def self_signed_certificate(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 that is its own CA, and its key: (cert.pem, key.pem) in `folder`."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    folder.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "weightkit-test-registry")])
    now = datetime.datetime.now(datetime.timezone.utc)
    public = key.public_key()
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(public).serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public), critical=False)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, content_commitment=False,
                                     key_encipherment=False, data_encipherment=False, key_agreement=False,
                                     crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


class TokenServer:
    """The docker token spec: Basic alice/secret gets every action asked, anonymous gets pull only, a wrong
    password a 401. With `ollama_key` (an Ed25519 public key) it wants Ollama's signature instead, checked
    with `cryptography` over the URL it received, and grants everything to a good one."""

    def __init__(self, ollama_key: bytes | None = None) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
        from cryptography.x509.oid import NameOID

        self.ollama_key = ollama_key
        self.requests: list[dict] = []
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "weightkit-test-token")])
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(self._key.public_key())
                .serial_number(1).not_valid_before(now - datetime.timedelta(days=1))
                .not_valid_after(now + datetime.timedelta(days=1)).sign(self._key, hashes.SHA256()))  # fmt: skip
        self.cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        self._x5c = base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                status, body = server.answer(self.path, self.headers)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self._http = _Server(("127.0.0.1", 0), Handler)
        self.port = self._http.server_address[1]
        threading.Thread(target=self._http.serve_forever, args=(0.05,), daemon=True).start()

    def answer(self, path: str, headers) -> tuple[int, bytes]:
        query = parse_qs(urlsplit(path).query)
        auth = headers.get("Authorization") or ""
        self.requests.append({"path": path, "authorization": auth, "host": headers.get("Host")})
        scopes = [s for scope in query.get("scope", []) for s in scope.split()]
        if self.ollama_key is not None:
            if not self._signed_ok(path, headers.get("Host"), auth, query):
                return 401, b'{"details": "bad signature"}'
            granted = scopes
        elif auth.startswith("Basic "):
            if base64.b64decode(auth[6:]) != f"{USER}:{PASSWORD}".encode():
                return 401, b'{"details": "wrong user name or password"}'
            granted = scopes
        else:
            granted = [f"{s.rpartition(':')[0]}:pull" for s in scopes if "pull" in s.rpartition(":")[2].split(",")]
        token = self._jwt(granted)
        return 200, json.dumps({"token": token, "access_token": token, "expires_in": 300}).encode()

    def _signed_ok(self, path: str, host: str | None, auth: str, query: dict) -> bool:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        public_b64, _, signature = auth.partition(":")
        try:
            wire = base64.b64decode(public_b64)
            if wire[-32:] != self.ollama_key or "ts" not in query or "nonce" not in query:
                return False
            zero = base64.b64encode(hashlib.sha256(b"").hexdigest().encode()).decode()
            data = f"GET,http://{host}{path},{zero}".encode()
            Ed25519PublicKey.from_public_bytes(self.ollama_key).verify(base64.b64decode(signature), data)
        except (ValueError, InvalidSignature):
            return False
        return True

    def _jwt(self, scopes: list[str]) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        access = []
        for scope in scopes:
            resource, _, actions = scope.rpartition(":")
            kind, _, name = resource.partition(":")
            access.append({"type": kind, "name": name, "actions": actions.split(",")})
        now = int(time.time())
        claims = {"iss": ISSUER, "sub": USER, "aud": SERVICE, "exp": now + 300, "nbf": now - 10, "iat": now,
                  "jti": uuid.uuid4().hex, "access": access}  # fmt: skip
        header = {"typ": "JWT", "alg": "RS256", "x5c": [self._x5c]}
        signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        signature = self._key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64url(signature)}"

    def registry_auth(self, workdir: Path, realm: str) -> dict:
        """docker-registry's auth section for this server at `realm`."""
        workdir.mkdir(parents=True, exist_ok=True)
        bundle = workdir / "token-cert.pem"
        bundle.write_bytes(self.cert_pem)
        return {"token": {"realm": realm, "service": SERVICE, "issuer": ISSUER, "rootcertbundle": str(bundle)}}

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()


@dataclass
class Faults:
    """What the proxy does to the responses it relays."""

    cut_after: int | None = None  # close the blob body that reaches this many blob bytes relayed (once)
    corrupt_at: int | None = None  # flip the byte at this offset of every blob body that holds it
    fail: list[tuple[str, int, int]] = field(default_factory=list)  # (path fragment, status, times)
    retry_after: int | None = None  # sent with the failures
    rate: float | None = None  # bytes per second of blob bodies
    blobs: str = "/blobs/sha256:"  # the paths whose GET bodies are blob bodies


class Proxy:
    """A reverse proxy (keeping the Host header, so the registry's Locations point back at it) that counts blob
    bytes, logs every request, and injects `faults`. `routes` sends a path prefix to another upstream."""

    def __init__(self, upstream_port: int | None = None, routes: dict[str, int] | None = None) -> None:
        self.upstream_port = upstream_port
        self.routes = routes or {}
        self.faults = Faults()
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.blob_bytes = 0
        self._generation = 0
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _relay(self) -> None:
                proxy.relay(self)

            do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _relay

            def log_message(self, *args) -> None:
                pass

        self._http = _Server(("127.0.0.1", 0), Handler)
        self.port = self._http.server_address[1]
        self.host = f"127.0.0.1:{self.port}"
        threading.Thread(target=self._http.serve_forever, args=(0.05,), daemon=True).start()

    def blob_gets(self) -> list[dict[str, str]]:
        return [h for m, p, h in self.requests if m == "GET" and "/blobs/sha256:" in p]

    def relay(self, handler: BaseHTTPRequestHandler) -> None:
        try:
            self._relay(handler)
        except (BrokenPipeError, ConnectionResetError):
            handler.close_connection = True  # the client went away (killed, or it dropped the connection)

    def _relay(self, handler: BaseHTTPRequestHandler) -> None:
        method, path = handler.command, handler.path
        generation = self._generation
        headers = {k: v for k, v in handler.headers.items()}
        with self._lock:
            self.requests.append((method, path, headers))
            failure = next((f for f in self.faults.fail if f[0] in path and f[2] > 0), None)
            if failure:
                self.faults.fail[self.faults.fail.index(failure)] = (failure[0], failure[1], failure[2] - 1)
        length = int(headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else None
        if failure:
            message = b'{"errors":[{"code":"UNAVAILABLE","message":"injected"}]}'
            handler.send_response(failure[1])
            if self.faults.retry_after is not None:
                handler.send_header("Retry-After", str(self.faults.retry_after))
            handler.send_header("Content-Length", str(len(message)))
            handler.end_headers()
            handler.wfile.write(message)
            return
        port = next((p for prefix, p in self.routes.items() if path.startswith(prefix)), self.upstream_port)
        upstream = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        upstream.request(method, path, body=body, headers=headers)
        response = upstream.getresponse()
        handler.send_response_only(response.status, response.reason)
        hop = {"connection", "transfer-encoding", "keep-alive"}
        data = None if response.getheader("Content-Length") is not None or method == "HEAD" else response.read()
        for key, value in response.getheaders():
            if key.lower() not in hop and not (data is not None and key.lower() == "content-length"):
                handler.send_header(key, value)
        if data is not None:
            handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if method == "HEAD":
            upstream.close()
            return
        is_blob = method == "GET" and self.faults.blobs in path and response.status in (200, 206)
        offset = _range_start(response.getheader("Content-Range"))
        for chunk in [data] if data is not None else iter(lambda: response.read(64 << 10), b""):
            cut = False
            if is_blob:
                chunk, cut = self._fault(chunk, offset, generation)
            handler.wfile.write(chunk)
            offset += len(chunk)
            if cut:  # close after what was sent: the client sees the body end early
                handler.wfile.flush()
                handler.connection.shutdown(socket.SHUT_WR)
                handler.close_connection = True
                break
            if is_blob and self.faults.rate:
                time.sleep(len(chunk) / self.faults.rate)
        upstream.close()

    def _fault(self, chunk: bytes, offset: int, generation: int) -> tuple[bytes, bool]:
        """The chunk at `offset` of a blob body with the faults applied, counted (unless a `reset` came since its
        request began); and whether to cut here."""
        faults, cut = self.faults, False
        with self._lock:
            if faults.cut_after is not None and self.blob_bytes + len(chunk) >= faults.cut_after:
                chunk, cut = chunk[: faults.cut_after - self.blob_bytes], True
                faults.cut_after = None
            if generation == self._generation:
                self.blob_bytes += len(chunk)
        if faults.corrupt_at is not None and offset <= faults.corrupt_at < offset + len(chunk):
            i = faults.corrupt_at - offset
            chunk = chunk[:i] + bytes([chunk[i] ^ 0xFF]) + chunk[i + 1 :]
        return chunk, cut

    def reset(self) -> None:
        """No faults, nothing counted."""
        with self._lock:
            self.faults = Faults()
            self.requests.clear()
            self.blob_bytes = 0
            self._generation += 1

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()


def _range_start(content_range: str | None) -> int:
    if not content_range:
        return 0
    return int(content_range.split(" ")[1].split("-")[0])


def have_servers() -> bool:
    return shutil.which("docker-registry") is not None

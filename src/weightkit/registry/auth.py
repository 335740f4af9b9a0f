"""Registry authentication: answering a 401's WWW-Authenticate with Basic or a bearer token (the docker token
spec, or Ollama's signed variant), and finding the credentials to do it with.

Credentials go only to the registry's own origin and to the token server its challenge names (as docker
sends them); never over plain HTTP unless the registry itself is spoken to over plain HTTP (--insecure).
Ollama's key signs only for the registries in `RegistryOptions.signed_hosts`, and only when the token server
is on the registry's own host and port (as Ollama since its fix of CVE-2025-51471).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import threading
import time
from pathlib import Path
from urllib.parse import parse_qsl, quote_plus, urlsplit, urlunsplit

from ..errors import RegistryAuthError, RegistryError
from ..net.http import ExchangeFailed, HttpClient, server_message
from .ollama_key import OllamaKey, default_key_path, signed_params
from .options import Credentials, RegistryOptions

USER_VARIABLE, PASSWORD_VARIABLE = "WEIGHTKIT_REGISTRY_USER", "WEIGHTKIT_REGISTRY_PASSWORD"
_TOKEN_LIMIT = 1 << 20
_DEFAULT_TOKEN_LIFE = 60  # seconds, when the token server does not say (docker token spec)
# One item of a WWW-Authenticate header: a scheme (no value) or a parameter `key=value` / `key="value"`.
_ITEM = re.compile(r'[\s,]*([!#$%&\'*+.^_`|~0-9A-Za-z-]+)(?:\s*=\s*("(?:[^"\\]|\\.)*"|[^\s,]*))?')


def parse_challenges(header: str) -> list[tuple[str, dict[str, str]]]:
    """The challenges of a WWW-Authenticate header: [(scheme in lowercase, {parameter: value})]."""
    challenges: list[tuple[str, dict[str, str]]] = []
    at = 0
    while (match := _ITEM.match(header, at)) and match.end() > at:
        key, value = match.groups()
        if value is None:
            challenges.append((key.lower(), {}))
        elif challenges:
            if value.startswith('"'):
                value = re.sub(r"\\(.)", r"\1", value[1:-1])
            challenges[-1][1][key.lower()] = value
        at = match.end()
    return challenges


def find_credentials(host: str, docker_config: Path | None = None) -> tuple[Credentials | None, str]:
    """Credentials for `host` (host[:port]): $WEIGHTKIT_REGISTRY_USER and $WEIGHTKIT_REGISTRY_PASSWORD, else
    docker's config.json `auths` entry for the host; and a hint for a message when there are none usable."""
    user, password = os.environ.get(USER_VARIABLE), os.environ.get(PASSWORD_VARIABLE)
    if user is not None or password is not None:
        if not (user and password is not None):
            raise RegistryAuthError(f"set both {USER_VARIABLE} and {PASSWORD_VARIABLE}, or neither")
        return Credentials(user, password, f"{USER_VARIABLE}/{PASSWORD_VARIABLE}"), ""
    path = docker_config or Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker") / "config.json"
    try:
        config = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None, ""
    except (OSError, ValueError) as e:
        raise RegistryAuthError(f"cannot read {path}: {getattr(e, 'strerror', None) or 'not JSON'}") from None
    auths = config.get("auths") if isinstance(config, dict) else None
    for key, entry in (auths or {}).items() if isinstance(auths, dict) else ():
        if _config_host(key) == host and isinstance(entry, dict) and isinstance(entry.get("auth"), str):
            try:
                user, _, password = base64.b64decode(entry["auth"], validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                raise RegistryAuthError(f"{path}: the auth entry for {host} is not base64 of user:password") from None
            return Credentials(user, password.strip("\x00"), str(path)), ""
    helpers = config.get("credHelpers") if isinstance(config, dict) else None
    if config.get("credsStore") or (isinstance(helpers, dict) and host in helpers):
        return None, f" ({path} leaves {host}'s credentials to a credential helper, which weightkit does not run)"
    return None, ""


def _config_host(key: str) -> str:
    """A config.json `auths` key as docker/cli's ConvertToHostname reads it: scheme and path dropped."""
    return key.split("://", 1)[-1].split("/", 1)[0]


class Authenticator:
    """The Authorization a registry's requests carry (held by the HTTP client for the registry's origin),
    renewed when a 401 challenges it. Shared by the threads of a pull: a request notes the `generation` it
    was sent with, and a challenge to an older generation than the latest is already answered."""

    def __init__(self, origin: str, http: HttpClient, options: RegistryOptions) -> None:
        self.origin = origin
        self.host = urlsplit(origin).netloc
        self._http = http
        self._options = options
        self._lock = threading.Lock()
        self._generation = 0
        self._header = ""  # the Authorization value sent now
        self._scopes: dict[str, set[str]] = {}  # resource -> actions, of every challenge so far
        self._token_scopes: dict[str, set[str]] | None = None  # what the current token was asked for
        self._token_expires = 0.0
        self._found: tuple[Credentials | None, str] | None = None

    @property
    def generation(self) -> int:
        with self._lock:
            return self._generation

    def challenge(self, header: str | None, generation: int) -> None:
        """Answer a 401 to a request sent with `generation`'s header; raises RegistryAuthError when nothing
        new can be tried (no credentials, or these were refused)."""
        with self._lock:
            if generation != self._generation:
                return  # another thread has answered it already
            challenges = dict(parse_challenges(header or ""))
            if "bearer" in challenges:
                self._bearer(challenges["bearer"])
            elif "basic" in challenges:
                self._basic()
            else:
                raise RegistryAuthError(f"{self.host} asks for an authentication weightkit does not speak: {header!r}")
            self._http.authorize(self.origin, self._header)
            self._generation += 1

    def _credentials(self) -> tuple[Credentials | None, str]:
        if self._found is None:
            given = self._options.credentials
            self._found = (given, "") if given else find_credentials(self.host, self._options.docker_config)
        return self._found

    def _login_needed(self, what: str) -> RegistryAuthError:
        hint = self._credentials()[1]
        return RegistryAuthError(
            f"{self.host} {what}: set {USER_VARIABLE} and {PASSWORD_VARIABLE}, or `docker login {self.host}`{hint}"
        )

    def _basic(self) -> None:
        credentials = self._credentials()[0]
        if credentials is None:
            raise self._login_needed("requires a login")
        if self._header:
            raise RegistryAuthError(f"{self.host} refused the user name and password from {credentials.source}")
        self._header = _basic(credentials)

    def _bearer(self, params: dict[str, str]) -> None:
        realm = params.get("realm", "")
        if urlsplit(realm).scheme not in ("http", "https"):
            raise RegistryAuthError(f"{self.host} names no usable token server (realm {realm!r})")
        asked = []  # this challenge's scopes, their actions in a stable order (registries vary it)
        for scope in params.get("scope", "").split():
            resource, _, actions = scope.rpartition(":")
            wanted = sorted(a for a in actions.split(",") if a)
            self._scopes.setdefault(resource, set()).update(wanted)
            asked.append(f"{resource}:{','.join(wanted)}")
        fresh = time.monotonic() < self._token_expires
        if self._token_scopes == self._scopes and fresh:
            credentials = self._credentials()[0]
            denied = f"denied {' '.join(asked) or 'access'}"
            if credentials is None:
                raise self._login_needed(denied)
            raise RegistryAuthError(f"{self.host} {denied} to the credentials from {credentials.source}")
        token, life = self._fetch_token(realm, params.get("service"))
        self._header = f"Bearer {token}"
        self._token_scopes = {k: set(v) for k, v in self._scopes.items()}
        self._token_expires = time.monotonic() + life

    def _fetch_token(self, realm: str, service: str | None) -> tuple[str, float]:
        """A token for every scope asked so far (docker token spec): a token server's refusal is final."""
        params = [("service", service)] if service is not None else []
        params += [("scope", f"{name}:{','.join(sorted(actions))}") for name, actions in sorted(self._scopes.items())]
        signed = self.host in self._options.signed_hosts and urlsplit(realm).netloc == self.host
        url = token_url(realm, params + (signed_params() if signed else []))
        headers, refusal = self._token_authorization(url, signed)
        with self._http.request("GET", url, headers, stored_credentials=False) as response:
            body = response.read(_TOKEN_LIMIT) if response.status == 200 else response.error_body()
        if response.status in (401, 403):
            raise refusal
        if response.status >= 500:
            raise ExchangeFailed(f"{self.host}'s token server answered {response.status}", transient=True)
        if response.status != 200:
            said = server_message(response, body)
            raise RegistryError(f"{self.host}'s token server answered {response.status}: {said}")
        try:
            doc = json.loads(body)
            token = doc.get("token") or doc["access_token"]
            life = float(doc.get("expires_in") or _DEFAULT_TOKEN_LIFE)
        except (ValueError, KeyError, TypeError, AttributeError):
            raise RegistryError(f"{self.host}'s token server answered no token") from None
        if not isinstance(token, str) or not token:
            raise RegistryError(f"{self.host}'s token server answered no token")
        return token, max(life, _DEFAULT_TOKEN_LIFE) - 5

    def _token_authorization(self, url: str, signed: bool) -> tuple[dict[str, str], RegistryAuthError]:
        """How the token request to `url` proves who asks (Ollama's signature, Basic credentials, or nothing),
        and the error a refusal of it means."""
        if signed:
            key_path = self._options.ollama_key or default_key_path()
            if not key_path.exists():
                return {}, RegistryAuthError(f"{self.host} wants requests signed with Ollama's key: none at {key_path}")
            refused = f"{self.host} refused the request signed with {key_path} (is its public key on your account?)"
            return {"Authorization": OllamaKey.load(key_path).authorization(url)}, RegistryAuthError(refused)
        credentials = self._credentials()[0]
        if credentials is None:
            return {}, self._login_needed("requires a login")
        if urlsplit(url).scheme != "https" and urlsplit(self.origin).scheme == "https":
            raise RegistryAuthError(f"{self.host}'s token server is plain HTTP: not sending credentials there")
        refused = f"{self.host}'s token server refused the credentials from {credentials.source}"
        return {"Authorization": _basic(credentials)}, RegistryAuthError(refused)


def _basic(credentials: Credentials) -> str:
    return "Basic " + base64.b64encode(f"{credentials.username}:{credentials.password}".encode()).decode()


def token_url(realm: str, params: list[tuple[str, str]]) -> str:
    """The realm with `params` added to its query, encoded as Go's url.Values.Encode (sorted by key, stably,
    each part `quote_plus`ed): the exact URL Ollama signs."""
    parts = urlsplit(realm)
    pairs = sorted(parse_qsl(parts.query, keep_blank_values=True) + params, key=lambda kv: kv[0])
    query = "&".join(f"{quote_plus(k)}={quote_plus(v)}" for k, v in pairs)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, ""))

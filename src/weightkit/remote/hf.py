"""`hf://org/repo[@revision]/path`: files of Hugging Face model repositories, by their resolve URLs.

The endpoint is $HF_ENDPOINT (a mirror) or https://huggingface.co; $HF_TOKEN goes to that endpoint as a
bearer token, and to no other host (the CDN its resolve URLs redirect to gets signed links instead). A file is
read at the commit its revision was when first read (the hub's X-Repo-Commit), and so are the files beside it.
"""

from __future__ import annotations

import os
import re
from urllib.parse import quote

from ..errors import ArgumentError
from ..net.http import HttpClient, Response

SCHEME = "hf://"
DEFAULT_ENDPOINT = "https://huggingface.co"
# A revision may hold slashes only in these forms (huggingface_hub's hf:// parser); else it ends at the first.
_URI = re.compile(
    r"(?P<repo>[\w.-]+/[\w.-]+)(?:@(?P<revision>refs/(?:convert/[\w.-]+|pr/\d+)|[^/]+))?/(?P<path>[^/].*)"
)
_OTHER_REPO_TYPES = ("datasets", "spaces", "buckets", "kernels")
_COMMIT = re.compile(r"[0-9a-f]{40}")


def endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def resolve_url(uri: str, commit: str | None = None) -> str:
    """{endpoint}/{org}/{repo}/resolve/{revision}/{path} for hf://org/repo[@revision]/path (revision: main, or
    `commit` when given)."""
    rest = uri[len(SCHEME) :]
    m = _URI.fullmatch(rest)
    if m is None or rest.partition("/")[0] in _OTHER_REPO_TYPES:
        raise ArgumentError(f"{uri!r}: expected hf://org/repo[@revision]/path to a file of a model repository")
    revision = quote(commit or m["revision"] or "main", safe="")
    return f"{endpoint()}/{m['repo']}/resolve/{revision}/{quote(m['path'])}"


def at_commit(uri: str, response: Response) -> str | None:
    """The resolve URL of `uri` at the commit the hub answered its first read from (X-Repo-Commit, on the
    redirect to the CDN or on the answer itself), or None if it did not say (a mirror may not)."""
    commit = (response.first_header("X-Repo-Commit") or "").strip()
    return resolve_url(uri, commit) if _COMMIT.fullmatch(commit) else None


def authorize(client: HttpClient) -> None:
    """Let `client` send $HF_TOKEN, if set, to the Hugging Face endpoint (and only there)."""
    token = os.environ.get("HF_TOKEN")
    if token:
        client.authorize(endpoint(), f"Bearer {token}")

"""Reading models over HTTP without downloading them: headers by range requests, tensors when asked for.

`weightkit.open(url)` comes here for http(s):// URLs and hf:// URIs, and `weightkit.open(name, remote=True)`
for a registry's model names.
"""

from ..net.http import HttpClient
from .open import open_remote
from .source import MAX_HEADER_BYTES, RemoteFile

__all__ = ["MAX_HEADER_BYTES", "HttpClient", "RemoteFile", "open_remote"]

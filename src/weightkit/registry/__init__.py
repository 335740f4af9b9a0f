"""Pull and push models over Ollama's registry protocol (OCI distribution v2), against any registry.

    from weightkit.registry import pull, push
    pull("gemma3:270m")                                   # registry.ollama.ai/library/gemma3:270m
    pull("127.0.0.1:5000/team/tiny:v1", store=Store("models"), insecure=True)
    push("registry.example.com/team/tiny:v1")

Modules: `reference` (names to URLs), `auth` (challenges, Basic, tokens, credentials), `ollama_key` and
`ed25519` (Ollama's signed token requests), `client` (the protocol's requests, over `weightkit.net.http`),
`download` (resumable parallel ranged downloads), `pull` and `push`.
"""

from .options import Credentials, RegistryOptions
from .pull import BlobResult, TransferResult, pull
from .push import push
from .reference import Reference, parse_reference

__all__ = [
    "BlobResult",
    "Credentials",
    "Reference",
    "RegistryOptions",
    "TransferResult",
    "parse_reference",
    "pull",
    "push",
]

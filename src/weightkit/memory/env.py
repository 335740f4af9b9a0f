"""The one place the memory planner reads the environment: Ollama's variables, with Ollama's grammar.

Ollama's `envconfig` trims whitespace and then any quote characters from a value (`Var`). Booleans are Go's
`strconv.ParseBool` ("1", "t", "T", "TRUE", "true", "True" and the same for false), and a value it cannot
parse counts as true (`BoolWithDefault`). Unsigned integers are `strconv.ParseUint` in base 10: digits only,
at most 2**64 - 1; anything else (a sign, a unit, an underscore) is ignored and the default used.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

_U64 = (1 << 64) - 1
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


@dataclass(frozen=True)
class OllamaEnv:
    """Ollama's variables that bear on memory, with its defaults for unset ones."""

    context_length: int = 0  # OLLAMA_CONTEXT_LENGTH; 0: the VRAM-tier default
    num_parallel: int = 1  # OLLAMA_NUM_PARALLEL
    flash_attention: bool = False  # OLLAMA_FLASH_ATTENTION
    kv_cache_type: str = ""  # OLLAMA_KV_CACHE_TYPE, lowercased; "": f16
    gpu_overhead: int = 0  # OLLAMA_GPU_OVERHEAD, bytes kept free on every GPU
    sched_spread: bool = False  # OLLAMA_SCHED_SPREAD: spread layers over every GPU


def _var(environ: Mapping[str, str], key: str) -> str:
    return environ.get(key, "").strip().strip("\"'")


def _uint(environ: Mapping[str, str], key: str, default: int) -> int:
    raw = _var(environ, key)
    if re.fullmatch(r"[0-9]+", raw) and int(raw) <= _U64:
        return int(raw)
    return default


def _bool(environ: Mapping[str, str], key: str) -> bool:
    raw = _var(environ, key)
    return bool(raw) and raw not in _GO_FALSE  # unparsable counts as true


def ollama_env(environ: Mapping[str, str] | None = None) -> OllamaEnv:
    """Read Ollama's variables from `environ` (default: `os.environ`)."""
    env = os.environ if environ is None else environ
    return OllamaEnv(
        context_length=_uint(env, "OLLAMA_CONTEXT_LENGTH", 0),
        num_parallel=max(_uint(env, "OLLAMA_NUM_PARALLEL", 1), 1),
        flash_attention=_bool(env, "OLLAMA_FLASH_ATTENTION"),
        kv_cache_type=_var(env, "OLLAMA_KV_CACHE_TYPE").lower(),
        gpu_overhead=_uint(env, "OLLAMA_GPU_OVERHEAD", 0),
        sched_spread=_bool(env, "OLLAMA_SCHED_SPREAD"),
    )

"""Ollama's variables, read in one place with Ollama's grammar (envconfig: Var, ParseBool, ParseUint)."""

from __future__ import annotations

import pytest

from weightkit.memory.env import OllamaEnv, ollama_env

GiB = 1 << 30


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, OllamaEnv()),
        ({"OLLAMA_GPU_OVERHEAD": "1073741824"}, OllamaEnv(gpu_overhead=GiB)),
        ({"OLLAMA_GPU_OVERHEAD": ' "512" '}, OllamaEnv(gpu_overhead=512)),  # spaces, then quotes, trimmed
        ({"OLLAMA_GPU_OVERHEAD": "1GB"}, OllamaEnv()),
        ({"OLLAMA_GPU_OVERHEAD": "-5"}, OllamaEnv()),
        ({"OLLAMA_GPU_OVERHEAD": str(1 << 64)}, OllamaEnv()),  # past uint64
        ({"OLLAMA_CONTEXT_LENGTH": "8_192"}, OllamaEnv()),  # Python's int() would take it; Go's ParseUint does not
        ({"OLLAMA_CONTEXT_LENGTH": "+8192"}, OllamaEnv()),
        ({"OLLAMA_CONTEXT_LENGTH": "8192"}, OllamaEnv(context_length=8192)),
        ({"OLLAMA_NUM_PARALLEL": "0"}, OllamaEnv(num_parallel=1)),
        ({"OLLAMA_NUM_PARALLEL": "4"}, OllamaEnv(num_parallel=4)),
        ({"OLLAMA_SCHED_SPREAD": "1"}, OllamaEnv(sched_spread=True)),
        ({"OLLAMA_SCHED_SPREAD": "false"}, OllamaEnv()),
        ({"OLLAMA_SCHED_SPREAD": "F"}, OllamaEnv()),
        ({"OLLAMA_SCHED_SPREAD": ""}, OllamaEnv()),
        ({"OLLAMA_SCHED_SPREAD": "yes"}, OllamaEnv(sched_spread=True)),  # Go: unparsable counts as true
        ({"OLLAMA_FLASH_ATTENTION": "no"}, OllamaEnv(flash_attention=True)),  # the same grammar for every bool
        ({"OLLAMA_FLASH_ATTENTION": "FALSE"}, OllamaEnv()),
        ({"OLLAMA_KV_CACHE_TYPE": " 'Q8_0' "}, OllamaEnv(kv_cache_type="q8_0")),
    ],
)
def test_ollama_env(environ, expected):
    assert ollama_env(environ) == expected


def test_reads_os_environ(monkeypatch):
    monkeypatch.setenv("OLLAMA_GPU_OVERHEAD", "7")
    monkeypatch.setenv("OLLAMA_SCHED_SPREAD", "true")
    assert ollama_env() == OllamaEnv(gpu_overhead=7, sched_spread=True)

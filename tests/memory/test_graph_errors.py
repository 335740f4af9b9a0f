"""Missing or malformed metadata: a clear `FormatError` (a `WeightkitError`) where Ollama would panic or
silently use a default; bad arguments: `ValueError`."""

from __future__ import annotations

import numpy as np
import pytest

from weightkit.errors import FormatError, WeightkitError
from weightkit.gguf import GGUFValueType, Value
from weightkit.memory.ollama.graph import graph_size, kv_cache_sizes

from .test_graph import SMALL, builder, i32s, u32s

T = GGUFValueType


@pytest.fixture
def build(tmp_path):
    yield from builder(tmp_path)


def raises(match: str):
    return pytest.raises(FormatError, match=match)


def test_missing_vocabulary(build):
    m = build("llama", SMALL, vocab=None)
    # Ollama panics on the type assertion; weightkit names the key and the file
    with raises("tokenizer.ggml.tokens is missing") as exc:
        graph_size(m, 1024)
    assert isinstance(exc.value, WeightkitError) and exc.value.path == str(m.path)
    # the KV cache does not need the vocabulary
    assert kv_cache_sizes(m, 1024) == [1024 * 128 * 2 * 2] * 2


def test_vocabulary_not_strings(build):
    m = build("llama", SMALL, vocab=None, extra={"tokenizer.ggml.tokens": i32s([1, 2, 3])})
    with raises(r"tokenizer.ggml.tokens is \*array\[int32\]"):
        graph_size(m, 1024)


def test_missing_architecture_or_block_count(build):
    m = build("llama", {}, extra={"general.architecture": Value(3, T.UINT32)})
    with raises("general.architecture is uint32"):
        graph_size(m, 1024)
    m = build("llama", {k: v for k, v in SMALL.items() if k != "block_count"})
    with raises("llama.block_count is missing"):
        kv_cache_sizes(m, 1024)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("block_count", Value(2, T.UINT64), r"llama.block_count is uint64; Ollama reads it only as uint32"),
        ("embedding_length", Value(512, T.INT32), r"llama.embedding_length is int32"),
        ("attention.head_count", Value(8.0, T.FLOAT32), r"llama.attention.head_count is float32"),
        ("attention.head_count_kv", Value(np.array([2, 2], np.uint64), T.ARRAY, T.UINT64), r"\*array\[uint64\]"),
        ("attention.head_count", u32s([]), "empty array"),
        ("attention.key_length", Value("64", T.STRING), "key_length is string"),
    ],
)
def test_wrongly_typed_keys(build, key, value, message):
    m = build("llama", {**SMALL, key: value})
    with raises(message):
        graph_size(m, 1024)


def test_cross_attention_layers_must_be_int32(build):
    m = build("mllama", {**SMALL, "attention.cross_attention_layers": u32s([1])})
    with raises(r"cross_attention_layers is \*array\[uint32\]; Ollama reads it only as \*array\[int32\]"):
        graph_size(m, 1024)


def test_ssm_keys_typed_only_when_read(build):
    bad = {**SMALL, "ssm.state_size": Value(16, T.UINT64)}
    assert kv_cache_sizes(build("llama", bad), 8) == [8 * 128 * 2 * 2] * 2  # no recurrent layer: not read
    with raises("ssm.state_size is uint64"):
        kv_cache_sizes(build("llama", {**bad, "attention.head_count_kv": u32s([0, 2])}), 8)


def test_go_panics_become_errors(build):
    # Mixtral 8x7B case with no heads: Go divides by zero
    no_heads = {**SMALL, "attention.head_count": 0}
    m = build("llama", no_heads, tensors=[("blk.0.ffn_gate.0.weight", (64, 32), "F32")])
    with raises("division by zero"):
        graph_size(m, 1024)
    # Shape[1] of a one-dimensional tensor: Go's index out of range
    m = build("llama", SMALL, tensors=[("blk.0.ffn_gate.0.weight", (64,), "F32")])
    with raises(r"blk.0.ffn_gate.0.weight has 1 dimensions; Ollama reads Shape\[1\]"):
        graph_size(m, 1024)


def test_bad_arguments(build):
    m = build("llama", SMALL)
    with pytest.raises(ValueError, match="unknown KV cache type 'q5_1'"):
        graph_size(m, 1024, kv_cache_type="q5_1")
    with pytest.raises(ValueError, match="context"):
        graph_size(m, -1)
    with pytest.raises(ValueError, match="parallel"):
        kv_cache_sizes(m, 1024, 1.5)
    with pytest.raises(ValueError, match="flash_attention"):
        graph_size(m, 1024, flash_attention="yes")


def test_implausible_block_count(build):
    m = build("llama", {**SMALL, "block_count": 1 << 17})
    with raises("llama.block_count is 131072: more layers than weightkit believes"):
        kv_cache_sizes(m, 1024)


def test_numpy_integers_are_accepted(build):
    m = build("llama", SMALL)
    assert kv_cache_sizes(m, np.int64(1024), np.uint32(1)) == [1024 * 128 * 2 * 2] * 2

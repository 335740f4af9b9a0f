"""The small GGUF files that `weightkit split`, `merge` and `edit` are compared on, made the same way by the tests
and by tests/data/make_gguf_tools_golden.py, which records what llama-gguf-split and gguf_new_metadata.py write
from them (tests/data/gguf_tools_golden.json holds each input's sha256, so drift is caught)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from weightkit.gguf import GGUFFile, GGUFValueType, GGUFWriter, Value

_T = GGUFValueType

#: (name, GGML type, shape in numpy order): 2.4 MB of data in sizes that make --split-max-size 1M cut between
#: tensors, a 1-D tensor whose 12 bytes need padding, and quantized types.
TENSORS = (
    ("token_embd.weight", "F16", (256, 1024)),
    ("blk.0.attn_q.weight", "Q8_0", (256, 1024)),
    ("blk.0.attn_norm.weight", "F32", (3,)),
    ("blk.0.ffn_up.weight", "F32", (256, 512)),
    ("blk.1.attn_q.weight", "Q4_K", (512, 1024)),
    ("blk.1.attn_norm.weight", "F32", (1024,)),
    ("blk.1.ffn_up.weight", "F16", (300, 512)),
    ("output_norm.weight", "F32", (1024,)),
    ("output.weight", "Q8_0", (256, 1024)),
)

#: A chat template file with a Windows line end, which both tools read with Python's universal newlines.
TEMPLATE = "{% for m in messages %}<|im_start|>{{ m.role }}\r\n{{ m.content }}<|im_end|>\n{% endfor %}"

TOKENS = ["<unk>", "<s>", "</s>", "hello", "world", "<|im_start|>", "<|im_end|>", "\u2581the"]


def tools_model(path: Path) -> Path:
    """A small llama-like GGUF with metadata of every kind a model has and random tensor bytes."""
    metadata = {
        "general.architecture": "llama",
        "general.name": "tools test",
        "general.file_type": Value(7, _T.UINT32),
        "llama.block_count": Value(2, _T.UINT32),
        "llama.rope.freq_base": Value(10000.0, _T.FLOAT32),
        "llama.attention.layer_norm_rms_epsilon": Value(1e-5, _T.FLOAT32),
        "llama.use_parallel_residual": Value(True, _T.BOOL),
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": Value(TOKENS, _T.ARRAY, _T.STRING),
        "tokenizer.ggml.scores": Value(np.linspace(0, -7, len(TOKENS), dtype=np.float32), _T.ARRAY, _T.FLOAT32),
        "tokenizer.ggml.token_type": Value(np.array([2, 3, 3, 1, 1, 4, 4, 1], np.int32), _T.ARRAY, _T.INT32),
        "tokenizer.ggml.bos_token_id": Value(1, _T.UINT32),
        "tokenizer.ggml.eos_token_id": Value(2, _T.UINT32),
        "tokenizer.chat_template": "{% for m in messages %}{{ m['content'] }}{% endfor %}",
        "general.tags": Value(["a", "b"], _T.ARRAY, _T.STRING),
    }
    rng = np.random.default_rng(29)
    with GGUFWriter(path, metadata) as w:
        planned = [w.add_tensor_info(name, shape, dtype) for name, dtype, shape in TENSORS]
        for t in planned:
            w.write_tensor(t.name, rng.integers(0, 256, t.nbytes, dtype=np.uint8))
    return path


def structure(path: Path) -> dict:
    """A file's name, metadata keys with their types, and tensor names: what the golden records beside each
    file's digest, so a mismatch shows where it is."""
    with GGUFFile(path) as f:
        keys = [
            [key, value.type.name if value.element is None else f"ARRAY[{value.element.name}]"]
            for key, value in f.metadata.typed_items()
        ]
        return {"name": path.name, "keys": keys, "tensors": list(f.tensors)}

"""Records what Ollama's Go GGUF writer (fs/ggml.WriteGGUF, as server/create.go's copySplitLayerPreservingTensors
calls it) makes of tiny split GGUFs that carry compatibility tensors (`v.`, `mm.`, `s.`, `a.`, `mtp.`): a model
and a draft with metadata of every type Ollama's decoder gives a Go type its writer takes, an FP8-sourced
model, and cases with the types it refuses ("improper type") or no architecture ("architecture not set").

`write_case(case, folder)` writes a case's shards deterministically (weightkit's split writer, numpy data from a
fixed rule); tests/ollama/test_store.py rebuilds them with it and checks the shards' sha256 before comparing.
The Go side is make_ollama_split_gguf.go, built in a scratch module holding Ollama's fs, ml, format and logutil
packages (docs/contributing.md says how). Output: ollama_split_gguf.json.

Run from the repository: PYTHONPATH=src python tests/data/make_ollama_split_gguf.py GO SCRATCH_MODULE
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from weightkit.gguf import GGUFValueType, Value, plan_tensor, write_split
from weightkit.gguf.values import typed_array

T = GGUFValueType
OLLAMA_COMMIT = "fb30760996871fa9460115c753afd2c60d4ab0f7"

# Metadata of every type Ollama's writer takes, and keys outside ARCH./general./adapter./tokenizer. that it
# renames under the architecture.
_WRITABLE = {
    "general.architecture": "llama",
    "general.name": "tiny",
    "general.file_type": Value(1, T.UINT32),
    "general.quantization_version": Value(2, T.UINT32),
    "llama.block_count": Value(11, T.UINT32),
    "llama.context_length": Value(-5, T.INT32),
    "llama.embedding_length": Value(2**40, T.UINT64),
    "llama.rope.freq_base": Value(10000.5, T.FLOAT32),
    "llama.attention.layer_norm_rms_epsilon": Value(-(2**40), T.INT64),
    "llama.use_parallel_residual": Value(True, T.BOOL),
    "llama.head_counts": typed_array([4, 2], T.INT32),
    "llama.sizes": typed_array([7, 8, 9], T.UINT32),
    "llama.big": typed_array([-(2**40)], T.INT64),
    "llama.scales": typed_array([0.5, -1.25], T.FLOAT32),
    "llama.flags": typed_array([True, False], T.BOOL),
    "tokenizer.ggml.model": "gpt2",
    "tokenizer.ggml.tokens": typed_array(["a", "b", "<s>"], T.STRING),
    "adapter.type": "none",
    "free_key": "x",
    "zz.extra": Value(3, T.UINT32),
}

# Tensors (name, GGML type, numpy shape): text and compatibility tensors, block numbers out of name order,
# names outside blk.N. (sorted last by Ollama's writer), sizes that leave gaps at the alignment.
_TENSORS = [
    ("token_embd.weight", "F16", (8, 32)),
    ("blk.10.attn_q.weight", "F32", (3, 32)),
    ("blk.2.attn_q.weight", "Q8_0", (2, 64)),
    ("v.blk.0.attn_q.weight", "F16", (5, 32)),
    ("blk.0.attn_q.weight", "F16", (1, 32)),
    ("mm.0.weight", "F32", (1, 7)),
    ("blk.0.attn_k.weight", "F32", (1, 9)),
    ("s.position_embd", "F16", (3,)),
    ("blk.1", "F32", (2,)),
    ("a.conv1d.0.weight", "F32", (5,)),
    ("output.weight", "BF16", (2, 32)),
    ("mtp.blk.0.norm", "F32", (4,)),
]


def _data(index: int, kind: str, shape: tuple[int, ...]) -> np.ndarray:
    """A tensor's values from its position: small distinct floats, the same on every run."""
    n = int(np.prod(shape))
    values = (np.arange(n, dtype=np.float32) % 17 - 8 + index) / 4
    return values.reshape(shape)


def _tensors(names: list[tuple[str, str, tuple[int, ...]]]):
    return [plan_tensor(name, shape, kind, data=_data(i, kind, shape)) for i, (name, kind, shape) in enumerate(names)]


# Each case: its name, the stem of its shards, metadata, tensors, tensors per shard.
CASES = [
    ("model", "vl", _WRITABLE, _TENSORS, 5),
    ("draft", "draft", {"general.architecture": "qwen2", "general.alignment": Value(64, T.UINT32),
                        "qwen2.block_count": Value(2, T.UINT32), "free_key": "x"},
     [("blk.1.ffn.weight", "F32", (3, 5)), ("v.patch_embd.weight", "F16", (2, 32)),
      ("blk.0.ffn.weight", "F16", (1, 32))], 2),
    # FP8-sourced: the writer moves the bare keys under the architecture, where hasSourceFP8Tensors finds them.
    ("fp8", "fp8", {**_WRITABLE, "source_quantization": "hf_fp8",
                    "source_fp8_tensors": typed_array(["blk.0.attn_q.weight"], T.STRING)}, _TENSORS[:4], 2),
    ("uint8", "u8", {**_WRITABLE, "llama.small": Value(1, T.UINT8)}, _TENSORS[:4], 2),
    ("int8", "i8", {**_WRITABLE, "llama.small": Value(-1, T.INT8)}, _TENSORS[:4], 2),
    ("uint16", "u16", {**_WRITABLE, "llama.small": Value(1, T.UINT16)}, _TENSORS[:4], 2),
    ("int16", "i16", {**_WRITABLE, "llama.small": Value(-1, T.INT16)}, _TENSORS[:4], 2),
    ("float64", "f64", {**_WRITABLE, "general.f64": Value(0.5, T.FLOAT64)}, _TENSORS[:4], 2),
    ("array-uint64", "au64", {**_WRITABLE, "tokenizer.ids": typed_array([1, 2], T.UINT64)}, _TENSORS[:4], 2),
    ("array-uint8", "au8", {**_WRITABLE, "tokenizer.bytes": typed_array([1, 2], T.UINT8)}, _TENSORS[:4], 2),
    ("array-float64", "af64", {**_WRITABLE, "other": typed_array([1.5], T.FLOAT64),
                               "llama.small": Value(1, T.UINT8)}, _TENSORS[:4], 2),
    ("no-architecture", "noarch", {"general.name": "x"}, _TENSORS[:4], 2),
]  # fmt: skip


def write_case(case: tuple, folder: Path) -> list[Path]:
    """Write a case's shards (`<stem>-0000i-of-0000n.gguf`) into `folder`; returns their paths in order."""
    _, stem, metadata, tensors, per_shard = case
    folder.mkdir(parents=True, exist_ok=True)
    return write_split(folder / stem, metadata, _tensors(tensors), max_tensors=per_shard)


def run_offline(go: str, module: Path, package: str, work: Path) -> list[dict]:
    """The JSON cases a Go recorder package of the scratch module prints for the inputs in `work`, built
    offline (no module proxy, the local toolchain, caches beside the module)."""
    out = subprocess.run([go, "run", f"./{package}", str(work)], cwd=module, capture_output=True,
                         env={"GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOTOOLCHAIN": "local",
                              "HOME": str(module.parent), "GOCACHE": str(module.parent / "gocache"),
                              "GOPATH": str(module.parent / "gopath"), "PATH": "/usr/bin:/bin"})  # fmt: skip
    if out.returncode:
        sys.exit(out.stderr.decode())
    return json.loads(out.stdout)


def main(go: str, module: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix="wk-split-gguf-"))
    try:
        shards = {}
        for case in CASES:
            paths = write_case(case, work / case[0])
            shards[case[0]] = [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]
        shutil.copy(Path(__file__).with_suffix(".go"), module / "wkrecord" / "main.go")
        recorded = run_offline(go, module, "wkrecord", work)
    finally:
        shutil.rmtree(work)
    for case in recorded:
        case["shards"] = shards[case["name"]]
    save_recording(go, recorded, "ollama_split_gguf.json")


def save_recording(go: str, recorded: list[dict], name: str) -> None:
    """Write a Go recorder's cases to tests/data/`name`, with the Ollama commit and the Go version that ran them."""
    version = subprocess.run([go, "version"], capture_output=True, text=True).stdout.strip()
    doc = {"ollama_commit": OLLAMA_COMMIT, "go": version, "cases": recorded}
    (Path(__file__).parent / name).write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]).resolve())

"""Records what Ollama's `ollama create` makes of tiny GGUFs named by FROM or ADAPTER that may be projectors: the
layer ggufLayers files each as (isProjectorGGUF's rules: general.type, a vision.block_count with no block_count,
a clip file with an encoder; the keys of each Go type and of others), whether needsDefaultLlavaProjectorType
holds, and for a projector where it does, the bytes addDefaultLlavaProjectorType writes (clip.projector_type
"mlp" added, by fs/ggml.WriteGGUF) or that writer's refusal.

`write_case(case, folder)` writes a case's file deterministically (weightkit's GGUF writer, numpy data from a
fixed rule); tests/ollama/test_projector.py rebuilds them with it and checks their sha256 before comparing. The
Go side is make_ollama_projector_gguf.go, built in the scratch module of make_ollama_split_gguf.py
(docs/contributing.md says how), with isProjectorGGUF and needsDefaultLlavaProjectorType copied verbatim from
Ollama's server package at the commit. Output: ollama_projector_gguf.json.

Run from the repository: PYTHONPATH=src python tests/data/make_ollama_projector_gguf.py GO SCRATCH_MODULE GIT_DIR
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import make_ollama_split_gguf

from weightkit.gguf import GGUFValueType, Value, plan_tensor, write_gguf

T = GGUFValueType
OLLAMA_COMMIT = make_ollama_split_gguf.OLLAMA_COMMIT
# The server functions the recorder runs as Ollama has them (file, function).
_COPIED = [("server/create.go", "isProjectorGGUF"), ("server/quantization.go", "needsDefaultLlavaProjectorType")]

_TRUE, _FALSE, _ONE, _ZERO = Value(True, T.BOOL), Value(False, T.BOOL), Value(1, T.UINT32), Value(0, T.UINT32)
# A llava projector as llama.cpp's llava surgery writes it (no projector type), with a key outside clip. that the
# writer renames under the architecture, and values of several types.
_LLAVA = {"general.architecture": "clip", "general.file_type": Value(1, T.UINT32), "general.name": "tiny llava",
          "clip.has_vision_encoder": _TRUE, "clip.has_text_encoder": _FALSE, "clip.vision.block_count": _ONE,
          "clip.vision.image_size": Value(336, T.UINT32), "clip.vision.image_mean": [0.5, 0.25, 0.125],
          "clip.use_gelu": _TRUE, "free_key": "x"}  # fmt: skip
# Tensors (name, GGML type, numpy shape), out of Go's sorted order, sizes that leave gaps at the alignment.
_TENSORS = [("v.patch_embd.weight", "F16", (4, 32)), ("mm.2.weight", "F32", (3, 5)), ("mm.0.weight", "F16", (2, 32)),
            ("v.blk.0.attn_q.weight", "F32", (1, 7)), ("blk.1.x", "F32", (2,)), ("blk.0.x", "F32", (3,))]  # fmt: skip


def _without(md: dict, *keys: str) -> dict:
    return {k: v for k, v in md.items() if k not in keys}


# Each case: its name and metadata (tensors are _TENSORS).
CASES = [
    ("llava", _LLAVA),
    ("llava-aligned", {**_LLAVA, "general.alignment": Value(64, T.UINT32)}),
    ("llava-no-block-count", _without(_LLAVA, "clip.vision.block_count")),
    ("llava-block-count-zero", {**_LLAVA, "clip.block_count": _ZERO}),
    ("mmproj-llava", {**_LLAVA, "general.type": "mmproj"}),
    ("projector-type-llava", {**_LLAVA, "general.type": "projector", "clip.vision.block_count": _ZERO}),
    ("has-projector-type", {**_LLAVA, "clip.projector_type": "ldp"}),
    ("has-projector-type-uint", {**_LLAVA, "clip.projector_type": _ONE}),
    ("has-vision-projector-type", {**_LLAVA, "clip.vision.projector_type": "pixtral"}),
    ("audio-only", {**_without(_LLAVA, "clip.has_vision_encoder"), "clip.has_audio_encoder": _TRUE}),
    ("audio-and-vision-false", {**_LLAVA, "clip.has_vision_encoder": _FALSE, "clip.has_audio_encoder": _TRUE}),
    ("encoder-not-bool", {**_without(_LLAVA, "clip.vision.block_count"), "clip.has_vision_encoder": _ONE}),
    ("clip-with-block-count", {**_LLAVA, "clip.block_count": Value(2, T.UINT32)}),
    ("clip-block-count-uint64", {**_LLAVA, "clip.block_count": Value(2, T.UINT64)}),
    ("vision-block-count-int32", {**_without(_LLAVA, "clip.has_vision_encoder"),
                                  "clip.vision.block_count": Value(1, T.INT32)}),
    ("llama-vision", {"general.architecture": "llama", "llama.vision.block_count": _ONE,
                      "clip.has_vision_encoder": _TRUE}),
    ("llama-vision-with-text", {"general.architecture": "llama", "llama.vision.block_count": _ONE,
                                "llama.block_count": Value(2, T.UINT32)}),
    ("no-architecture-vision", {"unknown.vision.block_count": _ONE}),
    ("adapter", {**_LLAVA, "general.type": "adapter"}),
    ("mmproj-gemma4", {"general.architecture": "clip", "general.type": "mmproj", "clip.has_vision_encoder": _TRUE,
                       "clip.vision.block_count": _ZERO, "clip.vision.projector_type": "gemma4uv",
                       "clip.has_audio_encoder": _TRUE, "clip.audio.projector_type": "gemma4ua"}),
    ("model", {"general.architecture": "llama", "llama.block_count": Value(2, T.UINT32)}),
    ("llava-improper-type", {**_LLAVA, "clip.small": Value(1, T.UINT8)}),
]  # fmt: skip


def write_case(case: tuple, folder: Path) -> Path:
    """Write a case's file (`<name>.gguf`) into `folder`; returns its path."""
    name, metadata = case
    folder.mkdir(parents=True, exist_ok=True)
    tensors = []
    for i, (tname, kind, shape) in enumerate(_TENSORS):
        values = (np.arange(int(np.prod(shape)), dtype=np.float32) % 13 - 6 + i) / 8
        tensors.append(plan_tensor(tname, shape, kind, data=values.reshape(shape)))
    path = folder / f"{name}.gguf"
    write_gguf(path, metadata, tensors)
    return path


def _copied_functions(git_dir: str) -> str:
    """The server functions of _COPIED, verbatim from Ollama's repository at OLLAMA_COMMIT."""
    out = []
    for file, func in _COPIED:
        text = subprocess.run(["git", "--git-dir", git_dir, "show", f"{OLLAMA_COMMIT}:{file}"], check=True,
                              capture_output=True, text=True).stdout  # fmt: skip
        out.append(re.search(rf"^func {func}\(.*?^}}\n", text, re.S | re.M).group(0))
    return "\n".join(out)


def main(go: str, module: Path, git_dir: str) -> None:
    work = Path(tempfile.mkdtemp(prefix="wk-projector-gguf-"))
    try:
        inputs = {case[0]: hashlib.sha256(write_case(case, work).read_bytes()).hexdigest() for case in CASES}
        (module / "wkprojector").mkdir(exist_ok=True)
        shutil.copy(Path(__file__).with_suffix(".go"), module / "wkprojector" / "main.go")
        copied = 'package main\n\nimport ggml "github.com/ollama/ollama/fs/ggml"\n\ntype fsggmlGGML = ggml.GGML\n\n'
        (module / "wkprojector" / "server.go").write_text(copied + _copied_functions(git_dir).replace(
            "*fsggml.GGML", "*fsggmlGGML"))  # fmt: skip
        recorded = make_ollama_split_gguf.run_offline(go, module, "wkprojector", work)
    finally:
        shutil.rmtree(work)
    for case in recorded:
        case["input"] = inputs[case["name"]]
    make_ollama_split_gguf.save_recording(go, recorded, "ollama_projector_gguf.json")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]).resolve(), sys.argv[3])

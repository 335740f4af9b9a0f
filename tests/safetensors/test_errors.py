"""The error contract on the safetensors side: a closed model says it is closed."""

from __future__ import annotations

import numpy as np
import pytest

import weightkit
from weightkit.errors import ArgumentError
from weightkit.gguf import write_gguf
from weightkit.safetensors import SafetensorsFile, write_checkpoint, write_safetensors


def test_bad_framework(tmp_path):
    write_safetensors(tmp_path / "x.safetensors", {"t": np.zeros(2, np.float32)})
    with pytest.raises(ArgumentError, match="framework is one of"):
        SafetensorsFile(tmp_path / "x.safetensors", framework="jax")


@pytest.mark.parametrize("kind", ["safetensors file", "checkpoint folder", "gguf file"])
def test_closed_models_say_so(tmp_path, kind):
    """The check lives in the shared base of mapped files, so GGUF files get it too."""
    data = {"w": np.arange(6, dtype=np.float32).reshape(2, 3)}
    if kind == "gguf file":
        path = tmp_path / "m.gguf"
        write_gguf(path, {}, data)
    else:
        data["empty"] = np.zeros((0, 3), np.float32)  # no bytes to read, closed all the same
        write_checkpoint(tmp_path, data)
        path = tmp_path / "model.safetensors" if kind == "safetensors file" else tmp_path
    m = weightkit.open(path)
    kept = m.tensor("w")
    m.close()
    for read in (m.tensor, m.raw):
        for name in data:
            with pytest.raises(ArgumentError, match=f"the file is closed; open it again to read tensor '{name}'"):
                read(name)
    assert np.array_equal(kept, data["w"])  # what was handed out before stays valid

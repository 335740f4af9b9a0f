"""The error contract on the safetensors side: what a caller gets wrong raises a weightkit error that names the
argument or tensor; a closed model says it is closed."""

from __future__ import annotations

import numpy as np
import pytest

import weightkit
from weightkit.errors import ArgumentError, ArgumentTypeError, UnsupportedError
from weightkit.gguf import write_gguf
from weightkit.safetensors import SafetensorsFile, tensor_from, write_checkpoint, write_safetensors

from ..extras import need

pytestmark = pytest.mark.needs_torch
torch = need("needs_torch")

ARRAY = np.zeros(2, np.float32)
BAD_WRITES = {
    "a dict for a tensor": ({"t": {"a": 1}}, None, ArgumentTypeError, "tensor 't': expected a numpy array.*not dict"),
    "a list for a tensor": ({"t": [1, 2]}, None, ArgumentTypeError, "tensor 't': expected .*not list"),
    "None for a tensor": ({"t": None}, None, ArgumentTypeError, "tensor 't': expected .*not NoneType"),
    "a str for the tensors": ("abc", None, ArgumentTypeError, "tensors: expected a mapping .*not str"),
    "a list of ints for the tensors": ([1, 2], None, ArgumentTypeError, "tensors: a list holds SafetensorsTensor"),
    "an int for a name": ({1: ARRAY}, None, ArgumentTypeError, r"tensor names are strings, not int \(1\)"),
    "the reserved name": ({"__metadata__": ARRAY}, None, ArgumentError, "'__metadata__' is reserved"),
    "strings": ({"t": np.array(["a"])}, None, ArgumentTypeError, "tensor 't': safetensors has no dtype for numpy <U1"),
    "complex128": ({"t": torch.zeros(2, dtype=torch.complex128)}, None, ArgumentTypeError, "'t': no numpy dtype"),
    "a meta tensor": ({"t": torch.zeros(2, device="meta")}, None, ArgumentError, "'t' is on torch's meta device"),
    "a str for the metadata": ({"t": ARRAY}, "abc", ArgumentTypeError, "metadata: expected a mapping .*not str"),
    "an int metadata value": ({"t": ARRAY}, {"k": 1}, ArgumentTypeError, "metadata: .*not 'k': 1"),
    "a repeated name": (
        [tensor_from("a", b"x", "U8", (1,)), tensor_from("a", b"y", "U8", (1,))],
        None,
        ArgumentError,
        "tensors: the name 'a' is given twice",
    ),
    "bytes of the wrong size": ([tensor_from("a", b"abcd", "F32", (2,))], None, ArgumentError, "8 bytes, 4 given"),
    "a callable giving a dict": (
        [tensor_from("a", lambda: {"x": 1}, "F32", (1,))],
        None,
        ArgumentTypeError,
        "tensor 'a': expected .*not dict",
    ),
    "values that do not convert": (
        [tensor_from("a", np.array(["x"]), "F32", (1,))],
        None,
        ArgumentTypeError,
        "tensor 'a': numpy <U1 does not convert to F32",
    ),
    "a memoryview with gaps": (
        [tensor_from("a", memoryview(b"abcdefgh")[::2], "U8", (4,))],
        None,
        ArgumentTypeError,
        r"tensor 'a': U8 \(4,\): data must be contiguous bytes or an array \(memoryview: .*C-contiguous",
    ),
    "F4 values filling no whole byte": ([tensor_from("a", b"ab", "F4", (3,))], None, ArgumentError, "3 F4 values"),
}


@pytest.mark.parametrize("case", BAD_WRITES, ids=list(BAD_WRITES))
def test_bad_writes_say_what_is_wrong(tmp_path, case):
    tensors, metadata, error, message = BAD_WRITES[case]
    with pytest.raises(error, match=message):
        write_safetensors(tmp_path / "x.safetensors", tensors, metadata)
    with pytest.raises(error, match=message):
        write_checkpoint(tmp_path / "folder", tensors, metadata)
    assert not (tmp_path / "x.safetensors").exists() and not list(tmp_path.glob("folder/*"))


BAD_DESCRIPTIONS = {
    "unknown dtype": (("a", b"ab", "F99", (1,)), ArgumentError, "tensor 'a': dtype 'F99' is not a safetensors dtype"),
    "float dimension": (("a", b"ab", "U8", (1.5,)), ArgumentTypeError, r"tensor 'a': shape \(1.5,\) is not"),
    "int shape": (("a", b"ab", "U8", 5), ArgumentTypeError, "tensor 'a': shape 5 is not a sequence"),
    "negative dimension": (("a", b"ab", "U8", (-1,)), ArgumentError, r"shape \[-1\] has a negative dimension"),
    "dtype without shape": (("a", b"ab", "U8", None), ArgumentError, "give both dtype= and shape="),
    "bytes without dtype": (("a", b"ab"), ArgumentError, "raw bytes and callables need dtype= and shape="),
    "a float4 scalar": (
        ("a", torch.zeros((), dtype=torch.uint8).view(torch.float4_e2m1fn_x2)),
        UnsupportedError,
        "0-dimensional float4_e2m1fn_x2",
    ),
}


@pytest.mark.parametrize("case", BAD_DESCRIPTIONS, ids=list(BAD_DESCRIPTIONS))
def test_bad_tensor_descriptions_say_what_is_wrong(case):
    args, error, message = BAD_DESCRIPTIONS[case]
    with pytest.raises(error, match=message):
        tensor_from(*args)


def test_bad_shard_size_and_framework(tmp_path):
    with pytest.raises(ArgumentTypeError, match="max_shard_bytes is a number of bytes, not '10'"):
        write_checkpoint(tmp_path, {"t": ARRAY}, max_shard_bytes="10")
    write_safetensors(tmp_path / "x.safetensors", {"t": ARRAY})
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

"""Torch tensors in and out: float4_e2m1fn_x2 as F4, sparse tensors refused, conjugate and negative views and
non-contiguous tensors written with their true values; each against what Hugging Face's reference does."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from safetensors import SafetensorError, safe_open

import weightkit
from weightkit.errors import ArgumentError, UnsupportedError
from weightkit.safetensors import SafetensorsFile, tensor_from, write_checkpoint, write_safetensors

from ..extras import need

pytestmark = pytest.mark.needs_torch
torch = need("needs_torch")
from safetensors.torch import save_file  # noqa: E402  (it imports torch: after the skip above)

FP4 = torch.float4_e2m1fn_x2


def fp4(*shape: int) -> torch.Tensor:
    """A float4_e2m1fn_x2 tensor of `shape` with distinct bytes (torch makes none from values directly)."""
    n = int(np.prod(shape))
    return (torch.arange(n, dtype=torch.int64) * 37 % 256).to(torch.uint8).reshape(shape).view(FP4)


@pytest.mark.parametrize("shape", [(2, 6), (3,), (1, 2, 3), (2, 0), (0,)])
def test_fp4_writes_as_the_reference(tmp_path, shape):
    data = {"q": fp4(*shape), "scale": torch.ones(3, dtype=torch.bfloat16)}
    write_safetensors(tmp_path / "ours", data)
    save_file(data, str(tmp_path / "theirs"))
    assert (tmp_path / "ours").read_bytes() == (tmp_path / "theirs").read_bytes()
    with weightkit.open(tmp_path / "ours") as m:
        assert m.tensors["q"].dtype.value == "F4" and m.tensors["q"].shape == (*shape[:-1], 2 * shape[-1])


def test_fp4_non_contiguous_and_through_a_callable(tmp_path):
    t = fp4(4, 6).t()  # non-contiguous: written as its contiguous copy, as for any tensor
    assert not t.is_contiguous()
    write_safetensors(tmp_path / "ours", {"q": t})
    save_file({"q": t.contiguous()}, str(tmp_path / "theirs"))
    assert (tmp_path / "ours").read_bytes() == (tmp_path / "theirs").read_bytes()
    write_safetensors(tmp_path / "lazy", [tensor_from("q", lambda: t, "F4", (6, 8))])
    assert (tmp_path / "lazy").read_bytes() == (tmp_path / "theirs").read_bytes()


def test_fp4_scalar_refused_like_the_reference(tmp_path):
    scalar = torch.zeros((), dtype=torch.uint8).view(FP4)
    with pytest.raises(UnsupportedError, match="'q': a 0-dimensional float4_e2m1fn_x2"):
        write_safetensors(tmp_path / "ours", {"q": scalar})
    with pytest.raises(SafetensorError):
        save_file({"q": scalar}, str(tmp_path / "theirs"))


def test_fp4_reads_as_torch_float4_pairs_like_the_reference(tmp_path):
    q = fp4(2, 3, 4)
    save_file({"q": q, "b": torch.arange(3)}, str(tmp_path / "model.safetensors"))
    with safe_open(str(tmp_path / "model.safetensors"), framework="pt") as f:
        theirs = f.get_tensor("q")
    for target in (tmp_path / "model.safetensors", tmp_path):  # the file, and the folder as a checkpoint
        with weightkit.open(target, framework="torch") as m:
            ours = m.tensor("q")
            assert ours.dtype == theirs.dtype == FP4 and ours.shape == theirs.shape == (2, 3, 4)
            assert torch.equal(ours.view(torch.uint8), theirs.view(torch.uint8))
            assert torch.equal(m.load()["q"].view(torch.uint8), q.view(torch.uint8))
            with pytest.raises(UnsupportedError, match="packed F4"):  # no conversion of packed values
                m.tensor("q", dtype=np.float32)
    with weightkit.open(tmp_path / "model.safetensors") as m:  # numpy has no such type: as before, raw() only
        with pytest.raises(UnsupportedError, match="packed F4; read its bytes with raw"):
            m.tensor("q")
        assert bytes(m.raw("q")) == q.view(torch.uint8).numpy().tobytes()


def test_fp4_with_an_odd_last_dimension_is_no_torch_tensor_as_in_the_reference(tmp_path):
    header = json.dumps({"q": {"dtype": "F4", "shape": [2, 3], "data_offsets": [0, 3]}}).encode()
    path = tmp_path / "odd.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + bytes([1, 2, 3]))
    with safe_open(str(path), framework="pt") as f, pytest.raises(SafetensorError, match="divisible by 2"):
        f.get_tensor("q")
    with SafetensorsFile(path, framework="torch") as m:
        with pytest.raises(UnsupportedError, match=r"'q': F4 \[2, 3\] is not whole float4_e2m1fn_x2 pairs"):
            m.tensor("q")
        assert bytes(m.raw("q")) == bytes([1, 2, 3])


def test_sparse_tensors_refused_naming_them(tmp_path):
    sparse = torch.eye(3).to_sparse()
    with pytest.raises(ValueError, match="sparse"):  # the reference refuses them too
        save_file({"w": sparse}, str(tmp_path / "theirs"))
    with pytest.raises(ArgumentError, match="'w' is a sparse torch tensor"):
        write_safetensors(tmp_path / "ours", {"dense": torch.ones(2), "w": sparse})
    with pytest.raises(ArgumentError, match="'w' is a sparse torch tensor"):
        write_checkpoint(tmp_path / "folder", {"w": sparse})
    with pytest.raises(ArgumentError, match="'w' is a sparse torch tensor"):
        write_safetensors(tmp_path / "ours", [tensor_from("w", lambda: sparse, "F32", (3, 3))])
    assert not (tmp_path / "ours").exists()


COMPLEX = torch.tensor([[1 + 2j, 3 - 4j], [5 + 6j, -7 - 8j]], dtype=torch.complex64)
VIEWS = {
    "conjugate": COMPLEX.conj(),
    "conjugate, transposed": COMPLEX.conj().t(),
    "negative (imaginary part of a conjugate)": COMPLEX.conj().imag,
    "negative, contiguous": torch.tensor([1.0, -2.0, 3.5])._neg_view(),
}


@pytest.mark.parametrize("view", VIEWS, ids=list(VIEWS))
def test_conjugate_and_negative_views_write_their_true_values(tmp_path, view):
    """The reference writes the memory beneath such a view (the values before the sign flip) when the view is
    contiguous and refuses it otherwise; weightkit writes the values the tensor holds."""
    t = VIEWS[view]
    assert t.is_conj() or t.is_neg()
    true = t.resolve_conj().resolve_neg().contiguous()
    write_safetensors(tmp_path / "ours", {"t": t})
    save_file({"t": true}, str(tmp_path / "theirs"))
    assert (tmp_path / "ours").read_bytes() == (tmp_path / "theirs").read_bytes()
    with weightkit.open(tmp_path / "ours", framework="torch") as m:
        assert torch.equal(m.tensor("t"), true)


def test_non_contiguous_tensors_are_copied_not_refused(tmp_path):
    """Deliberate policy: the reference refuses a non-contiguous tensor; weightkit writes its values."""
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)[:, ::2]
    with pytest.raises(ValueError, match="non contiguous"):
        save_file({"t": t}, str(tmp_path / "theirs"))
    write_safetensors(tmp_path / "ours", {"t": t})
    save_file({"t": t.contiguous()}, str(tmp_path / "theirs"))
    assert (tmp_path / "ours").read_bytes() == (tmp_path / "theirs").read_bytes()

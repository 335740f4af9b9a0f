"""Properties every quantizable GGML type must have, whatever its family."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weightkit import quant
from weightkit.dtypes import ggml_type
from weightkit.llama_quantize.quantize import GGML_NEEDS_IMATRIX

TYPES = sorted(t.name for t in quant.QUANTIZERS)
DECODABLE = sorted(t.name for t in quant.DEQUANTIZERS)
ONES = np.ones(512, np.float32)  # an importance matrix, for the types ggml cannot quantize without one


@pytest.mark.parametrize("name", TYPES)
def test_non_finite_input_does_not_crash(name):
    """ggml gives no meaningful bytes for inf/NaN input either; it only must not raise."""
    x = np.random.default_rng(0).standard_normal((2, 512)).astype(np.float32)
    x[0, ::7], x[0, 3::7], x[1, 5::11], x[1, 1::13] = np.inf, -np.inf, np.nan, 3e38
    raw = quant.quantize(x, name, ONES)
    assert quant.dequantize(raw, name, x.shape).shape == x.shape


@pytest.mark.parametrize("name", TYPES)
def test_all_zero_rows_round_trip_to_zero(name):
    x = np.zeros((2, 512), np.float32)
    assert not quant.dequantize(quant.quantize(x, name, ONES), name, x.shape).any()


@pytest.mark.parametrize("name", DECODABLE)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_dequantize_accepts_any_bytes(name, data):
    """Every bit pattern of scales and codes decodes to float32s of the right shape, without raising."""
    info = ggml_type(name)
    n_blocks = data.draw(st.integers(1, 8))
    raw = data.draw(st.binary(min_size=n_blocks * info.type_size, max_size=n_blocks * info.type_size))
    out = quant.dequantize(raw, name, (n_blocks, info.block_size))
    assert out.dtype == np.float32 and out.shape == (n_blocks, info.block_size)


@pytest.mark.parametrize("name", TYPES)
def test_quantize_split_into_many_tasks_gives_the_same_bytes(name, monkeypatch):
    """However quantize cuts the rows into tasks (the size depends on the type and on the imatrix), every
    row comes out as it does alone: the threads' tasks must not see each other's rows."""
    x = np.random.default_rng(11).standard_normal((7, 512)).astype(np.float32)
    imatrix = np.linspace(0.2, 2, 512, dtype=np.float32)
    weighted = [imatrix] if ggml_type(name).type in GGML_NEEDS_IMATRIX else [None, imatrix]
    whole = [quant.quantize(x, name, w) for w in weighted]
    monkeypatch.setattr(quant, "MIN_TASK_ELEMENTS", 1)
    monkeypatch.setattr(quant, "_quantize_chunk", lambda qtype, weighted: 2 * 512)  # tasks of 2 rows
    for w, expected in zip(weighted, whole, strict=True):
        assert np.array_equal(quant.quantize(x, name, w), expected)


@pytest.mark.parametrize("name", ["Q8_0", "Q4_K", "IQ4_XS", "F16", "BF16", "TQ2_0"])
def test_other_input_dtypes_quantize_as_their_float32_values(name, monkeypatch):
    """float16, bfloat16, float64 and integer input is cast to float32 chunk by chunk (on the threads,
    never as a whole float32 copy) and gives the bytes its float32 values give."""
    import ml_dtypes

    monkeypatch.setattr(quant, "MIN_TASK_ELEMENTS", 1)
    monkeypatch.setattr(quant, "_quantize_chunk", lambda qtype, weighted: 2 * 512)  # several tasks
    x = np.random.default_rng(5).standard_normal((5, 512))
    for dtype in (np.float16, ml_dtypes.bfloat16, np.float64, np.int8):
        values = (x * 40).astype(dtype) if dtype == np.int8 else x.astype(dtype)
        assert np.array_equal(quant.quantize(values, name), quant.quantize(values.astype(np.float32), name)), dtype
    transposed = x.astype(np.float16).T.copy().T  # a strided view
    assert np.array_equal(quant.quantize(transposed, name), quant.quantize(transposed.astype(np.float32), name))


def test_f16_decodes_every_bit_pattern_as_numpys_cast():
    """F16 is decoded through a table: every one of the 65,536 patterns (NaN payloads, subnormals, -0)
    must come out with the bits numpy's float16 -> float32 cast gives, as gguf-py's reader gets them."""
    patterns = np.arange(1 << 16, dtype=np.uint32).astype("<u2")
    got = quant.dequantize(patterns.view(np.uint8), "F16", (256, 256))
    assert np.array_equal(got.reshape(-1).view(np.uint32), patterns.view("<f2").astype(np.float32).view(np.uint32))


def test_as_float32_reads_float16_through_the_table():
    from weightkit.quant.plain import as_float32

    patterns = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).reshape(256, 256)
    for x in (patterns, patterns[:, ::3], patterns.T, patterns.astype(">f2")):
        got = as_float32(x)
        assert got.flags.c_contiguous and got.dtype == np.float32 and got.shape == x.shape
        assert np.array_equal(got.view(np.uint32), x.astype(np.float32).view(np.uint32))
    x = np.ones((3, 4), np.float32)
    assert as_float32(x) is x


def test_bf16_values_quantize_as_their_float32_values_for_every_bit_pattern():
    """bfloat16 values go to F16 (through a table) and BF16 (NaNs quieted) without float32: the bytes of the
    float32 route, NaNs and overflow to inf included."""
    import ml_dtypes

    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(ml_dtypes.bfloat16).reshape(256, 256)
    with np.errstate(over="ignore"):
        f16 = every.astype(np.float32).astype(np.float16).view(np.uint8).reshape(-1)
    assert np.array_equal(quant.quantize(every, "F16"), f16)
    assert np.array_equal(quant.quantize(every, "BF16"), quant.quantize(every.astype(np.float32), "BF16"))

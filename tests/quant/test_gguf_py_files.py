"""Files gguf-py writes, with tensors gguf-py quantized: weightkit reads and decodes them as gguf-py does,
and (where gguf-py's numpy quantizer follows ggml) quantizes to the same bytes."""

from __future__ import annotations

import tracemalloc

import gguf
import numpy as np
import pytest
from gguf import quants

import weightkit
from weightkit.errors import ArgumentError, ArgumentTypeError
from weightkit.quant import dequantize, quantize

TYPES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "TQ1_0", "TQ2_0", "MXFP4", "BF16", "F16"]


def test_gguf_py_quantized_file(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 512)).astype(np.float32)
    path = tmp_path / "q.gguf"
    w = gguf.GGUFWriter(path, "llama")
    for name in TYPES:
        qtype = gguf.GGMLQuantizationType[name]
        w.add_tensor(name, quants.quantize(x, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    reader = gguf.GGUFReader(path)
    with weightkit.open(path) as m:
        for t in reader.tensors:
            theirs = quants.dequantize(np.asarray(t.data), t.tensor_type).reshape(x.shape)
            ours = m.tensor(t.name, np.float32)
            assert np.array_equal(ours.view(np.uint32), theirs.astype(np.float32).view(np.uint32)), t.name
            assert np.array_equal(quantize(x, t.name), np.asarray(t.data).reshape(-1).view(np.uint8)), t.name


def test_wrong_arguments_are_argument_errors_that_name_the_argument():
    with pytest.raises(ArgumentError, match=r"^x: Q4_K .* a row of 100 is not a multiple"):
        quantize(np.zeros((2, 100), np.float32), "Q4_K")
    with pytest.raises(ArgumentError, match=r"^shape: Q4_K .* a row of 100 is not a multiple"):
        dequantize(bytes(144), "Q4_K", (100,))
    with pytest.raises(ArgumentError, match=r"^raw: .* takes 144 bytes, but 143 were given"):
        dequantize(bytes(143), "Q4_K", (256,))
    with pytest.raises(ArgumentError, match=r"^shape: .* negative dimension"):  # (-4, -256) has 1024 elements
        dequantize(bytes(576), "Q4_K", (-4, -256))
    with pytest.raises(ArgumentTypeError, match=r"^x: .*real numbers"):
        quantize(np.ones((1, 32), np.complex64), "Q8_0")
    with pytest.raises(ArgumentError, match=r"^imatrix: 32 values, but rows of x have 64"):
        quantize(np.ones((1, 64), np.float32), "Q4_0", np.ones(32, np.float32))
    with pytest.raises(ArgumentError, match="unknown GGML type name 'Q9_9'"):
        quantize(np.ones((1, 32), np.float32), "Q9_9")


def test_argument_errors_are_still_value_and_type_errors():
    """Callers written against the built-in classes keep catching them."""
    with pytest.raises(ValueError, match="not a multiple"):
        quantize(np.zeros((2, 100), np.float32), "Q4_K")
    with pytest.raises(TypeError, match="real numbers"):
        quantize(np.ones((1, 32), np.complex64), "Q8_0")


def test_dequantize_working_set_is_bounded():
    """Dequantizing needs the output plus chunk-sized temporaries, not copies of the whole tensor."""
    rows, cols = 4096, 4096
    raw = np.tile(quantize(np.random.default_rng(1).standard_normal((16, cols)).astype(np.float32), "Q4_K"), rows // 16)
    out_bytes = rows * cols * 4
    tracemalloc.start()
    out = dequantize(raw, "Q4_K", (rows, cols))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert out.nbytes == out_bytes
    assert peak < out_bytes + 160 * 2**20  # the output plus two threads' chunk temporaries

"""gguf-py's own writer tests, `TestGGUFWriterTypeValidation` in llama.cpp's gguf-py/tests/test_gguf_writer.py,
through weightkit's `GGUFWriter.set`: the same values, the same refusals (a `WeightkitError` that is also a
`TypeError`), and messages that name the key, the type and the value as gguf-py's do."""

from __future__ import annotations

import numpy as np
import pytest

from weightkit.errors import ArgumentTypeError, WeightkitError
from weightkit.gguf import GGUFValueType, GGUFWriter
from weightkit.gguf.values import typed_array

T = GGUFValueType

# (key, value, type, words the message holds): each test_rejects_* case upstream
REFUSED = {
    "test_rejects_list_for_string": ("general.license", ["Apache-2.0"], T.STRING, ["general.license", "STRING"]),
    "test_rejects_int_for_string": ("general.name", 42, T.STRING, ["STRING"]),
    "test_rejects_bool_for_uint32": ("general.file_type", True, T.UINT32, ["UINT32"]),
    "test_rejects_bool_for_int32": ("answer", False, T.INT32, ["INT32"]),
    "test_rejects_numpy_bool_for_uint32": ("general.file_type", np.bool_(True), T.UINT32, []),
    "test_rejects_bool_for_float32": ("temperature", True, T.FLOAT32, []),
    "test_rejects_non_sequence_for_array": ("general.tags", 42, T.ARRAY, []),
    "test_rejects_str_for_array": ("general.tags", "not-a-list", T.ARRAY, ["ARRAY", "str"]),
    "test_rejects_none_for_string": ("general.name", None, T.STRING, []),
    "test_rejects_none_for_uint32": ("general.file_type", None, T.UINT32, []),
    "test_rejects_float_for_uint32": ("general.file_type", 7.5, T.UINT32, ["UINT32"]),
    "test_rejects_float_for_int32": ("test", 1.0, T.INT32, []),
    "test_error_message_includes_key_name_and_value": (
        "general.license", ["Apache-2.0"], T.STRING, ["general.license", "list", "['Apache-2.0']"]
    ),
}  # fmt: skip

ACCEPTED = {
    "test_accepts_str_for_string": ("general.name", "test", T.STRING),
    "test_accepts_bytes_for_string": ("tokenizer.ggml.precompiled_charsmap", b"\x01\x02", T.STRING),
    "test_accepts_python_bool_for_bool": ("general.use_parallel_residual", True, T.BOOL),
    "test_accepts_numpy_bool_for_bool": ("general.use_parallel_residual", np.bool_(True), T.BOOL),
    "test_accepts_int_for_float32": ("attention.layer_norm_rms_eps", 0, T.FLOAT32),
    "test_accepts_int_for_float64": ("test", 1, T.FLOAT64),
    "test_accepts_float_for_float32": ("temperature", 0.7, T.FLOAT32),
    "test_accepts_numpy_int32_for_uint32": ("general.file_type", np.int32(7), T.UINT32),
    "test_accepts_numpy_uint64_for_uint64": ("test", np.uint64(42), T.UINT64),
    "test_accepts_numpy_float32_for_float32": ("temperature", np.float32(0.5), T.FLOAT32),
    "test_accepts_numpy_float64_for_float64": ("test", np.float64(1.5), T.FLOAT64),
    "test_accepts_bytes_for_array": ("test", b"\x01\x02", T.ARRAY),
    "test_add_uint32_still_works": ("general.file_type", 7, T.UINT32),
    "test_add_float32_still_works": ("attention.layer_norm_rms_eps", 1e-5, T.FLOAT32),
    "test_add_bool_still_works": ("general.use_parallel_residual", False, T.BOOL),
    "test_add_string_still_works": ("general.name", "TestModel", T.STRING),
    "test_add_array_still_works": ("general.tags", ["conversational", "code"], T.ARRAY),
}


@pytest.fixture
def writer(tmp_path):
    w = GGUFWriter(tmp_path / "x.gguf")
    yield w
    w.abort()


@pytest.mark.parametrize("case", REFUSED, ids=list(REFUSED))
def test_refused(writer, case):
    key, value, vtype, words = REFUSED[case]
    with pytest.raises(ArgumentTypeError) as err:
        writer.set(key, value, vtype)
    assert isinstance(err.value, (TypeError, WeightkitError))
    for word in [key, *words]:
        assert word in str(err.value)


@pytest.mark.parametrize("case", ACCEPTED, ids=list(ACCEPTED))
def test_accepted(writer, case):
    key, value, vtype = ACCEPTED[case]
    writer.set(key, value, vtype)
    assert writer.metadata[key].type == vtype


def test_bytes_for_array_are_uint8(writer):
    """test_accepts_bytes_for_array: gguf-py's add_array writes bytes as a UINT8 array (precompiled_charsmap)."""
    writer.set("test", b"\x01\x02", T.ARRAY)
    value = writer.metadata["test"]
    assert value.element == T.UINT8 and value.value.tolist() == [1, 2]


def test_array_elements_checked_by_sub_type():
    """test_rejects_mixed_type_array_with_string_sub_type, test_rejects_bool_in_int_array and their accepting
    twins: an array's items are checked as scalars of its element type."""
    with pytest.raises(ArgumentTypeError):
        typed_array(["ok", 1], T.STRING, "general.tags")
    with pytest.raises(ArgumentTypeError, match="'test'"):
        typed_array([1, True], T.INT32, "test")
    assert typed_array(["conversational", "code"], T.STRING).value == ["conversational", "code"]
    assert typed_array([1, 2, 3], T.INT32).value.tolist() == [1, 2, 3]

"""TensorTable: the column-backed, read-only mapping of tensor infos that big headers open into."""

from __future__ import annotations

import numpy as np
import pytest

from weightkit.dtypes import SafetensorsDType
from weightkit.model import CodedColumn, TensorInfo, TensorTable

F32, I8 = SafetensorsDType.F32, SafetensorsDType.I8


def test_table_reads_like_a_dict_of_infos():
    table = TensorTable(["b", "a"], [F32, I8], [(2, 3), ()], [100, 124], [24, 1])
    assert list(table) == ["b", "a"] and len(table) == 2
    assert table["a"] == TensorInfo("a", I8, (), 124, 1)
    assert dict(table) == {"b": TensorInfo("b", F32, (2, 3), 100, 24), "a": TensorInfo("a", I8, (), 124, 1)}
    assert "a" in table and "c" not in table and 3 not in table
    with pytest.raises(KeyError):
        table["c"]
    with pytest.raises(TypeError):
        table["a"] = table["b"]  # read-only, like the MappingProxyType other formats get


def test_table_hands_out_python_ints_from_array_columns():
    info = TensorTable(["w"], [F32], [(4,)], np.array([64], np.uint64), np.array([16], np.uint64))["w"]
    assert info == TensorInfo("w", F32, (4,), 64, 16) and type(info.offset) is int and type(info.nbytes) is int


def test_table_refuses_repeated_names_and_ragged_columns():
    with pytest.raises(ValueError, match="unique"):
        TensorTable(["a", "a"], [F32, F32], [(1,), (1,)], [0, 4], [4, 4])
    with pytest.raises(ValueError):
        TensorTable(["a", "b"], [F32], [(1,)], [0], [4])


def test_table_reads_coded_columns():
    shapes = [(2, 3), ()]
    table = TensorTable(
        ["a", "b", "c"],
        CodedColumn([F32, I8], np.array([1, 0, 1])),
        CodedColumn(shapes, np.array([0, 1, 0])),
        [8, 32, 33],
        [24, 4, 6],
    )
    assert [(i.dtype, i.shape) for i in table.values()] == [(I8, (2, 3)), (F32, ()), (I8, (2, 3))]
    assert len(CodedColumn(shapes, np.array([0, 1, 0]))) == 3

"""llama-quantize's option syntax: --tensor-type PATTERN=TYPE and --override-kv KEY=TYPE:VALUE."""

from __future__ import annotations

import pytest

from weightkit.dtypes import GGMLType as T
from weightkit.errors import WeightkitError
from weightkit.gguf import GGUFValueType as V
from weightkit.llama_quantize.options import parse_kv_override, parse_prune_layers, parse_tensor_type, read_tensor_types


def test_tensor_type():
    assert parse_tensor_type(r"BLK\.1\.ATTN_V=q8_0") == (r"blk\.1\.attn_v", T.Q8_0)  # lowercased, as there
    for bad in ("attn_v", "=q8_0", "attn_v=", "attn_v=q9"):
        with pytest.raises(WeightkitError, match="--tensor-type"):
            parse_tensor_type(bad)


def test_kv_override_values_as_llama_quantize_writes_them():
    key, value = parse_kv_override("llama.context_length=int:-8192")
    assert key == "llama.context_length" and (value.value, value.type) == (8192, V.UINT32)  # |v| as uint32
    assert parse_kv_override("k=int:4294967297")[1].value == 1  # (uint32_t) truncation
    assert parse_kv_override("k=float:0.1")[1].type == V.FLOAT32
    assert parse_kv_override("k=bool:false")[1].value is False
    assert parse_kv_override("k=str:a=b:c")[1].value == "a=b:c"  # the first '=' ends the key
    too_long = ("k=str:" + "x" * 128, "k" * 128 + "=int:1")
    for bad in ("k", "=int:1", "k=int:x", "k=float:", "k=bool:yes", "k=long:1", *too_long):
        with pytest.raises(WeightkitError, match="--override-kv"):
            parse_kv_override(bad)


def test_prune_layers():
    assert parse_prune_layers("5,1,5,0") == [0, 1, 5]
    for bad in ("", "1,x", "1,-2", "1,,2"):
        with pytest.raises(WeightkitError, match="--prune-layers"):
            parse_prune_layers(bad)


def test_tensor_type_file(tmp_path):
    path = tmp_path / "types.txt"
    path.write_text("attn_v=q8_0\n  ffn_down=Q6_K\tOUTPUT=f16\n\n")
    assert read_tensor_types(path) == [("attn_v", T.Q8_0), ("ffn_down", T.Q6_K), ("output", T.F16)]
    path.write_text("attn_v=q8_0 ffn_down\n")
    with pytest.raises(WeightkitError, match="'ffn_down'"):
        read_tensor_types(path)

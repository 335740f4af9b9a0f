"""`weightkit create NAME -f Modelfile --quantize Q` as `ollama create -q Q -f Modelfile` (server/create.go's
createModel at the commit docs/formats.md names): the model layer llama-quantize makes (`--allow-requantize IN
OUT TYPE`, weightkit's port of it checked against libllama in tests/llama_quantize), the same bytes as without
the Modelfile, then the Modelfile's layers; Ollama's refusals with its messages."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from weightkit.errors import ArgumentError, UnsupportedError
from weightkit.gguf import open_gguf, write_gguf
from weightkit.llama_quantize import QuantizeOptions, quantize_gguf
from weightkit.ollama import Store
from weightkit.ollama.create import create_from_checkpoint, create_from_gguf, create_from_request, read_modelfile
from weightkit.safetensors import write_checkpoint


def _gguf(path, arch="llama", file_type=0, extra=()):
    rng = np.random.default_rng(29)
    tensors = {name: rng.standard_normal((4, 256)).astype(np.float32)
               for name in ("token_embd.weight", "blk.0.ffn_up.weight", *extra)}  # fmt: skip
    write_gguf(path, {"general.architecture": arch, f"{arch}.block_count": np.uint32(1),
                      "general.file_type": np.uint32(file_type)}, tensors)  # fmt: skip
    return path


def _digest(path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def _kinds(manifest) -> list[str]:
    return [layer.media_type.rsplit(".", 1)[1] for layer in manifest.layers]


def test_gguf_quantized_as_without_the_modelfile(tmp_path):
    """FROM a GGUF: the model layer is llama-quantize's file, as `create --from ... -q` would store it, then the
    Modelfile's layers; its config reads the quantized file; a type the file has already is a COPY."""
    _gguf(tmp_path / "f32.gguf")
    quantize_gguf(tmp_path / "f32.gguf", tmp_path / "q8.gguf", QuantizeOptions("Q8_0"))
    (tmp_path / "Modelfile").write_text("FROM ./f32.gguf\nSYSTEM terse\n")
    store = Store(tmp_path / "store")
    manifest = create_from_request(store, "q8", read_modelfile(tmp_path / "Modelfile"), quantize="q8_0")
    assert _kinds(manifest) == ["model", "system"]
    assert manifest.layers[0].digest == _digest(tmp_path / "q8.gguf")
    assert (
        manifest.layers[0].digest
        == create_from_gguf(store, "plain", tmp_path / "f32.gguf", quantize="Q8_0").layers[0].digest
    )
    assert json.loads(store.blob_path(manifest.config.digest).read_bytes())["file_type"] == "Q8_0"
    same = create_from_request(store, "f32", read_modelfile(tmp_path / "Modelfile"), quantize="F32")
    assert same.layers[0].digest == create_from_gguf(store, "copy", tmp_path / "f32.gguf").layers[0].digest


def test_stored_model_quantized(tmp_path):
    """FROM a stored model: its model layer quantized anew (from no model), the rest kept as from it."""
    _gguf(tmp_path / "f32.gguf")
    quantize_gguf(tmp_path / "f32.gguf", tmp_path / "q8.gguf", QuantizeOptions("Q8_0"))
    store = Store(tmp_path / "store")
    (tmp_path / "Base").write_text("FROM ./f32.gguf\nLICENSE L\n")
    create_from_request(store, "base", read_modelfile(tmp_path / "Base"))
    (tmp_path / "Child").write_text("FROM base\n")
    manifest = create_from_request(store, "child", read_modelfile(tmp_path / "Child"), quantize="Q8_0")
    assert [(kind, layer.from_) for kind, layer in zip(_kinds(manifest), manifest.layers, strict=True)] == [
        ("model", ""), ("license", "base:latest")
    ]  # fmt: skip
    assert manifest.layers[0].digest == _digest(tmp_path / "q8.gguf")


def test_architecture_tensor_types(tmp_path):
    """llamaQuantizeArgs' additions: gemma3n's per-layer token embedding kept F16 under Q4_K_M."""
    _gguf(tmp_path / "g.gguf", arch="gemma3n", extra=("per_layer_token_embd.weight",))
    store = Store(tmp_path / "store")
    manifest = create_from_gguf(store, "g", tmp_path / "g.gguf", quantize="Q4_K_M")
    expected = QuantizeOptions("Q4_K_M", tensor_type=((r"^per_layer_token_embd\.weight$", "f16"),))
    quantize_gguf(tmp_path / "g.gguf", tmp_path / "expected.gguf", expected)
    assert manifest.layers[0].digest == _digest(tmp_path / "expected.gguf")
    with open_gguf(tmp_path / "expected.gguf") as model:
        assert model.tensors["per_layer_token_embd.weight"].dtype.name == "F16"


@pytest.mark.parametrize(
    ("file_type", "quantize", "error", "message"),
    [
        (0, "Q5_K_M", ArgumentError, "unsupported quantization type Q5_K_M - supported types are F32, F16, "
                                     "Q4_K_S, Q4_K_M, Q8_0"),
        (7, "Q4_K_M", UnsupportedError, "quantization is only supported for F16, BF16 and F32 models"),
        (0, "int4", ArgumentError, "unsupported quantization type INT4"),
    ],
)  # fmt: skip
def test_refused_as_ollama(tmp_path, file_type, quantize, error, message):
    _gguf(tmp_path / "m.gguf", file_type=file_type)
    (tmp_path / "Modelfile").write_text("FROM ./m.gguf\n")
    store = Store(tmp_path / "store")
    with pytest.raises(error, match=message):
        create_from_request(store, "m", read_modelfile(tmp_path / "Modelfile"), quantize=quantize)
    assert not list(store.models())


def test_command_line(tmp_path, weightkit_cli):
    _gguf(tmp_path / "f32.gguf")
    (tmp_path / "Modelfile").write_text("FROM ./f32.gguf\nPARAMETER top_k 7\n")
    env = {"OLLAMA_MODELS": str(tmp_path / "store")}
    r = weightkit_cli("create", "m", "-f", tmp_path / "Modelfile", "--quantize", "Q8_0", "--json", env=env)
    assert r.returncode == 0, r.stderr
    assert [layer["mediaType"].rsplit(".", 1)[1] for layer in json.loads(r.stdout)["layers"]] == ["model", "params"]
    r = weightkit_cli("create", "n", "-f", tmp_path / "Modelfile", "--quantize", "Q2_K", env=env)
    assert r.returncode == 2 and "unsupported quantization type Q2_K" in r.stderr


def test_checkpoint_with_an_mlx_mode(tmp_path):
    """FROM a safetensors folder with an MLX mode: x/create's tensor blobs as `create --from -q` makes them,
    then the Modelfile's layers."""
    folder = tmp_path / "ckpt"
    rng = np.random.default_rng(29)
    write_checkpoint(folder, {"model.layers.0.mlp.up_proj.weight": rng.standard_normal((64, 64)).astype(np.float32)})
    (folder / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    (tmp_path / "Modelfile").write_text("FROM ./ckpt\nSYSTEM s\n")
    store = Store(tmp_path / "store")
    manifest = create_from_request(store, "st", read_modelfile(tmp_path / "Modelfile"), quantize="int8")
    plain = create_from_checkpoint(store, "plain", folder, quantize="int8")
    assert _kinds(manifest) == ["tensor", "json", "system"]
    assert manifest.layers[:2] == plain.layers

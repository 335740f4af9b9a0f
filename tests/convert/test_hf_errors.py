"""Bad checkpoints: each is a WeightkitError naming the file and the problem, and nothing is left at the
destination (no file, no temporary)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from weightkit.convert.hf import convert_hf
from weightkit.errors import ArgumentError, FormatError, UnsupportedError, WeightkitError
from weightkit.safetensors import write_safetensors


def _config(folder: Path) -> dict:
    return json.loads((folder / "config.json").read_text())


def _set_config(folder: Path, **changes) -> None:
    config = _config(folder) | changes
    (folder / "config.json").write_text(json.dumps({k: v for k, v in config.items() if v is not ...}))


def _rewrite_tensors(folder: Path, change: Callable[[dict[str, np.ndarray]], None]) -> None:
    """Apply `change` to the tensors of a single-file checkpoint and write them back."""
    import weightkit

    with weightkit.open(folder / "model.safetensors") as m:
        tensors = {name: np.array(m.tensor(name)) for name in m.tensors}
    change(tensors)
    write_safetensors(folder / "model.safetensors", tensors)


def _drop(name: str) -> Callable[[dict[str, np.ndarray]], None]:
    return lambda t: t.pop(name)


def _reshape(name: str, shape: tuple[int, ...]) -> Callable[[dict[str, np.ndarray]], None]:
    def change(t: dict[str, np.ndarray]) -> None:
        t[name] = np.zeros(shape, t[name].dtype)

    return change


# (what is broken, checkpoint to start from, how to break it, expected error, fragments of its message)
CASES = [
    ("no config.json", "tiny-bert", lambda d: (d / "config.json").unlink(), FormatError,
     ["config.json", "no config.json"]),
    ("config.json not JSON", "tiny-bert", lambda d: (d / "config.json").write_text("{oops"), FormatError,
     ["config.json", "not valid JSON"]),
    ("no architectures", "tiny-bert", lambda d: _set_config(d, architectures=...), FormatError, ["architectures"]),
    ("unknown architecture", "tiny-bert", lambda d: _set_config(d, architectures=["RwkvForCausalLM"]),
     UnsupportedError, ["'RwkvForCausalLM' is not supported", "LlamaForCausalLM", "BertModel"]),
    ("unknown model_type", "tiny-bert", lambda d: _set_config(d, model_type="roberta"), UnsupportedError,
     ["model_type 'roberta'"]),
    ("zero heads", "tiny-mistral-v0.1", lambda d: _set_config(d, num_attention_heads=0), FormatError,
     ["num_attention_heads is 0, not a positive integer"]),
    ("quantized checkpoint", "tiny-qwen3", lambda d: _set_config(d, quantization_config={"quant_method": "fp8"}),
     UnsupportedError, ["quantization_config"]),
    ("no weights", "tiny-bert", lambda d: (d / "model.safetensors").unlink(), FormatError, ["no model*.safetensors"]),
    ("truncated shard", "tiny-bert",
     lambda d: (d / "model.safetensors").write_bytes((d / "model.safetensors").read_bytes()[:5000]), FormatError,
     ["model.safetensors"]),
    ("missing tensor", "tiny-bert", lambda d: _rewrite_tensors(d, _drop("encoder.layer.1.output.dense.weight")),
     FormatError, ["blk.1.ffn_down.weight", "2 layers"]),
    ("misshapen tensor", "tiny-qwen3", lambda d: _rewrite_tensors(d, _reshape("model.layers.0.mlp.up_proj.weight",
                                                                              (81, 32))),
     FormatError, ["blk.0.ffn_up.weight", "[81, 32]", "intermediate_size=80"]),
    ("rows that are not whole rope pairs", "tiny-mistral-v0.1",
     lambda d: _rewrite_tensors(d, _reshape("model.layers.0.self_attn.q_proj.weight", (66, 64))),
     FormatError, ["q_proj.weight", "[66, 64]", "rope halves for 4 heads"]),
    ("unmappable tensor", "tiny-bert", lambda d: _rewrite_tensors(d, lambda t: t.update(extra=np.zeros(4, np.float32))),
     FormatError, ["'extra'", "no GGUF name"]),
    ("layer beyond the config's count", "tiny-bert", lambda d: _set_config(d, num_hidden_layers=1), FormatError,
     ["encoder.layer.1", "1 layers"]),
    ("index names a missing shard", "Tiny-Llama-3-8B-Instruct",
     lambda d: sorted(d.glob("model-*.safetensors"))[1].unlink(), FormatError, ["-of-0000", "not in the folder"]),
    ("malformed tokenizer.json", "tiny-qwen2", lambda d: (d / "tokenizer.json").write_text('{"model": 1}'),
     FormatError, ["tokenizer.json"]),
    ("tokenizer.json not JSON", "tiny-bert", lambda d: (d / "tokenizer.json").write_text("{"), FormatError,
     ["tokenizer.json"]),
    ("unknown BPE pre-tokenizer", "tiny-qwen2", lambda d: _change_pre_tokenizer(d), UnsupportedError,
     ["does not know this BPE pre-tokenizer", "check hash", "base model"]),
    ("unknown tokenizer class", "tiny-qwen2", lambda d: _change_json(d / "tokenizer_config.json",
                                                                      tokenizer_class="T5Tokenizer"),
     UnsupportedError, ["'T5Tokenizer' is not supported"]),
    ("LlamaTokenizer adding a BOS it has not", "tiny-llama-2-hf",
     lambda d: _change_json(d / "tokenizer_config.json", bos_token=None), FormatError,
     ["tokenizer_config.json", "add_bos_token/add_eos_token without the token"]),
    ("LlamaTokenizer with add_prefix_space", "tiny-llama-2-hf",
     lambda d: _change_json(d / "tokenizer_config.json", add_prefix_space=True), UnsupportedError,
     ["tokenizer_config.json", "add_prefix_space is rebuilt from its SentencePiece model"]),
    ("malformed tokenizer.model", "tiny-mistral-v0.1", lambda d: (d / "tokenizer.model").write_bytes(b"\n\x00"),
     FormatError, ["tokenizer.model", "at byte 0", "piece 0 is empty"]),
    ("negative id in added_tokens.json", "tiny-llama-2-chat",
     lambda d: (d / "added_tokens.json").write_text('{"<x>": -1}'), FormatError, ["added_tokens.json", "-1"]),
    ("Phi-3 tokenizer_config.json without tokenizer_class", "tiny-phi-3-mini",
     lambda d: _change_json(d / "tokenizer_config.json", tokenizer_class=...), FormatError,
     ["tokenizer_config.json", "tokenizer_class"]),
    ("Phi-3 added token past vocab_size", "tiny-phi-3-mini", lambda d: _set_config(d, vocab_size=32005), FormatError,
     ["token id 32005", "vocab_size 32005"]),
    ("Phi-3 rope scaling that is not longrope", "tiny-phi-3-long",
     lambda d: _set_config(d, rope_scaling={"type": "dynamic", "factor": 2.0, "x": 1}), FormatError,
     ["config.json", "longrope"]),
    ("Gemma 3 with attention soft-capping", "tiny-gemma-3", lambda d: _set_config(d, attn_logit_softcapping=50.0),
     UnsupportedError, ["attn_logit_softcapping"]),
    ("Gemma 4 full attention's rope not proportional", "tiny-gemma-4-moe",
     lambda d: _set_config(d, rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                                               "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}),
     UnsupportedError, ["config.json", "'default'", "proportional"]),
    ("Gemma 4 without a head size for full attention", "tiny-gemma-4-moe",
     lambda d: _set_config(d, per_layer_config={}, global_head_dim=...), FormatError,
     ["config.json", "global_head_dim or per_layer_config"]),
    ("Gemma 3n with other than 4 streams", "tiny-gemma-3n-text", lambda d: _set_config(d, altup_num_inputs=3),
     UnsupportedError, ["config.json", "altup_num_inputs is 3", "only 4"]),
    ("Gemma 3n stream projections of different shapes", "tiny-gemma-3n-text",
     lambda d: _rewrite_tensors(d, _reshape("model.altup_projections.1.weight", (16, 64))),
     FormatError, ["altup_projections", "[32, 32], [16, 64], [32, 32]"]),
    ("model card YAML", "Tiny-Llama-3-8B-Instruct", lambda d: (d / "README.md").write_text("---\nlicense: [a\n---\n"),
     FormatError, ["README.md", "YAML"]),
    ("Qwen 3.5 without MTP layers", "tiny-qwen35-text",
     lambda d: _rewrite_tensors(d, lambda t: [t.pop(n) for n in list(t) if n.startswith("mtp.")]), UnsupportedError,
     ["multi-token prediction", "--no-mtp"]),
    ("layer_types not one per layer", "tiny-qwen35-text",
     lambda d: _set_config(d, layer_types=["linear_attention", "full_attention"]), FormatError,
     ["config.json", "layer_types has 2 entries for 3 layers"]),
    ("Qwen 3.5 value heads of another size", "tiny-qwen35",
     lambda d: _rewrite_tensors(d, _reshape("model.language_model.layers.0.linear_attn.in_proj_z.weight", (48, 32))),
     FormatError, ["in_proj_z.weight", "[48, 32]", "linear attention heads"]),
    ("Qwen3-Next in_proj_qkvz of another size", "tiny-qwen3next",
     lambda d: _rewrite_tensors(d, _reshape("model.layers.0.linear_attn.in_proj_qkvz.weight", (100, 32))),
     FormatError, ["in_proj_qkvz", "[100, 32]", "2 key heads"]),
    ("vocabulary larger than vocab_size", "tiny-qwen2", lambda d: _set_config(d, vocab_size=1000), FormatError,
     ["vocab_size 1000"]),
    ("tekken version mistral_common does not know", "tiny-mistral-tekken",
     lambda d: _change_tekken(d, lambda t: t["config"].update(version="v4")), FormatError,
     ["tekken.json", "config.version 'v4'"]),
    ("tekken ranks out of order", "tiny-mistral-tekken",
     lambda d: _change_tekken(d, lambda t: t["vocab"][300].update(rank=301)), FormatError,
     ["tekken.json", "vocab[300] has rank 301"]),
    ("tekken rank that is no merge", "tiny-mistral-tekken",
     lambda d: _change_tekken(d, lambda t: t["vocab"][300].update(token_bytes="AAEC")), FormatError,
     ["tekken.json", "vocab[300] is no merge of two ranked tokens"]),
    ("tekken vocabulary size past its ranks", "tiny-mistral-tekken",
     lambda d: _change_tekken(d, lambda t: t["config"].update(default_vocab_size=5000)), FormatError,
     ["tekken.json", "default_vocab_size 5000"]),
    ("tekken v7 without its system prompt token", "tiny-mistral-tekken",
     lambda d: _change_tekken(d, lambda t: t["special_tokens"][17].update(token_str="<SPECIAL_17>")), FormatError,
     ["tekken.json", "no special token [SYSTEM_PROMPT]"]),
    ("tekken image config without its image tokens", "tiny-mistral-tekken-v11",
     lambda d: _change_tekken(d, lambda t: t["special_tokens"][12].update(token_str="<SPECIAL_12>")), FormatError,
     ["tekken.json", "no special token [IMG_BREAK]"]),
    ("tekken image config with a field mistral_common has not", "tiny-mistral-tekken-v11",
     lambda d: _change_tekken(d, lambda t: t["image"].update(patch=1)), FormatError,
     ["tekken.json", "the image config has no field 'patch'"]),
    ("tekken v13 without special tokens", "tiny-mistral-tekken-v13",
     lambda d: _change_tekken(d, lambda t: t.pop("special_tokens")), FormatError,
     ["tekken.json", "no special_tokens"]),
]  # fmt: skip


def _change_tekken(folder: Path, change: Callable[[dict], object]) -> None:
    """Apply `change` to the folder's tekken.json."""
    path = folder / "tekken.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")


def _change_json(path: Path, **changes) -> None:
    """Set keys of a JSON file (`...` removes one)."""
    data = json.loads(path.read_text()) | changes
    path.write_text(json.dumps({k: v for k, v in data.items() if v is not ...}))


def _change_pre_tokenizer(folder: Path) -> None:
    """Qwen2's tokenizer with its split regex changed: a pre-tokenizer llama.cpp has no name for."""
    path = folder / "tokenizer.json"
    tj = json.loads(path.read_text())
    tj["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = r"[\s\S]"  # every character alone
    path.write_text(json.dumps(tj))


@pytest.mark.parametrize(("what", "base", "breaks", "error", "fragments"), CASES, ids=[c[0] for c in CASES])
def test_bad_checkpoint(hf_checkpoints, tmp_path, what, base, breaks, error, fragments):
    assert_refused(hf_checkpoints[base], tmp_path, breaks, error, fragments, "q8_0")


def assert_refused(checkpoint, tmp_path, breaks, error, fragments, outtype: str) -> None:
    """A copy of `checkpoint` broken by `breaks` is refused with `error` naming `fragments`, and nothing is
    left at the destination (no output, no temporary file)."""
    folder = tmp_path / checkpoint.name
    shutil.copytree(checkpoint, folder)
    breaks(folder)
    out = tmp_path / "out" / "model.gguf"
    out.parent.mkdir()
    with pytest.raises(error) as caught:
        convert_hf(folder, out, outtype)
    assert isinstance(caught.value, WeightkitError)
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, message
    assert not list(out.parent.iterdir())


def test_bad_arguments(hf_checkpoints, tmp_path):
    with pytest.raises(ArgumentError, match="--outtype 'q4_k'"):
        convert_hf(hf_checkpoints["tiny-bert"], tmp_path / "x.gguf", "q4_k")
    with pytest.raises(ArgumentError, match="not a folder"):
        convert_hf(tmp_path / "nothing", tmp_path / "x.gguf")
    with pytest.raises(ArgumentError, match="is a folder"):
        convert_hf(hf_checkpoints["tiny-bert"], tmp_path)
    assert not list(tmp_path.iterdir())


def test_failure_while_writing_leaves_the_old_file(hf_checkpoints, tmp_path, monkeypatch):
    """A tensor that fails to convert midway: the destination keeps what it had."""
    from weightkit.convert.hf import convert as module

    out = tmp_path / "model.gguf"
    out.write_bytes(b"old")
    late = "encoder.layer.1.output.dense.weight"

    def failing(*args):
        raise OSError("disk on fire")

    def fail_late(real):
        # the tensor's bytes are made whole or a group of rows at a time: both fail for the late tensor
        return lambda t, *args: failing if t.name == late else real(t, *args)

    monkeypatch.setattr(module, "_maker", fail_late(module._maker))
    monkeypatch.setattr(module, "_row_maker", fail_late(module._row_maker))
    with pytest.raises(OSError, match="disk on fire"):
        convert_hf(hf_checkpoints["tiny-bert"], out, "f16")
    assert out.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["model.gguf"]


def _set_params(**changes) -> Callable[[Path], None]:
    def change(folder: Path) -> None:
        params = json.loads((folder / "params.json").read_text()) | changes
        (folder / "params.json").write_text(json.dumps({k: v for k, v in params.items() if v is not ...}))

    return change


@pytest.mark.parametrize(
    ("breaks", "error", "fragments"),
    [
        (_set_params(moe={"num_experts": 4}), UnsupportedError, ["params.json", "'moe'"]),
        (_set_params(yarn={"factor": 4.0}), UnsupportedError, ["params.json", "'yarn'"]),
        (_set_params(head_dim=...), FormatError, ["params.json", "head_dim is None"]),
        (_set_params(dim=48), FormatError, ["token_embd.weight", "dim=48"]),
        (lambda folder: (folder / "tekken.json").unlink(), UnsupportedError, ["without tekken.json"]),
        (lambda folder: (folder / "consolidated.safetensors").unlink(), FormatError, ["no consolidated*.safetensors"]),
    ],
    ids=["moe", "yarn", "no-head-dim", "wrong-dim", "no-tekken", "no-weights"],
)
def test_bad_mistral_format_checkpoint(hf_checkpoints, tmp_path, breaks, error, fragments):
    """A Mistral-format folder (`--mistral-format`) the reference converts otherwise, or broken, is refused."""
    folder = tmp_path / "tiny-mistral-format"
    shutil.copytree(hf_checkpoints["tiny-mistral-format"], folder)
    breaks(folder)
    out = tmp_path / "out" / "model.gguf"
    out.parent.mkdir()
    with pytest.raises(error) as caught:
        convert_hf(folder, out, "q8_0", mistral_format=True)
    assert all(fragment in str(caught.value) for fragment in fragments), str(caught.value)
    assert not list(out.parent.iterdir())

"""Record the metadata and tensor infos llama.cpp's converter writes for real model shapes, without real weights,
into tests/data/skeletons/<name>.json; `memory_models.py` turns each into a skeleton GGUF (its data a hole).

For each entry of `SKELETONS`:
1. transformers' default configuration of the model type (each mirrors a released checkpoint), with the entry's
   overrides for a second size;
2. the model class a checkpoint of that type is saved from, built on torch's `meta` device, and
   `save_pretrained` run with safetensors files whose header is real and whose data is a file hole, so the
   folder holds the names, shapes and dtypes a transformers 5 checkpoint has;
3. `convert_hf_to_gguf.py`'s model class for the folder, run lazily (no tensor data is read or computed) with
   the vocabulary replaced by a synthetic one of the config's size (tokenizer "none", `<arch>.vocab_size`):
   what its GGUF writer would write, before it writes, is the record.

Where released checkpoints hold tensors that transformers 5 does not save (Qwen's MTP layer, Gemma 3n's K and V
projections in layers that share a cache), the checkpoint gets them as the released ones have them.

Needs transformers 5 (with its tokenizers), torch and llama-cpp-python 0.3.36's sdist, unpacked:

    pip download --no-binary :all: --no-deps llama-cpp-python==0.3.36 && tar xzf llama_cpp_python-0.3.36.tar.gz
    python tests/data/make_skeletons.py --llama-cpp llama_cpp_python-0.3.36/vendor/llama.cpp [name ...]
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import struct
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "skeletons"

MTP = {"qwen3_5", "qwen3_5_moe", "qwen3_next"}  # whose released checkpoints carry an MTP layer (see _add_mtp)
# saved from the text model's class: Gemma 3n's vision tower is timm's, which needs a torchvision built for this
# torch; the language model and its names are the same, and the converter leaves the towers out of the text GGUF
TEXT_ONLY = {"gemma3n"}
# name -> (transformers model type, overrides of its default text configuration); the first entry of a family is
# the default configuration itself
SKELETONS: dict[str, tuple[str, dict]] = {
    "gemma4-default": ("gemma4", {}),
    "gemma4-48-layers": ("gemma4", {"num_hidden_layers": 48, "hidden_size": 3840, "intermediate_size": 15360}),
    "qwen3_5-default": ("qwen3_5", {}),
    "qwen3_5-64-layers": ("qwen3_5", {"num_hidden_layers": 64, "hidden_size": 5120, "intermediate_size": 17408}),
    "qwen3_5_moe-default": ("qwen3_5_moe", {}),
    "qwen3_5_moe-60-layers": ("qwen3_5_moe", {"num_hidden_layers": 60, "hidden_size": 4096, "num_experts": 512}),
    "qwen3_next-default": ("qwen3_next", {}),
    "qwen3_next-24-layers": ("qwen3_next", {"num_hidden_layers": 24}),
    # GLM-4.5-Air is the default but for its heads of 128 (the default derives 4096 / 96 = 42) and its Q, K and V
    # biases; then GLM-4.5's shape
    "glm-4.5-air": ("glm4_moe", {"head_dim": 128, "attention_bias": True}),
    "glm-4.5": (
        "glm4_moe",
        {
            "num_hidden_layers": 92,
            "hidden_size": 5120,
            "head_dim": 128,
            "attention_bias": True,
            "intermediate_size": 12288,
            "moe_intermediate_size": 1536,
            "n_routed_experts": 160,
            "first_k_dense_replace": 3,
            "use_qk_norm": True,
            "routed_scaling_factor": 2.5,
        },
    ),
    "llama4-default": ("llama4", {}),
    "llama4-interleaved": ("llama4", {"num_local_experts": 128, "interleave_moe_layer_step": 2}),
    "mistral3-default": ("mistral3", {}),
    "mistral3-26-layers": ("mistral3", {"num_hidden_layers": 26, "hidden_size": 3072, "intermediate_size": 9216}),
    "mistral4-default": ("mistral3", {"model_type": "mistral4"}),  # released as Mistral 3's multimodal class
    "gemma3n-default": ("gemma3n", {}),
    "gemma3n-30-layers": ("gemma3n", {"num_hidden_layers": 30, "num_kv_shared_layers": 10}),
    # architectures without an exact entry, for the generic estimate's check (test_llamacpp_generic.py)
    "smollm3-default": ("smollm3", {}),
    "olmo2-default": ("olmo2", {}),
    "granite-default": ("granite", {}),
    "exaone4-default": ("exaone4", {}),
    "exaone4-64-layers": (
        "exaone4",
        {
            "num_hidden_layers": 64,
            "hidden_size": 5120,
            "intermediate_size": 27392,
            "num_attention_heads": 40,
            "num_key_value_heads": 8,
        },
    ),
    "olmo3-default": ("olmo3", {}),  # llama.cpp's olmo2 with sliding-window layers
}
# projector files (`--mmproj`): name -> (transformers model type, overrides of its vision configuration), converted
# as `convert_hf_to_gguf.py --mmproj` converts them (F16); the image processor's defaults stand in for the
# checkpoint's preprocessor_config.json
MMPROJ_SKELETONS: dict[str, tuple[str, dict]] = {
    # Gemma 3 4B-27B's SigLIP (transformers' default vision configuration is SigLIP base, not Gemma 3's)
    "mmproj-gemma3": (
        "gemma3",
        {
            "hidden_size": 1152,
            "intermediate_size": 4304,
            "num_hidden_layers": 27,
            "num_attention_heads": 16,
            "image_size": 896,
            "patch_size": 14,
        },
    ),
    # Qwen3-VL 8B's (the default's output width is not its text model's)
    "mmproj-qwen3_vl": ("qwen3_vl", {"out_hidden_size": 4096}),
    # Qwen2.5-VL 72B's (the default's width is its output's, and its output is not its text model's)
    "mmproj-qwen2_5_vl": ("qwen2_5_vl", {"hidden_size": 1280, "out_hidden_size": 8192}),
}
# tensor name prefixes transformers 5 saves differently from the released checkpoints: saved -> released
RELEASED_PREFIXES = {"gemma3": {"vision_tower.": "vision_tower.vision_model."}}

_DTYPE_BYTES = {"F32": 4, "BF16": 2, "F16": 2, "I64": 8, "I32": 4, "BOOL": 1, "U8": 1, "F8_E4M3": 1}
_SAFETENSORS_DTYPES = {"float32": "F32", "bfloat16": "BF16", "float16": "F16", "int64": "I64", "int32": "I32",
                       "bool": "BOOL", "uint8": "U8", "float8_e4m3fn": "F8_E4M3"}  # fmt: skip


def _write_hole(filename, entries: dict[str, tuple[str, list[int]]], metadata: dict | None) -> None:
    """A safetensors file of these tensors (name -> dtype, shape) whose data is a hole (a sparse file)."""
    header: dict = {}
    offset = 0
    for name, (dtype, shape) in entries.items():
        n = _DTYPE_BYTES[dtype] * math.prod(shape)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    if metadata:
        header["__metadata__"] = metadata
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    with open(filename, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)) + encoded)
        f.truncate(8 + len(encoded) + offset)


def _save_as_hole(tensors, filename, metadata=None) -> None:
    """safetensors' `save_file`, the data left a hole."""
    entries = {name: (_SAFETENSORS_DTYPES[str(t.dtype).removeprefix("torch.")], list(t.shape))
               for name, t in tensors.items()}  # fmt: skip
    _write_hole(filename, entries, metadata)


def _read_entries(folder: Path) -> dict[str, tuple[str, list[int]]]:
    """Every tensor of the checkpoint in `folder`: name -> (dtype, shape)."""
    entries = {}
    for part in folder.glob("model*.safetensors"):
        with open(part, "rb") as f:
            header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
        entries.update({name: (h["dtype"], h["shape"]) for name, h in header.items() if name != "__metadata__"})
    return entries


def _add_part(folder: Path, entries: dict[str, tuple[str, list[int]]], name: str) -> None:
    """Tensors the released checkpoints have and a transformers 5 save lacks, in a file of their own."""
    _write_hole(folder / name, entries, {"format": "pt"})
    index = folder / "model.safetensors.index.json"
    if index.exists():
        record = json.loads(index.read_text())
        record["weight_map"].update(dict.fromkeys(entries, name))
        index.write_text(json.dumps(record))


def _add_shared_kv_projections(folder: Path, text) -> None:
    """Gemma 3n's released checkpoints (transformers 4.53) keep K and V projections in the layers that reuse an
    earlier layer's cache, and llama.cpp requires them; transformers 5 leaves them out."""
    entries = _read_entries(folder)
    first_shared = text.num_hidden_layers - text.num_kv_shared_layers
    source = f"layers.{first_shared - 1}.self_attn."
    prefix = next(n for n in entries if source in n).partition(source)[0]
    own = {n.removeprefix(prefix + source): e for n, e in entries.items() if n.startswith(prefix + source)}
    added = {}
    for il in range(first_shared, text.num_hidden_layers):
        layer = f"{prefix}layers.{il}.self_attn."
        added.update({layer + n: e for n, e in own.items() if layer + n not in entries})
    _add_part(folder, added, "model-shared-kv.safetensors")


def _add_mtp(folder: Path, text) -> None:
    """The multi-token-prediction module Qwen's checkpoints carry beside what transformers models: `mtp.fc`, its
    norms and one decoder layer shaped as the model's last full-attention layer."""
    entries = _read_entries(folder)
    last_full = max(il for il, kind in enumerate(text.layer_types) if kind == "full_attention")
    layer = f"layers.{last_full}."
    prefix = next(n for n in entries if layer in n).partition(layer)[0]
    dtype, h = entries[f"{prefix}{layer}input_layernorm.weight"][0], text.hidden_size
    mtp = {
        "mtp.layers.0." + n.removeprefix(prefix + layer): e for n, e in entries.items() if n.startswith(prefix + layer)
    }
    mtp["mtp.fc.weight"] = (dtype, [h, 2 * h])
    for norm in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
        mtp[f"mtp.{norm}.weight"] = (dtype, [h])
    _add_part(folder, mtp, "model-mtp.safetensors")


def _text_config(config):
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def save_checkpoint(model_type: str, overrides: dict, folder: Path, *, vision: bool = False) -> int:
    """A transformers 5 checkpoint of `model_type` in `folder`, its tensor data a hole; returns the vocabulary
    size. `vision`: the overrides are the vision configuration's, and the image processor's defaults are saved."""
    import torch
    import transformers
    import transformers.modeling_utils
    from transformers.models.auto import modeling_auto

    default = transformers.AutoConfig.for_model(model_type)
    nested = _text_config(default) is not default
    # built again from the overrides, so what the config derives from them (its layer types) follows
    if vision:
        vision_config = default.vision_config.to_dict() | overrides
        config = transformers.AutoConfig.for_model(model_type, vision_config=vision_config)
        _image_processor(model_type).save_pretrained(folder)
    else:
        config = transformers.AutoConfig.for_model(model_type, **({"text_config": overrides} if nested else overrides))
    text = _text_config(config)
    configured = config.vision_config if vision else text
    for key, value in overrides.items():
        if getattr(configured, key, None) != value:
            raise SystemExit(f"{model_type}'s configuration did not take {key}={value!r}")
    if model_type in TEXT_ONLY:
        config, model_type = text, text.model_type
    class_name = (modeling_auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES.get(model_type)
                  or modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type])  # fmt: skip
    with torch.device("meta"):
        model = getattr(transformers, class_name)(config)
    transformers.modeling_utils.safe_save_file = _save_as_hole
    model.save_pretrained(folder, max_shard_size="100TB")
    if model_type in MTP:
        _add_mtp(folder, text)
    if model_type == "gemma3n_text":
        _add_shared_kv_projections(folder, text)
    if vision and model_type in RELEASED_PREFIXES:
        _rename(folder, RELEASED_PREFIXES[model_type])
    return int(text.vocab_size)


def _rename(folder: Path, prefixes: dict[str, str]) -> None:
    """The checkpoint's tensors under the names the released checkpoints give them (`prefixes`: saved ->
    released)."""
    entries = {}
    for name, entry in _read_entries(folder).items():
        old = next((p for p in prefixes if name.startswith(p)), None)
        entries[prefixes[old] + name.removeprefix(old) if old else name] = entry
    for part in folder.glob("model*.safetensors"):
        part.unlink()
    (folder / "model.safetensors.index.json").unlink(missing_ok=True)
    _write_hole(folder / "model.safetensors", entries, {"format": "pt"})


def _image_processor(model_type: str):
    """The model type's image processor with its defaults (what a checkpoint's preprocessor_config.json holds)."""
    import transformers
    from transformers.models.auto import image_processing_auto

    names = image_processing_auto.IMAGE_PROCESSOR_MAPPING_NAMES[model_type]  # backend -> class name
    return getattr(transformers, names["pil"])()


def convert(folder: Path, name: str, n_vocab: int, llama_cpp: Path, *, mmproj: bool = False) -> dict:
    """What the reference converter writes for the checkpoint in `folder`, as the record's JSON (`mmproj`: its
    projector file, F16, as `--mmproj` writes it)."""
    sys.path[:0] = [str(llama_cpp / "gguf-py"), str(llama_cpp)]
    import gguf
    import torch
    from conversion import ModelBase, ModelType, get_model_architecture, get_model_class
    from tokenizers import Tokenizer, models

    # some converters read the vocabulary's size from tokenizer.json themselves
    Tokenizer(models.BPE({f"<t{i}>": i for i in range(n_vocab)}, [])).save(str(folder / "tokenizer.json"))
    hparams = ModelBase.load_hparams(folder, False)
    model_type = ModelType.MMPROJ if mmproj else ModelType.TEXT
    hf_class = get_model_architecture(hparams, model_type)
    file_type = gguf.LlamaFileType.MOSTLY_F16 if mmproj else gguf.LlamaFileType.MOSTLY_Q8_0
    with torch.inference_mode():
        model = get_model_class(hf_class, mmproj=mmproj)(folder, file_type, folder / "model.gguf", model_name=name)
        model = getattr(model, "impl", model)  # Mistral3Model converts through the class of its text model
        writer = model.gguf_writer

        def synthetic_vocab() -> None:
            writer.add_tokenizer_model("none")
            writer.add_vocab_size(n_vocab)

        model.set_vocab = synthetic_vocab
        model.prepare_tensors()
        model.prepare_metadata(vocab_only=False)
    metadata = {}
    for key, v in writer.kv_data[0].items():
        value = v.value.tolist() if hasattr(v.value, "tolist") else v.value
        value = int(value) if type(value).__name__ == "LlamaFileType" else value
        element = v.sub_type
        if v.type == gguf.GGUFValueType.ARRAY and element is None:  # typed when written, by the first element
            element = gguf.GGUFValueType.get_type(value[0])
        metadata[key] = [v.type.name, value] + ([element.name] if element else [])
    tensors = [[name, list(map(int, info.shape)), info.dtype.name] for name, info in writer.tensors[0].items()]
    return {"hf_class": hf_class, "converter": type(model).__name__, "metadata": metadata, "tensors": tensors}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llama-cpp", type=Path, required=True, help="llama.cpp's source (the sdist's vendor/)")
    parser.add_argument("names", nargs="*", help=f"of {', '.join([*SKELETONS, *MMPROJ_SKELETONS])}; all without")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    import transformers

    OUT.mkdir(exist_ok=True)
    for name in args.names or [*SKELETONS, *MMPROJ_SKELETONS]:
        mmproj = name in MMPROJ_SKELETONS
        model_type, overrides = (MMPROJ_SKELETONS if mmproj else SKELETONS)[name]
        with tempfile.TemporaryDirectory() as tmp:
            n_vocab = save_checkpoint(model_type, overrides, Path(tmp), vision=mmproj)
            record = {"model_type": model_type, "overrides": overrides, "transformers": transformers.__version__,
                      **convert(Path(tmp), name, n_vocab, args.llama_cpp.resolve(), mmproj=mmproj)}  # fmt: skip
        (OUT / f"{name}.json").write_text(json.dumps(record, separators=(",", ":")) + "\n")
        print(name, record["metadata"]["general.architecture"][1], len(record["tensors"]), "tensors", flush=True)


if __name__ == "__main__":
    main()

"""What every projector conversion (`--mmproj`, llama.cpp's `MmprojModel`) shares: the hyperparameters it reads
(the vision config, the text model's width, the image processor's settings), its tensor filter, the `clip.*`
keys every vision projector gets, and its forced tensor types.

A projector is a `Conversion` to the `clip` architecture declared by its family (`Family.projectors`) and run
by the same engine as the text models (`convert_hf(..., mmproj=True)`), over a `ProjectorConfig` in place of
the text model's hyperparameters.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import FormatError
from .config import CONFIG_NAME, ConfigClass, HFConfig, load_config, read_json_object
from .kv import KV

#: The keys `MmprojModel` takes the encoder's block count from, in order.
PROJECTOR_LAYERS = ("n_layers", "num_hidden_layers", "n_layer", "num_layers", "depth", "layers", "encoder_layers",
                    "vt_num_hidden_layers")  # fmt: skip
_PREPROCESSOR = "preprocessor_config.json"
_PROCESSOR = "processor_config.json"


class ProjectorConfig(HFConfig):
    """The vision config (with its class's defaults) as the projector's converter reads it: `MmprojModel`'s
    `hparams`; `text_hidden_size` (its `n_embd_text`, the projection's width), `preprocessor` (the image
    processor's settings) and `model` (the whole config, sub-configs nested: its `global_config`) beside it."""

    def __init__(self, vision: dict[str, Any], text_hidden_size: int, preprocessor: dict[str, Any],
                 model: HFConfig) -> None:  # fmt: skip
        super().__init__(vision)
        self.text_hidden_size = text_hidden_size
        self.preprocessor = preprocessor
        self.model = model


def projector_config(h: HFConfig) -> ProjectorConfig:
    """`h` as the projector's config it must be (a projector conversion's writers run over one)."""
    if not isinstance(h, ProjectorConfig):
        raise TypeError("a projector conversion runs over a ProjectorConfig (convert_hf(..., mmproj=True))")
    return h


def projector_architecture(raw: dict[str, Any], folder: Path) -> str:
    """The class the converter picks a projector by: the vision config's `architectures[0]`, else the model's."""
    for config in (raw.get("vision_config"), raw):
        arches = config.get("architectures") if isinstance(config, dict) else None
        if isinstance(arches, list) and arches and isinstance(arches[0], str):
            return arches[0]
    raise FormatError(folder / CONFIG_NAME, None, "no 'architectures' list naming the model class")


def load_projector_hparams(folder: Path, classes: dict[str, ConfigClass]) -> ProjectorConfig:
    """`MmprojModel.__init__`'s view of the checkpoint: the vision config, the text width, the processor files."""
    model = load_config(folder, classes)
    vision = model.get("vision_config")
    if not isinstance(vision, dict):
        raise FormatError(folder / CONFIG_NAME, None, "no vision_config: the checkpoint has no vision encoder")
    text = model.get("text_config")
    text = {**model, **text} if isinstance(text, dict) else model
    width = text.get("hidden_size", text.get("n_embd", 0))
    if not isinstance(width, int) or isinstance(width, bool) or width < 1:
        raise FormatError(folder / CONFIG_NAME, None, f"the text model's hidden_size is {width!r}, not a width")
    return ProjectorConfig(vision, width, _preprocessor(folder), model)


def vision_defaults(h: HFConfig, **values: Any) -> ProjectorConfig:
    """`h` with `values` for the vision config's keys it lacks: the values a projector's converter sets in its
    `hparams_vision` before writing the common keys (Qwen-VL's default image size, ...)."""
    h = projector_config(h)
    return ProjectorConfig(values | h, h.text_hidden_size, h.preprocessor, h.model)


def _preprocessor(folder: Path) -> dict[str, Any]:
    """preprocessor_config.json (its `media_proc_cfg` lifted), then processor_config.json (its `image_processor`
    lifted) over it: each where the folder has it."""
    settings: dict[str, Any] = {}
    for name, nested in ((_PREPROCESSOR, "media_proc_cfg"), (_PROCESSOR, "image_processor")):
        if (folder / name).is_file():
            cfg = read_json_object(folder / name, name)
            inner = cfg.get(nested)
            settings |= cfg | (inner if isinstance(inner, dict) else {})
    return settings


def projector_filter(name: str) -> str | None:
    """`MmprojModel.filter_tensors` and `ModelBase.filter_tensors`: drop the language model's tensors."""
    if "language_model." in name:
        return None
    if name.endswith("e_score_correction_bias"):
        name = name.replace("e_score_correction_bias", "e_score_correction.bias")
    return name


def no_vocab(kv: KV, folder: Path, h: HFConfig) -> None:
    """A projector has no vocabulary."""


def _find(h: HFConfig, keys: tuple[str, ...], what: str = "vision_config") -> Any:
    """The first of `keys` in an encoder's config (`what`: the vision config, or the audio config), as a count."""
    value = h.find(keys, None)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise FormatError(CONFIG_NAME, None, f"{what}: {' / '.join(keys)} is {value!r}, not a count")
    return value


def write_vision_parameters(kv: KV, arch: str, h: HFConfig, rope: dict[str, Any], file_type: int) -> None:
    """`MmprojModel.set_gguf_parameters` for a vision encoder: the file type, the encoder's sizes, the image
    normalization (a projector conversion's `text_parameters`)."""
    h = projector_config(h)
    kv.u32("general.file_type", file_type)
    kv.bool("clip.has_vision_encoder", True)
    kv.u32("clip.vision.projection_dim", h.text_hidden_size)
    kv.u32("clip.vision.image_size", _find(h, ("image_size",)))
    kv.u32("clip.vision.patch_size", _find(h, ("patch_size",)))
    kv.u32("clip.vision.embedding_length", _find(h, ("hidden_size", "width", "vt_hidden_size")))
    kv.u32("clip.vision.feed_forward_length", _find(h, ("intermediate_size", "vt_intermediate_size")))
    kv.u32("clip.vision.block_count", _find(h, PROJECTOR_LAYERS))
    kv.u32("clip.vision.attention.head_count", _find(h, ("num_attention_heads", "num_heads", "heads",
                                                         "vt_num_attention_heads")))  # fmt: skip
    for key in ("image_mean", "image_std"):
        values = h.preprocessor.get(key)
        if not isinstance(values, list):
            raise FormatError(_PREPROCESSOR, None, f"{key} is {values!r}: the image processor's normalization "
                                                   "(preprocessor_config.json) is needed")  # fmt: skip
        kv.array(f"clip.vision.{key}", values, _PREPROCESSOR)


def write_audio_parameters(kv: KV, h: HFConfig, audio: dict[str, Any]) -> None:
    """`MmprojModel.set_gguf_parameters` for an audio encoder beside the vision one: its sizes, from `audio`
    (the audio config as the model's converter remaps it)."""
    h = projector_config(h)
    kv.bool("clip.has_audio_encoder", True)
    kv.u32("clip.audio.projection_dim", h.text_hidden_size)
    config = HFConfig(audio)
    kv.u32("clip.audio.embedding_length", _find(config, ("hidden_size",), "audio_config"))
    kv.u32("clip.audio.feed_forward_length", _find(config, ("intermediate_size",), "audio_config"))
    kv.u32("clip.audio.block_count", _find(config, PROJECTOR_LAYERS, "audio_config"))
    kv.u32("clip.audio.attention.head_count", _find(config, ("num_attention_heads",), "audio_config"))


def patch_embedding_type(hf_name: str, gguf_name: str, matrix_type: str) -> str | None:
    """`MmprojModel.tensor_force_quant`: the patch embedding and patch merger in F16 under f16, else F32."""
    if ".patch_embd.weight" in gguf_name or ".patch_merger.weight" in gguf_name:
        return "F16" if matrix_type == "F16" else "F32"
    return None

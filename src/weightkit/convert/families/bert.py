"""BERT encoders (sentence-transformers embedding models, classifiers): `BertModel` of llama.cpp's converter."""

from __future__ import annotations

from pathlib import Path

from ..hf.config import CONFIG_NAME, ConfigClass, HFConfig
from ..hf.kv import KV
from ..hf.tokenizer import write_wordpiece_vocab
from .decoder import FF, H, pooling_type
from .family import Conversion, Dims, Family

_NAMES = {
    "embeddings.word_embeddings": "token_embd",
    "embeddings.position_embeddings": "position_embd",
    "embeddings.token_type_embeddings": "token_types",
    "embeddings.LayerNorm": "token_embd_norm",
    "encoder.layer.{bid}.attention.self.query": "blk.{bid}.attn_q",
    "encoder.layer.{bid}.attention.self.key": "blk.{bid}.attn_k",
    "encoder.layer.{bid}.attention.self.value": "blk.{bid}.attn_v",
    "encoder.layer.{bid}.attention.output.dense": "blk.{bid}.attn_output",
    "encoder.layer.{bid}.attention.output.LayerNorm": "blk.{bid}.attn_output_norm",
    "encoder.layer.{bid}.intermediate.dense": "blk.{bid}.ffn_up",
    "encoder.layer.{bid}.output.dense": "blk.{bid}.ffn_down",
    "encoder.layer.{bid}.output.LayerNorm": "blk.{bid}.layer_output_norm",
}
_REQUIRED: dict[str, Dims] = {
    "token_embd.weight": (None, H),
    "position_embd.weight": ("max_position_embeddings", H),
    "token_types.weight": ("type_vocab_size", H),
    "token_embd_norm.weight": (H,),
    "blk.{bid}.attn_q.weight": (H, H),
    "blk.{bid}.attn_k.weight": (H, H),
    "blk.{bid}.attn_v.weight": (H, H),
    "blk.{bid}.attn_output.weight": (H, H),
    "blk.{bid}.attn_output_norm.weight": (H,),
    "blk.{bid}.ffn_up.weight": (FF, H),
    "blk.{bid}.ffn_down.weight": (H, FF),
    "blk.{bid}.layer_output_norm.weight": (H,),
}
_DROPPED = ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias")


def _filter(name: str) -> str | None:
    """`BertModel.filter_tensors`: no `bert.` prefix, gamma/beta as weight/bias, no pooler or pre-training heads."""
    name = name.removeprefix("bert.")
    if name.endswith(".gamma"):
        name = name[:-6] + ".weight"
    if name.endswith(".beta"):
        name = name[:-5] + ".bias"
    if name in _DROPPED or name.startswith(("cls.predictions", "cls.seq_relationship")):
        return None
    return name


def _parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`BertModel.set_gguf_parameters`'s additions: not causal, pooling, and real classifier labels."""
    kv.bool(f"{arch}.attention.causal", False)
    pooling_type(kv, arch, folder, h)
    labels = h.get("id2label") or {}
    if labels and not (len(labels) == 2 and labels.get(0) == "LABEL_0"):  # AutoConfig's dummy labels
        kv.array(f"{arch}.classifier.output_labels", [v for _, v in sorted(labels.items())], str(folder / CONFIG_NAME))


FAMILY = Family(
    name="bert",
    configs={
        "bert": ConfigClass(
            "BertConfig",
            {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
             "intermediate_size": 3072, "hidden_act": "gelu", "max_position_embeddings": 512, "type_vocab_size": 2,
             "layer_norm_eps": 1e-12, "pad_token_id": 0, "tie_word_embeddings": True},
        ),
    },
    conversions={
        "BertModel": Conversion(
            gguf="bert",
            tensor_names=_NAMES,
            required=_REQUIRED,
            vocab=write_wordpiece_vocab,
            filters=(_filter,),
            parameters=(_parameters,),
        ),
    },
)  # fmt: skip

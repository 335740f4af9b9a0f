"""Record the type llama.cpp's llama-quantize gives every tensor, per file type, in tests/data/llama_mixes.json
(needs llama-cpp-python, whose libllama does the quantizing; CI only reads the result).

    python tests/data/make_llama_mixes.py [out.json]

Small synthetic models of the shapes the mixture rules care about (grouped-query attention, an 80-layer
"70B", tied embeddings with rows that are not whole K blocks, 8-expert and 4-expert MoE, falcon's fused
QKV) are quantized by `llama_model_quantize` to every file type llama-quantize offers, with and without an
importance matrix, and with some of llama-quantize's options (`OPTION_RUNS`); the output's tensor types
are what the JSON records ("error" where llama.cpp refused),
as one letter per tensor in the model's order: letter i (from "a") is `types[i]`.
Only names, shapes and a few hyperparameters matter to the rules, so the matrices have 8 rows.
"""

from __future__ import annotations

import ctypes
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

import weightkit
from weightkit.gguf import GGUFValueType, Value, write_gguf

OUT = Path(__file__).with_name("llama_mixes.json")
ROWS = 8
# llama-quantize's names (tools/quantize/quantize.cpp) and their llama_ftype ids.
FTYPES = {
    "Q4_0": 2, "Q4_1": 3, "Q5_0": 8, "Q5_1": 9, "IQ2_XXS": 19, "IQ2_XS": 20, "IQ2_S": 28, "IQ2_M": 29,
    "IQ1_S": 24, "IQ1_M": 31, "TQ1_0": 36, "TQ2_0": 37, "Q2_K": 10, "Q2_K_S": 21, "IQ3_XXS": 23, "IQ3_S": 26,
    "IQ3_M": 27, "IQ3_XS": 22, "Q3_K_S": 11, "Q3_K_M": 12, "Q3_K_L": 13, "IQ4_NL": 25, "IQ4_XS": 30,
    "Q4_K_S": 14, "Q4_K_M": 15, "Q5_K_S": 16, "Q5_K_M": 17, "Q6_K": 18, "Q8_0": 7, "MXFP4_MOE": 38, "Q1_0": 40,
    "Q2_0": 41, "F16": 1,
}  # fmt: skip


def _layer(i: int, embd: int, ff: int, experts: int, fused: bool) -> dict[str, tuple[int, ...]]:
    p = f"blk.{i}."
    t: dict[str, tuple[int, ...]] = {p + "attn_norm.weight": (embd,), p + "ffn_norm.weight": (embd,)}
    if fused:
        t[p + "attn_qkv.weight"] = (ROWS, embd)
    else:
        t.update(
            {p + "attn_q.weight": (ROWS, embd), p + "attn_k.weight": (ROWS, embd), p + "attn_v.weight": (ROWS, embd)}
        )
    t[p + "attn_output.weight"] = (ROWS, embd)
    if experts:
        t[p + "ffn_gate_inp.weight"] = (experts, embd)
        for name, width in (("ffn_gate_exps", embd), ("ffn_up_exps", embd), ("ffn_down_exps", ff)):
            t[p + name + ".weight"] = (experts, ROWS, width)
    else:
        t.update({p + "ffn_up.weight": (ROWS, embd), p + "ffn_down.weight": (ROWS, ff)})
        if not fused:
            t[p + "ffn_gate.weight"] = (ROWS, embd)
    return t


def model(arch: str, layers: int, heads: int, kv_heads: int, *, embd=256, ff=512, experts=0, tied=False,
          fused=False) -> tuple[dict, dict[str, tuple[int, ...]]]:  # fmt: skip
    u32 = GGUFValueType.UINT32
    md = {
        "general.architecture": arch,
        f"{arch}.context_length": Value(4096, u32),
        f"{arch}.embedding_length": Value(embd, u32),
        f"{arch}.block_count": Value(layers, u32),
        f"{arch}.feed_forward_length": Value(ff, u32),
        f"{arch}.attention.head_count": Value(heads, u32),
        f"{arch}.attention.head_count_kv": Value(kv_heads, u32),
        f"{arch}.attention.layer_norm_rms_epsilon": Value(1e-6, GGUFValueType.FLOAT32),
        f"{arch}.attention.layer_norm_epsilon": Value(1e-5, GGUFValueType.FLOAT32),
    }
    if experts:
        md[f"{arch}.expert_count"] = Value(experts, u32)
        md[f"{arch}.expert_used_count"] = Value(2, u32)
        md[f"{arch}.expert_feed_forward_length"] = Value(ff, u32)
    tensors = {"token_embd.weight": (ROWS, embd), "output_norm.weight": (embd,)}
    if not tied:
        tensors["output.weight"] = (ROWS, embd)
    for i in range(layers):
        tensors.update(_layer(i, embd, ff, experts, fused))
    return md, tensors


MODELS = {
    "llama-gqa4": model("llama", 16, 8, 2),
    "llama-70b": model("llama", 80, 8, 1, ff=256),
    "gemma3-tied-640": model("gemma3", 18, 4, 1, embd=640, ff=2048, tied=True),
    "qwen3moe-8x": model("qwen3moe", 16, 8, 8, experts=8),
    "llama-4x": model("llama", 8, 4, 4, experts=4),
    "falcon": model("falcon", 32, 8, 8, fused=True),
}


def _write(path: Path, md: dict, shapes: dict[str, tuple[int, ...]], rng: np.random.Generator) -> None:
    tensors = {n: rng.standard_normal(s).astype(np.float32 if len(s) == 1 else np.float16) for n, s in shapes.items()}
    write_gguf(path, md, tensors)


def _imatrix(shapes: dict[str, tuple[int, ...]], rng: np.random.Generator):
    """A llama_model_imatrix_data array (null-terminated) of positive weights for every matrix."""
    import llama_cpp

    entries, keep = [], []
    for name, shape in shapes.items():
        if len(shape) < 2:
            continue
        values = rng.uniform(0.5, 2, int(np.prod(shape[:-2], dtype=int)) * shape[-1]).astype(np.float32)
        keep.append(values)
        ptr = values.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        entries.append(llama_cpp.llama_model_imatrix_data(name.encode(), ptr, values.size))
    entries.append(llama_cpp.llama_model_imatrix_data(None, None, 0))
    return (llama_cpp.llama_model_imatrix_data * len(entries))(*entries), keep


# Runs beyond every file type with and without an imatrix: llama-quantize's options, written as on its
# command line after the file type (the test reads these keys the same way).
OPTION_RUNS = (
    "Q4_K_M --pure",
    "Q3_K_L --pure",
    "Q4_K_M --leave-output-tensor",
    "Q4_K_M --tensor-type attn_v=q8_0 --tensor-type blk\\.[0-3]\\.ffn_down=iq4_xs --tensor-type ATTN_OUTPUT=q5_0"
    " --tensor-type token_embd=f32",
    "Q2_K --token-embedding-type q8_0 --output-tensor-type q5_k",
    "IQ3_M --output-tensor-type f32 --tensor-type ffn_up=q6_k",
    "F16 --tensor-type attn_v=q8_0",
)


def parse_key(key: str) -> tuple[str, dict]:
    """A record's key: the file type, then "imatrix" and llama-quantize's options."""
    words = key.split()
    options: dict = {"imatrix": False, "pure": False, "leave_output": False, "tensor_types": []}
    i = 1
    while i < len(words):
        word = words[i]
        if word in ("imatrix", "--pure", "--leave-output-tensor"):
            options[{"imatrix": "imatrix", "--pure": "pure", "--leave-output-tensor": "leave_output"}[word]] = True
        elif word == "--tensor-type":
            i += 1
            pattern, _, type_name = words[i].partition("=")
            options["tensor_types"].append((pattern.lower(), type_name.upper()))
        else:  # --output-tensor-type / --token-embedding-type TYPE
            i += 1
            options[word.lstrip("-").replace("-", "_")] = words[i].upper()
        i += 1
    return words[0], options


def _quantize(src: Path, dst: Path, key: str, imatrix) -> dict[str, str] | None:
    import llama_cpp

    from weightkit.dtypes import ggml_type

    ftype_name, options = parse_key(key)
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = FTYPES[ftype_name]
    params.nthread = 2
    params.pure = options["pure"]
    params.quantize_output_tensor = not options["leave_output"]
    for field in ("output_tensor_type", "token_embedding_type"):
        if field in options:
            setattr(params, field, ggml_type(options[field]).type.value)
    if options["imatrix"]:
        params.imatrix = ctypes.cast(imatrix, ctypes.POINTER(llama_cpp.llama_model_imatrix_data))
    overrides = [
        llama_cpp.llama_model_tensor_override(p.encode(), ggml_type(t).type.value) for p, t in options["tensor_types"]
    ]
    if overrides:
        overrides.append(llama_cpp.llama_model_tensor_override(None, 0))
        array = (llama_cpp.llama_model_tensor_override * len(overrides))(*overrides)
        params.tt_overrides = ctypes.cast(array, ctypes.POINTER(llama_cpp.llama_model_tensor_override))
    if llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params)) != 0:
        return None
    with weightkit.open(dst) as m:
        return {name: info.dtype.name for name, info in m.tensors.items()}


def main(out: Path) -> None:
    import llama_cpp

    quiet = llama_cpp.llama_log_callback(lambda level, text, data: None)  # kept alive while llama.cpp logs
    llama_cpp.llama_log_set(quiet, ctypes.c_void_p(0))
    rng = np.random.default_rng(7)
    record = {}
    with tempfile.TemporaryDirectory() as tmp:
        for model_name, (md, shapes) in MODELS.items():
            src = Path(tmp) / f"{model_name}.gguf"
            _write(src, md, shapes, rng)
            imatrix, _keep = _imatrix(shapes, rng)
            plans = {}
            keys = [name + weighted for name in FTYPES for weighted in ("", " imatrix")] + list(OPTION_RUNS)
            for key in keys:
                types = _quantize(src, Path(tmp) / "out.gguf", key, imatrix)
                plans[key] = "error" if types is None else "".join(_letter(types[n]) for n in shapes)
                print(model_name, key, "error" if types is None else "ok", file=sys.stderr)
            metadata = {k: (v.value if isinstance(v, Value) else v) for k, v in md.items()}
            record[model_name] = {"metadata": metadata, "tensors": {n: list(s) for n, s in shapes.items()},
                                  "plans": plans}  # fmt: skip
    out.write_text(json.dumps({"types": TYPE_NAMES, "models": record}) + "\n")


TYPE_NAMES: list[str] = []


def _letter(type_name: str) -> str:
    if type_name not in TYPE_NAMES:
        TYPE_NAMES.append(type_name)
    return chr(ord("a") + TYPE_NAMES.index(type_name))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)

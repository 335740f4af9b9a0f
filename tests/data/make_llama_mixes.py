"""Record the type llama.cpp's llama-quantize gives every tensor, per file type, in tests/data/llama_mixes.json
(needs llama-cpp-python, whose libllama does the quantizing; CI only reads the result).

    python tests/data/make_llama_mixes.py [out.json] [--files-only]

(`--files-only` records the "files" section again and keeps the plans.)

Small synthetic models of the shapes the mixture rules care about (grouped-query attention, an 80-layer
"70B", tied embeddings with rows that are not whole K blocks, 8-expert and 4-expert MoE, falcon's fused
QKV) are quantized by `llama_model_quantize` to every file type llama-quantize offers, with and without an
importance matrix, and with some of llama-quantize's options (`OPTION_RUNS`); the output's tensor types
are what the JSON records ("error" where llama.cpp refused), as one letter per tensor in the model's
order: letter i (from "a") is `types[i]`. Only names, shapes and a few hyperparameters matter to the rules,
so the matrices have 8 rows. Under "files", tiny models (`FILE_MODELS`, made from a hash of each value's
index so the tests can rebuild them exactly, one of them split into shards) and the SHA-256 of each file
llama-quantize wrote for a few runs each, imatrix runs given `imatrix_values`.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

import weightkit
from weightkit.gguf import GGUFValueType, Value, plan_tensor, write_gguf, write_split

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


def values(n: int, seed: int) -> np.ndarray:
    """`n` float32 values in [-2, 2) from a splitmix64 hash of their index: integer arithmetic and an
    exact scaling, so every machine and numpy version makes the same bits (the tests rebuild the models)."""
    z = (np.arange(n, dtype=np.uint64) + np.uint64(seed)) * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return ((z >> np.uint64(40)).astype(np.float32) - 2**23) / np.float32(2**22)


def tensors(shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    """The model's tensors: vectors float32, matrices float16, each from its own seed."""
    return {
        n: values(int(np.prod(s)), i).reshape(s).astype(np.float32 if len(s) == 1 else np.float16)
        for i, (n, s) in enumerate(shapes.items())
    }


def imatrix_values(shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    """Positive importance weights for every matrix, one row per expert, as `quantize_gguf` takes them."""
    return {
        n: (np.abs(values(int(np.prod(s[:-2], dtype=int)) * s[-1], 1000 + i)) + np.float32(0.25)).reshape(-1, s[-1])
        for i, (n, s) in enumerate(shapes.items())
        if len(s) >= 2
    }


def _imatrix(shapes: dict[str, tuple[int, ...]]):
    """`imatrix_values` as a llama_model_imatrix_data array (null-terminated), and the arrays it points to."""
    import llama_cpp

    weights = imatrix_values(shapes)
    entries = [
        llama_cpp.llama_model_imatrix_data(n.encode(), v.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), v.size)
        for n, v in weights.items()
    ]
    entries.append(llama_cpp.llama_model_imatrix_data(None, None, 0))
    return (llama_cpp.llama_model_imatrix_data * len(entries))(*entries), weights


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


# Models small enough for the tests to quantize, and the runs whose whole output file the record hashes.
FILE_MODELS = {
    "tiny-llama": model("llama", 4, 8, 2),
    "tiny-moe": model("qwen3moe", 2, 8, 8, experts=8),
    "tiny-llama-split": model("llama", 4, 8, 2),
    "tiny-llama-bf16": model("llama", 4, 8, 2),
    "tiny-llama-q8_0": model("llama", 4, 8, 2),
    "tiny-llama-hf-fp8": model("llama", 4, 8, 2),
}
SPLIT_SOURCES = {"tiny-llama-split": 16}  # tensors per shard: that source is a split model
# Sources whose matrices are of another type than F16 (the Q8_0 one by weightkit's quantizer, which ggml's
# matches, and with a general.file_type the others lack).
SOURCE_TYPES = {"tiny-llama-bf16": "BF16", "tiny-llama-q8_0": "Q8_0"}
# Sources with more metadata: an F16 GGUF that Ollama's converter made from an FP8 checkpoint (its create
# stores such a file as Q8_0; its converter's writer puts the keys under the architecture, where
# hasSourceFP8Tensors looks).
SOURCE_METADATA = {
    "tiny-llama-hf-fp8": {
        "general.file_type": Value(1, GGUFValueType.UINT32),
        "llama.source_quantization": "hf_fp8",
        "llama.source_fp8_tensors": ["blk.0.attn_q.weight", "blk.0.attn_k.weight"],
    },
}
FILE_RUNS = {
    "tiny-llama": (
        "Q4_K_M", "Q4_K_M imatrix", "Q3_K_L", "Q5_K_S", "Q2_K_S imatrix", "IQ2_M imatrix", "IQ3_XXS imatrix",
        "IQ4_XS", "TQ1_0", "Q8_0", "F16", "Q4_K_M --tensor-type attn_v=q8_0 --leave-output-tensor", "Q4_K_M --pure",
        "Q2_K --override-kv llama.attention.head_count_kv=int:8 --override-kv general.name=str:renamed"
        " --override-kv llama.context_length=int:-8192 --override-kv llama.rope.freq_base=float:0.1"
        " --override-kv tokenizer.ggml.add_bos_token=bool:false",
        "Q4_K_M --prune-layers 1", "Q3_K_M imatrix --prune-layers 0,2,9", "COPY",
    ),
    "tiny-moe": ("MXFP4_MOE", "Q4_K_M imatrix", "IQ1_M imatrix"),
    "tiny-llama-split": ("Q4_K_M", "Q4_K_M --keep-split", "Q8_0 imatrix --keep-split --override-kv general.name=str:x",
                         "Q4_K_M --keep-split --prune-layers 3", "COPY"),
    "tiny-llama-bf16": ("COPY",),
    "tiny-llama-q8_0": ("COPY",),
    "tiny-llama-hf-fp8": ("Q8_0",),
}  # fmt: skip


def write_source(folder: Path, model_name: str) -> Path:
    """A `FILE_MODELS` model as a GGUF in `folder` (split into shards for `SPLIT_SOURCES`); the path to open."""
    md, shapes = FILE_MODELS[model_name]
    md = {**md, **SOURCE_METADATA.get(model_name, {})}
    if model_name in SOURCE_TYPES:
        kind = SOURCE_TYPES[model_name]
        planned = [plan_tensor(n, a.shape, "F32" if a.ndim == 1 else kind, data=_encoded(a, kind))
                   for n, a in tensors(shapes).items()]  # fmt: skip
        if kind == "Q8_0":
            md = {**md, "general.file_type": Value(7, GGUFValueType.UINT32)}
        write_gguf(folder / "src.gguf", md, planned)
        return folder / "src.gguf"
    if model_name not in SPLIT_SOURCES:
        write_gguf(folder / "src.gguf", md, tensors(shapes))
        return folder / "src.gguf"
    planned = [plan_tensor(n, a.shape, "F16" if a.dtype == np.float16 else "F32", data=a) for n, a in
               tensors(shapes).items()]  # fmt: skip
    return write_split(folder / "src", md, planned, max_tensors=SPLIT_SOURCES[model_name])[0]


def _encoded(a: np.ndarray, kind: str) -> np.ndarray:
    """A tensor's values as `kind` (vectors stay float32)."""
    if a.ndim == 1:
        return a
    if kind == "BF16":
        import ml_dtypes

        return a.astype(np.float32).astype(ml_dtypes.bfloat16)
    from weightkit import quant

    rows = a.reshape(-1, a.shape[-1]).astype(np.float32)
    return quant.quantize(rows, kind)


def parse_key(key: str) -> tuple[str, dict]:
    """A record's key: the file type, then "imatrix" and llama-quantize's options."""
    words = key.split()
    options: dict = {"imatrix": False, "pure": False, "leave_output": False, "keep_split": False,
                     "tensor_types": [], "kv_overrides": [], "prune_layers": []}  # fmt: skip
    i = 1
    while i < len(words):
        word = words[i]
        flags = {"imatrix": "imatrix", "--pure": "pure", "--leave-output-tensor": "leave_output",
                 "--keep-split": "keep_split"}  # fmt: skip
        if word in flags:
            options[flags[word]] = True
        elif word == "--tensor-type":
            i += 1
            pattern, _, type_name = words[i].partition("=")
            options["tensor_types"].append((pattern.lower(), type_name.upper()))
        elif word == "--override-kv":
            i += 1
            options["kv_overrides"].append(words[i])
        elif word == "--prune-layers":
            i += 1
            options["prune_layers"] = [int(n) for n in words[i].split(",")]
        else:  # --output-tensor-type / --token-embedding-type TYPE
            i += 1
            options[word.lstrip("-").replace("-", "_")] = words[i].upper()
        i += 1
    return words[0], options


def _quantize(src: Path, dst: Path, key: str, imatrix) -> dict[str, str] | None:
    """llama-quantize as the key says, into `dst` (with --keep-split: `dst` without .gguf, then -0000i-of-...)."""
    import llama_cpp

    from weightkit.dtypes import ggml_type

    ftype_name, options = parse_key(key)
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = FTYPES.get(ftype_name, 0)  # COPY: llama-quantize's LLAMA_FTYPE_ALL_F32, ignored
    params.only_copy = ftype_name == "COPY"
    params.nthread = 2
    params.pure = options["pure"]
    params.quantize_output_tensor = not options["leave_output"]
    params.keep_split = options["keep_split"]
    if options["prune_layers"]:
        prune = (ctypes.c_int32 * (len(options["prune_layers"]) + 1))(*options["prune_layers"], -1)
        params.prune_layers = ctypes.cast(prune, ctypes.POINTER(ctypes.c_int32))
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
    kv = [_kv_override(option) for option in options["kv_overrides"]]
    if kv:
        kv.append(llama_cpp.llama_model_kv_override())  # an empty key ends the array
        kv_array = (llama_cpp.llama_model_kv_override * len(kv))(*kv)
        params.kv_overrides = ctypes.cast(kv_array, ctypes.POINTER(llama_cpp.llama_model_kv_override))
    target = dst.with_suffix("") if options["keep_split"] else dst
    if llama_cpp.llama_model_quantize(str(src).encode(), str(target).encode(), ctypes.byref(params)) != 0:
        return None
    with weightkit.open(outputs(dst)[0]) as m:
        return {name: info.dtype.name for name, info in m.tensors.items()}


def outputs(dst: Path) -> list[Path]:
    """The files a run wrote: `dst`, or the shards named after it."""
    shards = sorted(dst.parent.glob(dst.stem + "-*-of-*.gguf"))
    return shards or [dst]


def _kv_override(option: str):
    """`KEY=TYPE:VALUE` as llama-quantize's string_parse_kv_override fills llama_model_kv_override."""
    import llama_cpp

    key, _, rest = option.partition("=")
    kind, _, text = rest.partition(":")
    o = llama_cpp.llama_model_kv_override()
    o.key = key.encode()
    if kind == "int":
        o.tag, o.value.val_i64 = 0, int(text)
    elif kind == "float":
        o.tag, o.value.val_f64 = 1, float(text)
    elif kind == "bool":
        o.tag, o.value.val_bool = 2, text == "true"
    else:
        o.tag, o.value.val_str = 3, text.encode()
    return o


def main(out: Path, files_only: bool = False) -> None:
    import llama_cpp

    quiet = llama_cpp.llama_log_callback(lambda level, text, data: None)  # kept alive while llama.cpp logs
    llama_cpp.llama_log_set(quiet, ctypes.c_void_p(0))
    record = {}
    if files_only:  # the per-tensor plans kept as recorded
        kept = json.loads(out.read_text())
        record = kept["models"]
        TYPE_NAMES[:] = kept["types"]
    with tempfile.TemporaryDirectory() as tmp:
        for model_name, (md, shapes) in {} if files_only else MODELS.items():
            src = Path(tmp) / f"{model_name}.gguf"
            write_gguf(src, md, tensors(shapes))
            imatrix, _keep = _imatrix(shapes)
            plans = {}
            keys = [name + weighted for name in FTYPES for weighted in ("", " imatrix")] + list(OPTION_RUNS)
            for key in keys:
                types = _quantize(src, Path(tmp) / "out.gguf", key, imatrix)
                plans[key] = "error" if types is None else "".join(_letter(types[n]) for n in shapes)
                print(model_name, key, "error" if types is None else "ok", file=sys.stderr)
            metadata = {k: (v.value if isinstance(v, Value) else v) for k, v in md.items()}
            record[model_name] = {"metadata": metadata, "tensors": {n: list(s) for n, s in shapes.items()},
                                  "plans": plans}  # fmt: skip
    files = {}
    with tempfile.TemporaryDirectory() as tmp:
        for model_name, (md, shapes) in FILE_MODELS.items():
            folder = Path(tmp) / model_name
            (folder / "out").mkdir(parents=True)
            src, dst = write_source(folder, model_name), folder / "out" / "out.gguf"
            imatrix, _keep = _imatrix(shapes)
            hashes = {}
            for key in FILE_RUNS[model_name]:
                for old in outputs(dst):
                    old.unlink(missing_ok=True)
                if _quantize(src, dst, key, imatrix) is None:
                    raise RuntimeError(f"llama-quantize refused {model_name} {key}")
                hashes[key] = [hashlib.sha256(path.read_bytes()).hexdigest() for path in outputs(dst)]
                print(model_name, key, [h[:12] for h in hashes[key]], file=sys.stderr)
            metadata = {k: (v.value if isinstance(v, Value) else v) for k, v in md.items()}
            files[model_name] = {"metadata": metadata, "tensors": {n: list(s) for n, s in shapes.items()},
                                 "sha256": hashes}  # fmt: skip
    out.write_text(json.dumps({"types": TYPE_NAMES, "models": record, "files": files}) + "\n")


TYPE_NAMES: list[str] = []


def _letter(type_name: str) -> str:
    if type_name not in TYPE_NAMES:
        TYPE_NAMES.append(type_name)
    return chr(ord("a") + TYPE_NAMES.index(type_name))


if __name__ == "__main__":
    files_only = "--files-only" in sys.argv
    paths = [a for a in sys.argv[1:] if a != "--files-only"]
    main(Path(paths[0]) if paths else OUT, files_only)

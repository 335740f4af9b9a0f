"""Record what llama.cpp's two steps make of the test checkpoints: tests/data/convert_quant_golden.json.

For each run, llama.cpp's `convert_hf_to_gguf.py` (as vendored by llama-cpp-python 0.3.36) converts a
checkpoint of tests/data/make_hf_checkpoints.py, and llama-quantize (`llama_model_quantize` of
llama-cpp-python's libllama, as tests/data/make_llama_mixes.py calls it) quantizes its output; the record
holds the final file's SHA-256 and size, which `weightkit convert --type` must give in one pass. The
converter's --outtype is the one weightkit chooses for the checkpoint (its first matrix's type), unless the
run names one. Runs with no llama-quantize type record the converter's own ternary outtypes (tq1_0, tq2_0).
The imatrix runs give llama-quantize make_llama_mixes.py's `imatrix_values` for the converter's tensors (in
its order, recorded too).

    PYTHONPATH=src python tests/data/make_convert_quant_golden.py --python /tmp/convenv/bin/python \\
        --llama-cpp path/to/vendor/llama.cpp

(the Python running it needs llama-cpp-python; `--python` the converter's transformers, see
docs/contributing.md). `--only NAME ...` records those checkpoints again and keeps the others' records.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import make_convert_golden
import make_hf_checkpoints
import make_llama_mixes

import weightkit

OUT = Path(__file__).with_name("convert_quant_golden.json")
# checkpoint -> run keys: "[--outtype X] [TYPE [imatrix] [llama-quantize options]]", read by `split_run`
RUNS = {
    "tiny-llama-256": (
        "Q4_K_M", "Q8_0", "Q4_K_M imatrix", "IQ4_XS imatrix",
        "Q5_K_S --tensor-type attn_v=q8_0 --token-embedding-type q8_0", "Q8_0 --outtype f16",
        "--outtype tq1_0", "--outtype tq2_0",
    ),
    "tiny-mistral-v0.1": ("Q4_K_M", "Q8_0", "--outtype tq1_0"),
    "tiny-qwen3": ("Q6_K",),
    # saved as transformers 5.25 writes them: recorded with a --python of transformers 5.25 (--only)
    "tiny-deepseek-v3": ("Q4_K_M",),
    "tiny-glm-4.5": ("Q4_K_M",),
    "tiny-mixtral": ("Q4_K_M",),
    "tiny-gemma-4-moe": ("Q4_K_M",),
    "tiny-smollm3": ("Q4_K_M",),
    "tiny-olmo3": ("Q4_K_M",),
    "tiny-seed-oss": ("Q4_K_M",),
    "tiny-granite-3": ("Q4_K_M",),
    "tiny-llama4": ("Q4_K_M",),
    "tiny-mistral3": ("Q4_K_M",),
    "tiny-granite-moe": ("Q4_K_M",),
    "tiny-lfm2": ("Q4_K_M",),
    "tiny-ernie4.5-moe": ("Q4_K_M",),
    "tiny-gemma-4": ("Q4_K_M",),
    "tiny-qwen35": ("Q4_K_M",),
    "tiny-qwen35-moe": ("Q4_K_M",),
    "tiny-qwen3next": ("Q4_K_M",),
    "tiny-olmo2": ("Q4_K_M",),
    "tiny-qwen2.5-vl": ("Q4_K_M",),
    "tiny-qwen3-vl": ("Q4_K_M",),
    "tiny-qwen3-vl-moe": ("Q4_K_M",),
    "tiny-gemma-3n": ("Q4_K_M",),
    "tiny-mistral-tekken": ("Q4_K_M",),
    "tiny-mistral-format": ("Q4_K_M",),  # --mistral-format, under a --python with mistral_common
    "tiny-lfm2-moe": ("Q4_K_M",),
    "tiny-ernie4.5": ("Q4_K_M",),
    # saved as transformers 4.57.6 writes it, as the released Granite 4.0-H were: recorded with a --python of 4.57.6
    "tiny-granite-4h": ("Q4_K_M",),
}  # fmt: skip


def split_run(key: str) -> tuple[str | None, str]:
    """A run's converter --outtype (None: weightkit's choice) and the rest, a make_llama_mixes key or ""."""
    words = key.split()
    if words[:1] == ["--outtype"]:
        return words[1], " ".join(words[2:])
    if "--outtype" in words:
        i = words.index("--outtype")
        return words[i + 1], " ".join(words[:i] + words[i + 2 :])
    return None, key


def lossless_outtype(folder: Path) -> str:
    """weightkit's converter type before quantizing: the type of the checkpoint's first matrix."""
    from weightkit.convert.families import CONVERSIONS, MISTRAL_FORMAT
    from weightkit.convert.hf.config import read_raw_config
    from weightkit.convert.hf.convert import _filtered, _resolve_outtype, common_filter, hf_architecture
    from weightkit.convert.hf.tensors import close_all, read_checkpoint

    mistral_format = folder.name in make_hf_checkpoints.MISTRAL_FORMAT
    arch = MISTRAL_FORMAT if mistral_format else CONVERSIONS[hf_architecture(read_raw_config(folder), folder)]
    sources, opened = read_checkpoint(folder, mistral_format=mistral_format)
    try:
        return _resolve_outtype("auto", _filtered(sources, arch, common_filter), lossless=True)
    finally:
        close_all(opened)


def main() -> None:
    import llama_cpp

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, help="a Python with transformers==4.57.6 (the reference's pins)")
    parser.add_argument("--llama-cpp", required=True, type=Path, help="llama-cpp-python 0.3.36's vendor/llama.cpp")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="record these checkpoints, keep the other records")
    args = parser.parse_args()
    converter = args.llama_cpp / "convert_hf_to_gguf.py"
    quiet = llama_cpp.llama_log_callback(lambda level, text, data: None)  # kept alive while llama.cpp logs
    llama_cpp.llama_log_set(quiet, ctypes.c_void_p(0))
    golden: dict = {"reference": "llama-cpp-python 0.3.36 convert_hf_to_gguf.py, then its llama_model_quantize",
                    "checkpoints": {}}  # fmt: skip
    if args.only:
        golden["checkpoints"] = json.loads(OUT.read_text())["checkpoints"]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        vocabs = make_hf_checkpoints.vocab_files()
        for name in args.only or RUNS:
            keys = RUNS[name]
            folder = make_hf_checkpoints.build(name, tmp / "models", vocabs)
            record: dict = {"runs": {}}
            for key in keys:
                outtype, quantize = split_run(key)
                outtype = outtype or lossless_outtype(folder)
                mid, out = tmp / "mid.gguf", tmp / "out.gguf"
                make_convert_golden.run_converter(args.python, converter, folder, outtype, mid)
                if not quantize:
                    mid.replace(out)
                else:
                    with weightkit.open(mid) as m:
                        shapes = {n: info.shape for n, info in m.tensors.items()}
                    record["imatrix_tensors"] = [[n, list(s)] for n, s in shapes.items()]
                    imatrix, _keep = make_llama_mixes._imatrix(shapes)
                    if make_llama_mixes._quantize(mid, out, quantize, imatrix) is None:
                        raise RuntimeError(f"llama-quantize refused {name} {key}")
                data = out.read_bytes()
                record["runs"][key] = {"outtype": outtype, "sha256": hashlib.sha256(data).hexdigest(),
                                       "bytes": len(data)}  # fmt: skip
                print(name, key, record["runs"][key]["sha256"][:16], flush=True)
                out.unlink()
                mid.unlink(missing_ok=True)
            golden["checkpoints"][name] = record
    OUT.write_text(json.dumps(golden, indent=1) + "\n")


if __name__ == "__main__":
    main()

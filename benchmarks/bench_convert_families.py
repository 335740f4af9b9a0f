"""Convert mid-size checkpoints of the 2026 families with weightkit and with llama.cpp's tools, and compare.

Each checkpoint is a test checkpoint of tests/data/make_hf_checkpoints.py (its config as transformers 5.25 saves
it, its real tokenizer) made wider: every width of its text model (`hidden_size`, the feed-forward and expert
widths, the per-layer inputs') times `--scale`, and four times the experts, with random weights of the test
checkpoint's dtype and seed, in shards of 1 GiB; Gemma 3n's per-layer inputs are made as wide again as the other
widths, so that its padded per-layer embeddings (262,144 rows padded to 262,400) are the largest tensor. For each
family and target, as benchmarks/bench_convert.py does (its timing and memory sampling):

- f16: `weightkit convert --outtype f16` against `convert_hf_to_gguf.py --outtype f16`;
- a llama.cpp type (Q8_0, Q4_K_M): `weightkit convert --type T`, one pass, against the converter's
  `--outtype bf16` (f16 for an f16 checkpoint) then llama-quantize (libllama, both cores).

Each pair runs `--repeat` times interleaved (weightkit, then the reference), the best time of each kept, since
the cores are shared; peak memory beyond mapped files (load-independent) is weightkit's largest and the
reference converter's. Outputs are compared byte for byte. The reference converter runs under `--python`, a
Python with transformers 5.x and torch:

    PYTHONPATH=src python benchmarks/bench_convert_families.py --llama-cpp path/to/vendor/llama.cpp \\
        --python /work/venv-rec/bin/python [--families gemma-3n,llama4] [--targets f16,Q8_0] [--repeat 2]
"""

from __future__ import annotations

import argparse
import copy
import filecmp
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_convert import converter_commands, llama_quantize, make_hf_checkpoints, timed
from weightkit.convert.hf.convert import OUTTYPES
from weightkit.llama_quantize.mixes import file_type
from weightkit.safetensors import write_checkpoint

#: family -> (test checkpoint, the widths of its text config multiplied beyond `--scale`'s)
FAMILIES: dict[str, tuple[str, dict[str, int]]] = {
    "gemma-4": ("tiny-gemma-4", {}),
    "gemma-4-moe": ("tiny-gemma-4-moe", {}),
    "qwen3.5": ("tiny-qwen35", {}),
    "qwen3.5-moe": ("tiny-qwen35-moe", {}),
    "qwen3-next": ("tiny-qwen3next", {}),
    "deepseek-v3": ("tiny-deepseek-v3", {}),
    "glm-4.5": ("tiny-glm-4.5", {}),
    "llama4": ("tiny-llama4", {}),
    "lfm2": ("tiny-lfm2", {}),
    "gemma-3n": ("tiny-gemma-3n-text", {"hidden_size_per_layer_input": 2}),
}
_WIDTHS = ("hidden_size", "intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size",
           "intermediate_size_mlp", "hidden_size_per_layer_input")  # fmt: skip
_EXPERTS = ("num_experts", "n_routed_experts", "num_local_experts")


def _widened(config: dict[str, Any], scale: int, extra: dict[str, int]) -> dict[str, Any]:
    """`config` with its text model's widths times `scale` (times `extra`'s factor too) and four times the experts."""
    config = copy.deepcopy(config)
    text = config.get("text_config") or config
    for key in _WIDTHS:
        value, factor = text.get(key), scale * extra.get(key, 1)
        if isinstance(value, list):
            text[key] = [v * factor for v in value]
        elif isinstance(value, int) and value:
            text[key] = value * factor
    for key in _EXPERTS:
        if isinstance(text.get(key), int):
            text[key] *= 4
    return config


def make_checkpoint(folder: Path, family: str, scale: int) -> tuple[int, str]:
    """The widened checkpoint of `family`; returns its parameter count and dtype."""
    name, extra = FAMILIES[family]
    config, dtype, shapes, tokenizer, files, _ = make_hf_checkpoints.CHECKPOINTS[name]
    config = _widened(config, scale, extra)
    tensors = make_hf_checkpoints._weights(shapes(config), dtype, sum(name.encode()))
    folder.mkdir(parents=True)
    write_checkpoint(folder, tensors, {"format": "pt"}, max_shard_bytes=1 << 30)
    make_hf_checkpoints._write_json(folder / "config.json", config)
    tokenizer(folder, make_hf_checkpoints.vocab_files())
    for rel, text in files.items():
        (folder / rel).write_text(text + ("" if text.endswith("\n") else "\n"), encoding="utf-8")
    return sum(t.size for t in tensors.values()), dtype


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llama-cpp", required=True, type=Path, help="llama-cpp-python 0.3.36's vendor/llama.cpp")
    parser.add_argument("--python", default=sys.executable, help="the Python (transformers 5) running the converter")
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--targets", default="f16,Q8_0")
    parser.add_argument("--scale", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=None, help="where the files go (default: a temp folder)")
    args = parser.parse_args()
    env, converter, weightkit = converter_commands(args.llama_cpp, args.python)
    print("| family | checkpoint | target | weightkit | reference | ratio | weightkit peak | reference peak | same |")
    print("|---|---|---|---|---|---|---|---|---|", flush=True)
    for family in args.families.split(","):
        with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
            tmp = Path(tmp)
            ckpt, ours, theirs, mid = tmp / "ckpt", tmp / "weightkit.gguf", tmp / "reference.gguf", tmp / "mid.gguf"
            n, dtype = make_checkpoint(ckpt, family, args.scale)
            size = sum(f.stat().st_size for f in ckpt.glob("*.safetensors"))
            about = f"{n / 1e6:,.0f}M {dtype}, {size / 2**20:,.0f} MiB"
            for target in args.targets.split(","):
                best_wk = best_ref = float("inf")
                peak_wk = peak_ref = 0
                how = ""
                for _ in range(args.repeat):
                    if target in OUTTYPES:
                        wk, peak = timed([*weightkit, str(ckpt), str(ours), "--outtype", target], env)
                        ref, ref_peak = timed([*converter, str(ckpt), "--outfile", str(theirs), "--outtype", target],
                                              env)  # fmt: skip
                    else:
                        wk, peak = timed([*weightkit, str(ckpt), str(ours), "--type", target], env)
                        first, ref_peak = timed([*converter, str(ckpt), "--outfile", str(mid), "--outtype", dtype],
                                                env)  # fmt: skip
                        quantize = llama_quantize(mid, theirs, file_type(target).id)
                        ref, how = first + quantize, f" ({first:.1f} + llama-quantize {quantize:.1f})"
                    best_wk, best_ref = min(best_wk, wk), min(best_ref, ref)
                    peak_wk, peak_ref = max(peak_wk, peak), max(peak_ref, ref_peak)
                same = filecmp.cmp(ours, theirs, shallow=False)
                print(f"| {family} | {about} | {target} | {best_wk:.1f} s | {best_ref:.1f} s{how} | "
                      f"{best_ref / best_wk:.2f}x | {peak_wk / 2**20:,.0f} MiB | {peak_ref / 2**20:,.0f} MiB | "
                      f"{same} |", flush=True)  # fmt: skip
                for f in (ours, theirs, mid):
                    f.unlink(missing_ok=True)
    print(f"load average at the end {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; {time.strftime('%H:%M')}")


if __name__ == "__main__":
    main()

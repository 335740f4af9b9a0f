"""Record llama.cpp's `convert_hf_to_gguf.py` output for the test checkpoints: tests/data/convert_golden.json.

Builds the checkpoints of make_hf_checkpoints.py (and takes the real all-MiniLM-L6-v2), runs the reference
converter of llama-cpp-python 0.3.36's vendored llama.cpp on each for every --outtype, and stores each output's
SHA-256, size, and its key and tensor counts; for the checkpoints in `PROJECTORS`, its projector's too
(`--mmproj`, under "projectors"). The reference needs its own Python environment (see docs/contributing.md),
with transformers 4.57.6 for the checkpoints saved by 4.x and with transformers 5.x (`--python-tf5`) for those
saved by 5.x (their config.json's `transformers_version`: the `-tf5` saves and the families new in 5.x), as
each would be converted where it was made:

    python tests/data/make_convert_golden.py --python /tmp/convenv/bin/python --python-tf5 /tmp/convenv5/bin/python \
        --llama-cpp path/to/vendor/llama.cpp

`--only NAME ...` records those checkpoints again and keeps the others' records.
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

sys.path.insert(0, str(Path(__file__).parent))
import make_hf_checkpoints

import weightkit
from weightkit.convert.hf.config import read_raw_config, saved_by_transformers_5

OUT = Path(__file__).parent / "convert_golden.json"
OUTTYPES = ("f32", "f16", "bf16", "q8_0", "auto")
#: the Qwen-VL checkpoints as published and as transformers 4.57.6 saves them: what their 4.x configs change is in
#: the metadata; their tensors take the steps of their 5.x checkpoints' (recorded for every outtype)
QWEN_VL_TF4 = ("tiny-qwen2.5-vl-published", "tiny-qwen2.5-vl-tf4", "tiny-qwen3-vl-tf4", "tiny-qwen3-vl-moe-tf4")
#: checkpoints recorded for --outtype auto only: their tokenizer costs seconds per conversion, the same each time;
#: and the -tf5 saves, whose tensors are their 4.x checkpoint's (recorded for every outtype): what 5.x changes is
#: in the metadata, and the dtype that auto reads; and the tekken versions besides v7, whose tensors are
#: tiny-mistral-tekken's: what they change is the tokenizer
AUTO_ONLY = (
    "tiny-gemma-3-fast",
    *make_hf_checkpoints.TF5,
    *(f"tiny-mistral-tekken-{v}" for v in ("v3", "v11", "v13", "v15")),
    *QWEN_VL_TF4,
)
MINILM = "all-MiniLM-L6-v2"
#: checkpoints whose projector (`--mmproj`) is recorded, for every outtype
PROJECTORS = (
    "tiny-gemma-3-mmproj",
    "tiny-qwen2.5-vl",
    "tiny-qwen3-vl",
    "tiny-qwen3-vl-moe",
    "tiny-llama4",
    "tiny-mistral3",
    "tiny-gemma-4",
    *QWEN_VL_TF4,
)
#: ... of which only the projector is (their text model is another checkpoint's, recorded there)
PROJECTOR_ONLY = ("tiny-gemma-3-mmproj",)


def run_converter(python: str, converter: Path, folder: Path, outtype: str, out: Path, *, mmproj: bool = False) -> None:
    """The reference converter on `folder`, writing `out` (`mmproj`: its projector; a checkpoint in Mistral's own
    format, make_hf_checkpoints.MISTRAL_FORMAT, with `--mistral-format`)."""
    env = {k: v for k, v in os.environ.items() if k != "NO_LOCAL_GGUF"}  # the vendored gguf-py, not pip's
    env |= {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    flags = [*(["--mmproj"] if mmproj else []),
             *(["--mistral-format"] if folder.name in make_hf_checkpoints.MISTRAL_FORMAT else [])]  # fmt: skip
    subprocess.run([python, str(converter), str(folder), "--outfile", str(out), "--outtype", outtype, *flags],
                   check=True, env=env, capture_output=True)  # fmt: skip


def run_reference(python: str, converter: Path, folder: Path, outtype: str, out: Path, *, mmproj: bool = False) -> dict:
    """The output's record, or {"refused": the converter's last line} where it refuses the checkpoint."""
    try:
        run_converter(python, converter, folder, outtype, out, mmproj=mmproj)
    except subprocess.CalledProcessError as e:
        return {"refused": e.stderr.decode(errors="replace").strip().splitlines()[-1]}
    with weightkit.open(out) as m:
        counts = {"keys": len(m.metadata), "tensors": len(m.tensors)}
    record = {"sha256": hashlib.sha256(out.read_bytes()).hexdigest(), "bytes": out.stat().st_size, **counts}
    out.unlink()
    return record


def _saved_by_transformers_5(folder: Path) -> bool:
    """Whether the checkpoint is converted under transformers 5.x: its config.json says 5.x wrote it, or it is in
    Mistral's own format (whose reading needs `mistral_common`, which that environment has)."""
    if folder.name in make_hf_checkpoints.MISTRAL_FORMAT:
        return True
    return saved_by_transformers_5(read_raw_config(folder))


def versions(python: str) -> dict[str, str]:
    """The transformers and tokenizers versions of `python`."""
    probe = "import transformers, tokenizers; print(transformers.__version__, tokenizers.__version__)"
    found = subprocess.run([python, "-c", probe], check=True, capture_output=True, text=True).stdout.split()
    return {"transformers": found[0], "tokenizers": found[1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, help="a Python with transformers==4.57.6 (the reference's pins)")
    parser.add_argument("--python-tf5", required=True, help="a Python with transformers 5.x, for the -tf5 checkpoints")
    parser.add_argument("--llama-cpp", required=True, type=Path, help="llama-cpp-python 0.3.36's vendor/llama.cpp")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="record these checkpoints, keep the other records")
    args = parser.parse_args()
    converter = args.llama_cpp / "convert_hf_to_gguf.py"
    golden: dict = {"reference": "llama-cpp-python 0.3.36 convert_hf_to_gguf.py", **versions(args.python),
                    "tf5": versions(args.python_tf5), "checkpoints": {}, "projectors": {}}  # fmt: skip
    if args.only:
        recorded = json.loads(OUT.read_text())
        golden |= {section: recorded.get(section, {}) for section in ("checkpoints", "projectors")}
    with tempfile.TemporaryDirectory() as tmp:
        names = args.only or [*make_hf_checkpoints.CHECKPOINTS, *make_hf_checkpoints.TF5]
        vocabs = make_hf_checkpoints.vocab_files()
        folders = {n: make_hf_checkpoints.build(n, Path(tmp) / "models", vocabs) for n in names if n != MINILM}
        if MINILM in names or not args.only:
            folders[MINILM] = make_hf_checkpoints.minilm_folder()
        for name, folder in folders.items():
            python = args.python_tf5 if _saved_by_transformers_5(folder) else args.python
            for section, mmproj in (("checkpoints", False), ("projectors", True)):
                if (name in PROJECTOR_ONLY and not mmproj) or (name not in PROJECTORS and mmproj):
                    continue
                golden[section][name] = {}
                for outtype in ("auto",) if name in AUTO_ONLY else OUTTYPES:
                    record = run_reference(python, converter, folder, outtype, Path(tmp) / "out.gguf", mmproj=mmproj)
                    golden[section][name][outtype] = record
                    print(section, name, outtype, record.get("sha256", "refused")[:16], flush=True)
    OUT.write_text(json.dumps(golden, indent=1) + "\n")


if __name__ == "__main__":
    main()

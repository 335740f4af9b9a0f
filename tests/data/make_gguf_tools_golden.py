"""Record what llama-gguf-split (split, merge, dry runs) and gguf-py's gguf_new_metadata.py (and gguf_set_metadata.py)
write from the small
GGUF of tests/gguf/tool_inputs.py, into tests/data/gguf_tools_golden.json; the tests compare weightkit's files
with these digests and read the JSON only.

llama-gguf-split is built from the llama-cpp-python 0.3.36 sdist's tools/gguf-split (its CMake target
`llama-gguf-split`, or gguf-split.cpp compiled against that sdist's libllama and libllama-common); the
scripts run from the sdist's gguf-py with any Python that has numpy and tqdm. Under "convert", the sdist's
convert_hf_to_gguf.py asked to split (`CONVERT_SPLITS`) the test checkpoint `CONVERT_CHECKPOINT`, run by `--python`,
the converter's environment (transformers 4.57.6, see docs/contributing.md).

    PYTHONPATH=src python tests/data/make_gguf_tools_golden.py \\
        --gguf-split /work/build/gguf-split/llama-gguf-split \\
        --llama-cpp /work/ref/llama_cpp_python-0.3.36/vendor/llama.cpp --python /tmp/convenv/bin/python

Recorded per case: the reference's command line (weightkit's equivalent is in the tests), each output file's
name, sha256 and size, and its metadata keys with their types and tensor names, to diff on a failure.
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

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))

import make_hf_checkpoints  # noqa: E402
from tests.gguf.tool_inputs import TEMPLATE, structure, tools_model  # noqa: E402

OUT = Path(__file__).with_name("gguf_tools_golden.json")

#: name -> llama-gguf-split's options; every case splits the input to `<dir>/split`.
SPLITS = {
    "tensors2": ["--split-max-tensors", "2"],
    "size1M": ["--split-max-size", "1M"],
    "no_first": ["--split-max-tensors", "4", "--no-tensor-first-split"],
    "size1M_no_first": ["--split-max-size", "1M", "--no-tensor-first-split"],
    "default": [],
}
#: name -> (split case merged; then split again with these options, or None)
MERGES = {
    "tensors2": ["--split-max-tensors", "5"],
    "no_first": None,
    "default": None,
}


#: name -> (gguf-py script, its options, `weightkit edit`'s options for the same edit); "{template}" is the path
#: of a file holding `tool_inputs.TEMPLATE`. gguf_set_metadata.py edits a copy of the input in place.
EDITS = {
    "name": ("gguf_new_metadata", ["--general-name", "New name"], ["--set", "general.name=New name"]),
    "description": ("gguf_new_metadata", ["--general-description", "A test"], ["--set", "general.description=A test"]),
    "chat_template": ("gguf_new_metadata", ["--chat-template-file", "{template}"], ["--chat-template", "{template}"]),
    "special_tokens": (
        "gguf_new_metadata",
        ["--special-token", "eos", "<|im_end|>", "--special-token", "padding", "<s>"],
        ["--special-token", "eos", "<|im_end|>", "--special-token", "padding", "<s>"],
    ),
    "remove": (
        "gguf_new_metadata",
        ["--remove-metadata", "general.tags", "--remove-metadata", "llama.use_parallel_residual"],
        ["--remove", "general.tags", "--remove", "llama.use_parallel_residual"],
    ),
    "all": (
        "gguf_new_metadata",
        ["--general-name", "New name", "--general-description", "A test", "--chat-template-file", "{template}",
         "--pre-tokenizer", "llama-bpe", "--special-token", "eos", "<|im_end|>", "--remove-metadata", "general.tags"],
        ["--set", "general.name=New name", "--set", "general.description=A test", "--chat-template", "{template}",
         "--set", "tokenizer.ggml.pre=llama-bpe", "--special-token", "eos", "<|im_end|>", "--remove", "general.tags"],
    ),
    "set_uint32": ("gguf_set_metadata", ["llama.block_count", "3"], ["--set", "llama.block_count=3"]),
    "set_float32": ("gguf_set_metadata", ["llama.rope.freq_base", "500000"], ["--set", "llama.rope.freq_base=5e5"]),
}  # fmt: skip


#: The checkpoint (of make_hf_checkpoints.py) converted with the converter's split options, to f16.
CONVERT_CHECKPOINT = "tiny-llama-2-chat"
#: name -> convert_hf_to_gguf.py's options, which `weightkit convert` takes as they are.
CONVERT_SPLITS = {
    "tensors5": ["--split-max-tensors", "5"],
    "size300K": ["--split-max-size", "300K"],
    "tensors7_no_first": ["--split-max-tensors", "7", "--no-tensor-first-split"],
    "no_first": ["--no-tensor-first-split"],
    "size_and_tensors": ["--split-max-size", "3M", "--split-max-tensors", "9"],
    "one_shard": ["--split-max-tensors", "1000"],
}


def describe(path: Path) -> dict:
    """A file's structure (`tool_inputs.structure`) with its sha256 and size."""
    data = path.read_bytes()
    return structure(path) | {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def run(cmd: list, cwd: Path) -> str:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


def record_split(tool: Path, source: Path, work: Path) -> dict:
    cases = {}
    for name, options in SPLITS.items():
        folder = work / f"split-{name}"
        folder.mkdir()
        plan = run([tool, *options, "--dry-run", source, folder / "split"], folder)
        run([tool, *options, source, folder / "split"], folder)
        shards = [describe(p) for p in sorted(folder.glob("split-*.gguf"))]
        cases[name] = {"options": options, "dry_run": plan.splitlines(), "files": shards}
    return cases


def record_merge(tool: Path, work: Path) -> dict:
    cases = {}
    for name, resplit in MERGES.items():
        first = sorted((work / f"split-{name}").glob("split-*.gguf"))[0]
        folder = work / f"merge-{name}"
        folder.mkdir()
        run([tool, "--merge", first, folder / "merged.gguf"], folder)
        case = {"merged": describe(folder / "merged.gguf")}
        if resplit is not None:
            run([tool, *resplit, folder / "merged.gguf", folder / "again"], folder)
            case["resplit"] = {"options": resplit, "files": [describe(p) for p in sorted(folder.glob("again-*"))]}
        cases[name] = case
    return cases


def record_edit(llama_cpp: Path, source: Path, work: Path) -> dict:
    gguf_py = llama_cpp / "gguf-py"
    env = {**os.environ, "PYTHONPATH": str(gguf_py), "NO_LOCAL_GGUF": "1"}
    template = work / "template.jinja"
    template.write_bytes(TEMPLATE.encode())
    cases = {}
    for name, (script, options, ours) in EDITS.items():
        out = work / f"edit-{name}.gguf"
        given = [o.replace("{template}", str(template)) for o in options]
        if script == "gguf_set_metadata":
            out.write_bytes(source.read_bytes())
            command = [out, *given, "--force"]
        else:
            command = [source, out, *given, "--force"]
        path = gguf_py / "gguf" / "scripts" / f"{script}.py"
        subprocess.run([sys.executable, path, *map(str, command)], env=env, capture_output=True, check=True)
        cases[name] = {"reference": [f"{script}.py", *options], "weightkit": ours, "file": describe(out)}
    return cases


def record_convert(python: str, llama_cpp: Path, work: Path) -> dict:
    folder = make_hf_checkpoints.build(CONVERT_CHECKPOINT, work / "hf")
    env = {k: v for k, v in os.environ.items() if k != "NO_LOCAL_GGUF"}  # the vendored gguf-py, not pip's
    env |= {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    cases = {}
    for name, options in CONVERT_SPLITS.items():
        out = work / f"convert-{name}"
        out.mkdir()
        command = [python, llama_cpp / "convert_hf_to_gguf.py", folder, "--outfile", out / "model.gguf",
                   "--outtype", "f16", *options]  # fmt: skip
        subprocess.run(list(map(str, command)), env=env, capture_output=True, check=True)
        cases[name] = {"options": options, "files": [describe(p) for p in sorted(out.iterdir())]}
    return {"checkpoint": CONVERT_CHECKPOINT, "outtype": "f16", "cases": cases}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gguf-split", type=Path, required=True, help="the llama-gguf-split binary")
    parser.add_argument("--llama-cpp", type=Path, required=True, help="the sdist's vendor/llama.cpp")
    parser.add_argument("--python", required=True, help="a Python with the converter's packages (transformers 4.57.6)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        source = tools_model(work / "model.gguf")
        golden = {
            "input_sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
            "split": record_split(args.gguf_split.resolve(), source, work),
        }
        golden["merge"] = record_merge(args.gguf_split.resolve(), work)
        golden["edit"] = record_edit(args.llama_cpp.resolve(), source, work)
        golden["convert"] = record_convert(args.python, args.llama_cpp.resolve(), work)
    OUT.write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {OUT}", file=sys.stderr)


if __name__ == "__main__" and os.environ.get("PYTEST_CURRENT_TEST") is None:
    main()

"""Record llama.cpp's `convert_lora_to_gguf.py` output for the test adapters: tests/data/lora_golden.json.

For each adapter of make_lora_adapters.py: peft (in the reference's environment) makes it on its base checkpoint
(make_hf_checkpoints.py) and saves it; the script checks peft saved exactly the tensors make_lora_adapters makes
from numpy and records the text files peft wrote (adapter_config.json, README.md); then the reference converter
of llama-cpp-python 0.3.36's vendored llama.cpp converts the numpy-built adapter with `--base` for every
--outtype (an adapter it refuses, once), and the script stores each output's SHA-256, size, keys and tensors
(name, type, shape), or the converter's last line where it refuses. peft and transformers 4.57.6 in the reference's
environment; an adapter of experts' fused 3-D weights (`target_parameters`) is made by peft under transformers 5
(`--python-tf5`: transformers 5.25.0 and peft 0.21.2), which holds experts so:

    /tmp/convenv/bin/pip install peft==0.21.2
    PYTHONPATH=src python tests/data/make_lora_golden.py --python /tmp/convenv/bin/python \\
        --python-tf5 /tmp/convenv5/bin/python --llama-cpp path/to/vendor/llama.cpp

`--only NAME ...` records those adapters again and keeps the others' records.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import make_hf_checkpoints
import make_lora_adapters

import weightkit

OUT = Path(__file__).parent / "lora_golden.json"
OUTTYPES = ("f32", "f16", "bf16", "q8_0", "auto")
PEFT_FILES = ("adapter_config.json", "README.md")
#: adapters recorded with --outtype auto too (which the reference fails on, whatever the adapter)
AUTO_RECORDED = ("lora-qwen2",)

#: run by the reference's Python: make adapter argv[3] with peft on base argv[1], its weights set to the numpy ones
_MAKE_WITH_PEFT = """
import sys, torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM
from peft import LoraConfig, get_peft_model
sys.path.insert(0, sys.argv[4])
import make_lora_adapters as m
base, name, out = sys.argv[1], sys.argv[3], sys.argv[2]
adapter = m.ADAPTERS[name]
model = AutoModelForCausalLM.from_pretrained(base, dtype="auto")
model.name_or_path = model.config._name_or_path = "weightkit-tests/" + adapter.base  # not a temporary path
peft_model = get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", **adapter.lora_config()))
peft_model.save_pretrained(out)
saved = set(load_file(out + "/adapter_model.safetensors"))
values = m.adapter_tensors(name)
with torch.no_grad():
    for key, p in peft_model.named_parameters():
        if "lora_" not in key:
            continue
        key = key.replace(".default", "")
        key = key if key in saved else key.removesuffix(".weight")
        p.copy_(torch.from_numpy(values[key]))
peft_model.save_pretrained(out)
"""


def make_with_peft(python: str, base: Path, name: str, out: Path) -> dict[str, str]:
    """Adapter `name` as peft saves it into `out`, checked against make_lora_adapters' tensors; peft's text files."""
    here = str(Path(__file__).parent)
    env = os.environ | {
        "PYTHONPATH": os.pathsep.join([str(Path(weightkit.__file__).parents[1]), here]),
        "HF_HUB_OFFLINE": "1",
    }  # peft looks the base's name up on the hub, in vain
    subprocess.run([python, "-c", _MAKE_WITH_PEFT, str(base), str(out), name, here], check=True, env=env)
    expected = make_lora_adapters.adapter_tensors(name)
    with weightkit.open(out / "adapter_model.safetensors") as saved:
        assert sorted(saved.tensors) == sorted(expected), (name, list(saved.tensors), list(expected))
        for key, values in expected.items():
            assert np.array_equal(saved.raw(key), values.reshape(-1).view(np.uint8)), (name, key)
    return {rel: (out / rel).read_text(encoding="utf-8") for rel in PEFT_FILES}


def run_reference(python: str, converter: Path, adapter: Path, base: Path, outtype: str, out: Path) -> dict:
    """The output's record, or {"refused": the converter's last line} where it refuses the adapter."""
    env = {k: v for k, v in os.environ.items() if k != "NO_LOCAL_GGUF"}  # the vendored gguf-py, not pip's
    env |= {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    try:
        subprocess.run([python, str(converter), str(adapter), "--base", str(base), "--outfile", str(out),
                        "--outtype", outtype], check=True, env=env, capture_output=True)  # fmt: skip
    except subprocess.CalledProcessError as e:
        return {"refused": e.stderr.decode(errors="replace").strip().splitlines()[-1]}
    with weightkit.open(out) as m:
        keys = list(m.metadata)
        tensors = {n: [t.dtype.name, list(t.shape)] for n, t in m.tensors.items()}
    record = {"sha256": hashlib.sha256(out.read_bytes()).hexdigest(), "bytes": out.stat().st_size, "keys": keys,
              "tensors": tensors}  # fmt: skip
    out.unlink()
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", required=True, help="the reference's Python (transformers 4.57.6, peft, torch)")
    parser.add_argument("--llama-cpp", required=True, type=Path, help="the sdist's vendor/llama.cpp")
    parser.add_argument("--python-tf5", help="a Python with transformers 5 and peft, for target_parameters adapters")
    parser.add_argument("--only", nargs="+", choices=list(make_lora_adapters.ADAPTERS))
    args = parser.parse_args()
    converter = args.llama_cpp / "convert_lora_to_gguf.py"
    if not args.only and OUT.exists():
        OUT.unlink()
    versions = _versions(args.python)
    if args.python_tf5:
        versions["tf5"] = _versions(args.python_tf5)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        bases: dict[str, Path] = {}
        for name in args.only or make_lora_adapters.ADAPTERS:
            adapter = make_lora_adapters.ADAPTERS[name]
            if adapter.base not in bases:
                bases[adapter.base] = make_hf_checkpoints.build(adapter.base, root / "bases")
            peft_python = args.python_tf5 if adapter.target_parameters else args.python
            if peft_python is None:
                parser.error(f"{name} adapts parameters: give --python-tf5")
            files = make_with_peft(peft_python, bases[adapter.base], name, root / "peft" / name)
            folder = make_lora_adapters.build(name, root / "adapters", files)
            outputs: dict[str, dict] = {}
            for outtype in OUTTYPES:  # an adapter refused as f32 is refused whatever the outtype: recorded once
                if outtype == "auto" and name not in AUTO_RECORDED:
                    continue
                if "refused" not in outputs.get("f32", {}):
                    outputs[outtype] = run_reference(args.python, converter, folder, bases[adapter.base], outtype,
                                                     root / "out.gguf")  # fmt: skip
            print(name, {t: o.get("sha256", o.get("refused")) for t, o in outputs.items()}, flush=True)
            save(name, {"files": files, "outputs": outputs}, versions)


def _versions(python: str) -> dict:
    probe = "import peft, transformers; print(peft.__version__, transformers.__version__)"
    found = subprocess.run([python, "-c", probe], check=True, capture_output=True, text=True).stdout.split()
    return {"peft": found[0], "transformers": found[1]}


def save(name: str, record: dict, versions: dict) -> None:
    """Put adapter `name`'s record into the JSON now (under a lock: two recorders may run at once)."""
    with open(Path(tempfile.gettempdir()) / "lora_golden.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        golden = json.loads(OUT.read_text()) if OUT.exists() else {"adapters": {}}
        golden["versions"] = versions
        golden["adapters"] = dict(sorted((golden["adapters"] | {name: record}).items()))
        OUT.write_text(json.dumps(golden, indent=1) + "\n")


if __name__ == "__main__":
    main()

"""Record where libllama puts LoRA adapters' weights: the "placement" key of tests/data/lora_memory.json.

    tools/build_llama_rpc.sh && LLAMA_CPP_LIB_PATH=~/.cache/weightkit/llama-rpc/bin \\
        PYTHONPATH=src python tests/data/make_lora_memory.py [ADAPTER ...]

For each case, a tiny checkpoint's GGUF (weightkit's conversion, the reference's bytes, f16) is loaded without
allocating onto two RPC devices (tools/llama_devices_oracle.py) with some layers offloaded, and an adapter GGUF of
tests/data/lora_golden.json (weightkit's conversion, the reference's bytes) through `llama_adapter_lora_init`; its
log says the buffer type of every adapted weight (`lora for NAME -> BUFT`) and each LoRA buffer's size (in MiB, to
two decimals: llama.cpp logs no bytes). Recorded: the device of each adapted weight (an RPC device's index or -1
for the CPU) and each device's logged MiB.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "tools"))

import llama_devices_oracle as D  # noqa: E402
import llama_oracle as O  # noqa: E402
import make_lora_adapters  # noqa: E402

OUT = HERE / "lora_memory.json"
FREE = [24 << 30, 8 << 30]
#: (adapter, its --outtype, n_gpu_layers, tensor_split)
CASES = [
    ("lora-qwen2", "f32", 2, (1, 1)),
    ("lora-qwen3", "q8_0", -1, (1, 1)),
    ("lora-llama-2-embed", "f16", -1, (1, 1)),
    ("lora-llama-2-lm-head", "bf16", 1, ()),
    ("lora-llama-2", "f16", -1, (1, 3)),
]
_LORA_FOR = re.compile(r"lora for '(\S+)' -> '(\S+)'")
_BUFFER = re.compile(r"(\S+) LoRA buffer size =\s+([\d.]+) MiB")


def main() -> None:
    chosen = sys.argv[1:] or [c[0] for c in CASES]
    saved = json.loads(OUT.read_text()) if OUT.exists() else {}
    kept = saved.get("placement", []) if sys.argv[1:] else []
    record = [case for case in kept if case["adapter"] not in chosen]
    with tempfile.TemporaryDirectory() as tmp, D.RpcDevices(FREE) as devices:
        root = Path(tmp)
        endpoints = devices._servers.endpoints  # an RPC buffer type is named by its server: "RPC0[host:port]"
        for name, outtype, n_gpu_layers, tensor_split in [c for c in CASES if c[0] in chosen]:
            model, path = make_lora_adapters.converted(root, name, outtype)
            with devices.oracle.load(model, devices=devices.devices, n_gpu_layers=n_gpu_layers,
                                     tensor_split=tensor_split, n_ctx=256) as ctx:  # fmt: skip
                O._LOG.clear()
                lora = O.L.llama_adapter_lora_init(ctx.model, str(path).encode())
                assert lora, "".join(O._LOG)[-2000:]
                log = "".join(O._LOG)
                O.L.llama_adapter_lora_free(lora)

            def device(buft: str) -> int:
                return next((i for i, e in enumerate(endpoints) if buft.endswith(f"[{e}]")), -1)

            placed = {weight: device(buft) for weight, buft in _LORA_FOR.findall(log)}
            mib = {str(device(buf)): float(size) for buf, size in _BUFFER.findall(log)}
            case = {"adapter": name, "outtype": outtype, "base": make_lora_adapters.ADAPTERS[name].base,
                    "n_gpu_layers": n_gpu_layers, "tensor_split": list(tensor_split), "free": FREE, "placed": placed,
                    "mib": mib}  # fmt: skip
            print(case, flush=True)
            record.append(case)
    order = [c[0] for c in CASES]
    saved["placement"] = sorted(record, key=lambda c: order.index(c["adapter"]))
    OUT.write_text(json.dumps(saved, indent=1) + "\n")


if __name__ == "__main__":
    main()

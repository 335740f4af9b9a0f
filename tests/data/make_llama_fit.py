"""Record what llama.cpp's fit chooses: tests/data/llama_fit.json.

    tools/build_llama_rpc.sh && LLAMA_CPP_LIB_PATH=~/.cache/weightkit/llama-rpc/bin \
        python tests/data/make_llama_fit.py [MODEL ...]

llama-fit-params (common/fit.cpp, the fit llama-server runs at start-up) is run on skeleton GGUFs of
memory_models.py over RPC devices advertising chosen free memory (tools/llama_devices_oracle.py). For each case
the file holds the devices' free memory, llama-fit-params' arguments, the same settings as LlamaCppSettings
fields (llama-fit-params keeps llama.cpp's default outputs per batch: n_outputs_max 0), the margin per device, and
what it printed:
context, layers on the GPUs, tensor split and tensor overrides (their buffers as RPC0, RPC1, ...).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "tools"))

import llama_devices_oracle as D  # noqa: E402
import memory_models  # noqa: E402

GIB = 1 << 30
BASE = {"parallel": 1, "n_outputs_max": 0}  # llama-fit-params' defaults beside llama-server's
#: (GiB free per device, llama-fit-params arguments, the LlamaCppSettings fields they set)
CASES = {
    "llama-3.1-8b": [
        ([24], [], {}),
        ([6], [], {}),
        ([6, 4], [], {}),
        ([3, 3], [], {}),
        ([4, 2, 2], [], {}),
        ([6, 4], ["-np", "4"], {"parallel": 4}),
        ([8, 8], ["-np", "2"], {"parallel": 2}),
        ([4], ["-c", "32768"], {"ctx_size": 32768}),
        ([5, 3], ["-fitt", "512"], {"margin": 512}),
        ([6], ["-ngl", "20"], {"n_gpu_layers": 20}),
        ([2], [], {}),
        ([1, 1], [], {}),
    ],
    "llama-3.1-70b": [([24, 24], [], {}), ([24, 16, 8], [], {}), ([48], ["-c", "8192"], {"ctx_size": 8192})],
    "gemma-3-12b": [([8, 4], [], {}), ([6], [], {})],
    "qwen3-30b-a3b": [([24], [], {}), ([12], [], {}), ([8, 8], [], {}), ([16, 6], [], {}), ([4], [], {})],
    "gpt-oss-20b": [([8], [], {}), ([12, 4], [], {})],
    "deepseek-v2-lite": [([6, 4], [], {}), ([8], [], {})],
    "granite-4.0-h-tiny": [([2], [], {}), ([3, 1], [], {})],
    "mamba2-2.7b": [([2], [], {}), ([1, 1], [], {})],
    "mamba-2.8b": [([2], [], {}), ([1, 1], [], {})],
    "rwkv6-finch-1.6b": [([2], [], {}), ([1, 1], [], {})],
    "rwkv7-goose-1.5b": [([2], [], {})],
    "phi-4": [([10], [], {}), ([6, 6], [], {})],
    "gemma4-26b-a4b": [([16], [], {}), ([12, 8], [], {}), ([32], [], {})],  # experts beside a dense FFN, SWA
    "qwen3_5_moe-default": [([24], [], {}), ([16, 8], ["-np", "2"], {"parallel": 2})],  # delta-net hybrid, experts
    "cohere2-32-layers": [([6], [], {}), ([4, 4], [], {})],  # sliding window
    "nemotron_h-nano-9b-v2": [([12], [], {}), ([6, 4], [], {})],  # Mamba-2 hybrid, 2**20-token context
    "lfm2-1.2b": [([1], [], {}), ([2], ["-c", "65536"], {"ctx_size": 65536})],  # short-convolution hybrid
}


def main() -> None:
    names = sys.argv[1:] or list(CASES)
    out = HERE / "llama_fit.json"
    record = json.loads(out.read_text()) if out.exists() and sys.argv[1:] else {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            path = memory_models.write_model(name, Path(tmp))
            cases = []
            for gib, args, fields in CASES[name]:
                free = [int(g * GIB) for g in gib]
                got = D.fit_params(path, free, args)
                margin = fields.pop("margin", 1024) << 20
                cases.append({"free": free, "margin": margin, "args": args, "settings": {**BASE, **fields}, **got})
                print(name, gib, args, got, flush=True)
            record[name] = cases
    out.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"wrote {out}: {sum(len(c) for c in record.values())} cases")


if __name__ == "__main__":
    main()

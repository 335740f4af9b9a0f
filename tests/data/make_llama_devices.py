"""Record what llama.cpp allocates on several devices: tests/data/llama_devices.json.

    tools/build_llama_rpc.sh && LLAMA_CPP_LIB_PATH=~/.cache/weightkit/llama-rpc/bin \
        python tests/data/make_llama_devices.py [MODEL ...]

The skeleton GGUFs of memory_models.py (and the real Gemma 3 270M) are loaded by libllama, built with ggml's RPC
backend, onto RPC devices that advertise 24 GiB and 8 GiB free (and a third of 8 GiB for some cases):
tools/llama_devices_oracle.py. For each case the file holds the llama-server settings (LlamaCppSettings fields),
the devices' free memory and, from llama.cpp: the device of every layer, and each device's weights, KV cache
(and recurrent state), compute buffer after the prompt and token-generation reserves, and the compute buffer a
no_alloc context plans (what llama.cpp's fit measures), in bytes. About three minutes.
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
from make_llama_memory import real_gemma  # noqa: E402

import weightkit  # noqa: E402
from weightkit.memory import GPU, LlamaCppSettings  # noqa: E402
from weightkit.memory.llamacpp.engine import device_names  # noqa: E402

GIB = 1 << 30
TWO = [24 * GIB, 8 * GIB]
THREE = [24 * GIB, 8 * GIB, 8 * GIB]
FLASH = {"auto": -1, "off": 0, "on": 1}
SPLIT = {"none": 0, "layer": 1, "row": 2}

#: llama-server settings per case (LlamaCppSettings fields), on two devices unless "free" says otherwise
CASES = [
    {"ctx_size": 8192},  # llama-server's defaults: every layer offloaded, split by free memory
    {"ctx_size": 8192, "parallel": 1, "n_gpu_layers": "half"},  # partial offload
    {"ctx_size": 8192, "parallel": 1, "tensor_split": (1, 3)},
    {"ctx_size": 4096, "split_mode": "none", "main_gpu": 1},
    {"ctx_size": 16384, "parallel": 2, "n_gpu_layers": "quarter", "tensor_split": (1, 1), "flash_attn": "off"},
    {"ctx_size": 8192, "parallel": 1, "no_kv_offload": True},
    {"ctx_size": 8192, "ubatch_size": 256, "free": THREE},
]
MOE_CASES = [
    {"ctx_size": 8192, "cpu_moe": True},
    {"ctx_size": 8192, "parallel": 1, "n_cpu_moe": 10},
    {"ctx_size": 8192, "parallel": 1, "override_tensor": ((r"blk\.[0-9]\.ffn_.*_exps", "RPC1"),)},
]


def settings_of(case: dict, n_layer: int) -> LlamaCppSettings:
    fields = {k: v for k, v in case.items() if k != "free"}
    layers = fields.get("n_gpu_layers")
    if layers in ("half", "quarter"):
        fields["n_gpu_layers"] = (n_layer + 1) // (2 if layers == "half" else 4)
    return LlamaCppSettings(**fields)


def measure(devices: D.RpcDevices, path: Path, settings: LlamaCppSettings, names: list[str]) -> dict:
    cp = settings.context_params()
    return devices.measure(
        path,
        n_gpu_layers=settings.n_gpu_layers,
        split_mode=SPLIT[settings.split_mode],
        main_gpu=settings.main_gpu,
        tensor_split=settings.tensor_split,
        overrides=[(o.pattern, o.device) for o in settings.overrides(names)],
        n_ctx=cp.n_ctx, n_batch=cp.n_batch, n_ubatch=cp.n_ubatch, n_seq_max=cp.n_seq_max,
        flash_attn_type=FLASH[cp.flash_attn], swa_full=cp.swa_full, kv_unified=cp.kv_unified,
        n_outputs_max=cp.n_outputs_max, offload_kqv=cp.offload_kqv,
    )  # fmt: skip


def main() -> None:
    names = sys.argv[1:] or [*memory_models.MODELS, "gemma-3-270m"]
    out = HERE / "llama_devices.json"
    record = json.loads(out.read_text()) if out.exists() and sys.argv[1:] else {}
    with tempfile.TemporaryDirectory() as tmp:
        clusters = {tuple(free): D.RpcDevices(free) for free in (TWO, THREE)}
        try:
            for name in names:
                path = real_gemma() if name == "gemma-3-270m" else memory_models.write_model(name, Path(tmp))
                with weightkit.open(path) as m:
                    n_layer = m.metadata[f"{m.metadata['general.architecture']}.block_count"]
                    moe = any(t.endswith("_exps.weight") for t in m.tensors)
                cases = []
                for case in CASES + (MOE_CASES if moe else []):
                    free = case.get("free", TWO)
                    settings = settings_of(case, n_layer)
                    gpus = [GPU(str(i), "RPC", f) for i, f in enumerate(free)]
                    result = measure(clusters[tuple(free)], path, settings, device_names(gpus))
                    fields = {k: v for k, v in vars(settings).items() if v != getattr(LlamaCppSettings(), k)}
                    cases.append({"settings": fields, "free": free, **result})
                    print(name, fields, result["devices"], flush=True)
                record[name] = cases
        finally:
            for cluster in clusters.values():
                cluster.close()
    out.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"wrote {out}: {sum(len(c) for c in record.values())} cases")


if __name__ == "__main__":
    main()

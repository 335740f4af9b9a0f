"""Record libllama's compute buffer once LoRA adapters are applied: the "compute" key of tests/data/lora_memory.json.

    PYTHONPATH=src python tests/data/make_lora_compute.py [ADAPTER ...]
    tools/build_llama_rpc.sh && LLAMA_CPP_LIB_PATH=~/.cache/weightkit/llama-rpc/bin \\
        PYTHONPATH=src python tests/data/make_lora_compute.py --devices

As llama-server does (`common_init_from_params`): a tiny checkpoint's GGUF (weightkit's conversion, the
reference's bytes, f16) is loaded for real on the CPU, a context made, an adapter GGUF of
tests/data/lora_golden.json (weightkit's conversion) loaded with `llama_adapter_lora_init` and applied with
`llama_set_adapters_lora` at scale 1, which marks the scheduler for a new reserve; decoding one token makes it
(`sched_reserve`: a new scheduler, the prompt graph, the token-generation graph, the prompt graph again, now with
the adapter's matrix products). Recorded: the CPU's compute buffer in bytes (`ggml_backend_sched_get_buffer_size`)
before and after, and the MiB of the last `compute buffer size` log line.

A tiny model's compute buffer is mostly its logits and attention, so the "graphs" key records the graph itself on
real-size skeleton models (tests/data/memory_models.py) with skeleton adapters (tests/data/lora_skeletons.py),
loaded with `no_alloc` (tools/llama_oracle.py): the prompt graph `llama_graph_reserve` builds once the adapter is
applied (its nodes' ops and shapes, as a digest, and their count), and the compute buffer reserved before and
after (the scheduler's buffers only grow there: `after` is the adapter's graph's where it is larger).
The default python's libllama (llama_cpp 0.3.36) is enough for these: no GPU, no RPC.

`--scales` records the "scales" key: several adapters (SCALED) loaded on a tiny model at scales given as
llama-server's `--lora-scaled` gives them (or loaded and not applied, `--lora-init-without-apply`), the CPU's
compute buffer before and after at every setting; and the "tied" key: what libllama does when a tied output
meets a token-embeddings adapter (TIED), in a child process; and the "pairs" key: two skeleton adapters on some
of the same weights of a real-size skeleton model (PAIRS), the graph and compute buffer as "graphs" records them.

`--devices` records the "devices" key: the same as the first, the model on two RPC devices
(tools/llama_devices_oracle.py) with its layers split or partly offloaded, each backend's compute buffer (the
devices', then the CPU's) before and after.
"""

from __future__ import annotations

import ctypes
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "tools"))

import llama_devices_oracle as D  # noqa: E402
import llama_oracle as O  # noqa: E402
import lora_skeletons  # noqa: E402
import make_lora_adapters  # noqa: E402
import memory_models  # noqa: E402

OUT = HERE / "lora_memory.json"
#: the adapters (attention only, all linear, token embeddings, output, experts, aLoRA) and their --outtype
ADAPTERS = [
    ("lora-qwen2", "f32"),
    ("lora-qwen3", "q8_0"),
    ("lora-llama-2-embed", "f16"),
    ("lora-llama-2-lm-head", "bf16"),
    ("lora-qwen3moe-experts", "f16"),
    ("lora-qwen2-alora", "f16"),
    ("lora-llama-2", "f16"),
    ("lora-phi-3", "f16"),
    ("lora-gemma-3", "f16"),
    ("lora-mixtral-experts", "f16"),
]
#: context settings (llama-server's: 4 sequences in one unified cache, an output each; n_batch 2048)
SETTINGS = [
    {"n_ctx": 256, "n_ubatch": 512, "flash_attn": "on"},
    {"n_ctx": 1024, "n_ubatch": 64, "flash_attn": "off"},
    {"n_ctx": 512, "n_ubatch": 512, "flash_attn": "off"},
    {"n_ctx": 2048, "n_ubatch": 2048, "flash_attn": "on"},
    {"n_ctx": 128, "n_ubatch": 128, "flash_attn": "on"},
]
#: several adapters on one model at scales (None: loaded, not applied, `--lora-init-without-apply`), on the CPU at
#: every setting: the "scales" key. lora-llama-2 and lora-llama-2-embed both adapt attn_q (ranks 2 and 4), so
#: given in both orders (llama.cpp applies them in its unordered_map's order, by the adapters' addresses)
SCALED = [
    (("lora-llama-2", 0.0),),
    (("lora-llama-2", None),),
    (("lora-llama-2", 0.5), ("lora-llama-2-embed", 2.0)),
    (("lora-llama-2-embed", 1.0), ("lora-llama-2", 1.0)),
    (("lora-llama-2", 1.0), ("lora-llama-2-embed", 0.0), ("lora-llama-2-lm-head", 1.0)),
]
#: a tied output (Granite 4.0-H Tiny's skeleton) with a token-embeddings adapter: the "tied" key
TIED = ("granite-4.0-h-tiny", ("token_embd",), 8, 256, "on")
#: two skeleton adapters (weights adapted, rank) on some of the same weights of a real-size skeleton model, at
#: (n_ctx, n_ubatch, flash attention) where their products make the compute buffer larger: the "pairs" key
PAIRS = [
    ("llama-3.1-8b", (("ffn_up", "ffn_gate"), 128), (("ffn_up", "attn_v"), 16), 512, 64, "off"),
    ("gemma-3-12b", (("ffn_up", "ffn_gate"), 64), (("ffn_up", "attn_v"), 8), 512, 64, "off"),
    ("qwen3-30b-a3b", (("ffn_down_exps", "ffn_up_exps"), 4), (("ffn_down_exps",), 2), 512, 64, "off"),
]
#: on two RPC devices (`--devices`: tools/llama_devices_oracle.py): (adapter, n_gpu_layers, tensor_split, n_ctx,
#: flash attention)
DEVICE_CASES = [
    ("lora-llama-2", -1, (1, 1), 256, "on"),
    ("lora-llama-2", 2, (1, 1), 2048, "auto"),
    ("lora-llama-2-embed", -1, (1, 1), 256, "off"),
    ("lora-llama-2-lm-head", 1, (), 256, "on"),
    ("lora-phi-3", -1, (1, 3), 2048, "on"),
    ("lora-qwen3moe-experts", -1, (1, 1), 256, "on"),
    ("lora-qwen2", 1, (1, 1), 512, "off"),
]
FREE = [24 << 30, 8 << 30]
_FLASH = {"auto": -1, "off": 0, "on": 1}
_COMPUTE = re.compile(r"compute buffer size =\s+([\d.]+) MiB")


def _context(model, setting: dict):
    cp = O.L.llama_context_default_params()
    cp.n_ctx, cp.n_batch, cp.n_ubatch = setting["n_ctx"], 2048, setting["n_ubatch"]
    cp.n_seq_max, cp.kv_unified, cp.n_outputs_max = 4, True, 4
    cp.flash_attn_type = _FLASH[setting["flash_attn"]]
    ctx = O.L.llama_init_from_model(model, cp)
    assert ctx, "".join(O._LOG)[-2000:]
    return ctx


def _compute_sizes(ctx) -> list[int]:
    """Each backend's compute buffer (the GPUs', then the CPU's), in bytes."""
    sched = O._get_sched(ctx)
    return [O._buffer_size(sched, O._backend(sched, i)) for i in range(O._n_backends(sched))]


def _applied(model_path: Path, adapters: list[tuple[Path, float | None]], setting: dict,
             mp) -> tuple[list[int], list[int], str]:  # fmt: skip
    """Each backend's compute buffer before and after the adapters are applied at their scales (none applied if
    no scale is given: `--lora-init-without-apply`) and one token decoded, and the log of the decode; the model
    loaded with the llama_model_params `mp`."""
    model = O.L.llama_model_load_from_file(str(model_path).encode(), mp)
    assert model, "".join(O._LOG)[-2000:]
    ctx = _context(model, setting)
    before = _compute_sizes(ctx)
    loras = [O.L.llama_adapter_lora_init(model, str(path).encode()) for path, _ in adapters]
    assert all(loras), "".join(O._LOG)[-2000:]
    O._LOG.clear()
    applied = [(lora, scale) for lora, (_, scale) in zip(loras, adapters, strict=True) if scale is not None]
    if applied:  # common_set_adapter_lora: every adapter, at its scale (llama.cpp leaves a 0 out)
        handles = (O.L.llama_adapter_lora_p_ctypes * len(applied))(*[lora for lora, _ in applied])
        scales = (ctypes.c_float * len(applied))(*[scale for _, scale in applied])
        assert O.L.llama_set_adapters_lora(ctx, handles, len(applied), scales) == 0
    token = (O.L.llama_token * 1)(1)
    assert O.L.llama_decode(ctx, O.L.llama_batch_get_one(token, 1)) == 0, "".join(O._LOG)[-2000:]
    log = "".join(O._LOG)
    after = _compute_sizes(ctx)
    O.L.llama_free(ctx)
    for lora in loras:
        O.L.llama_adapter_lora_free(lora)
    O.L.llama_model_free(model)
    return before, after, log


def measure(model_path: Path, adapter_path: Path, setting: dict) -> dict:
    """The CPU's compute buffer before and after the adapter is applied, everything on the CPU."""
    mp = O.L.llama_model_default_params()
    mp.n_gpu_layers = 0
    before, after, log = _applied(model_path, [(adapter_path, 1.0)], setting, mp)
    assert "reserving" in log, "the decode made no new reserve"
    return {"before": sum(before), "after": sum(after), "log_mib": float(_COMPUTE.findall(log)[-1])}


def measure_scaled(root: Path, case: tuple) -> list[dict]:
    """The CPU's compute buffer before and after the adapters of `case` are loaded and applied at their scales."""
    outtypes = dict(ADAPTERS)
    paths = [make_lora_adapters.converted(root, name, outtypes[name]) for name, _ in case]
    mp = O.L.llama_model_default_params()
    mp.n_gpu_layers = 0
    out = []
    for setting in SETTINGS:
        before, after, _ = _applied(paths[0][0], [(p, s) for (_, p), (_, s) in zip(paths, case, strict=True)],
                                    setting, mp)  # fmt: skip
        out.append({"adapters": [[name, scale] for name, scale in case], "outtypes": [outtypes[n] for n, _ in case],
                    **setting, "before": sum(before), "after": sum(after)})  # fmt: skip
        print(out[-1], flush=True)
    return out


def measure_tied(root: Path) -> dict:
    """What libllama does when a tied output meets a token-embeddings adapter: the reserve with it applied, in a
    child process (an abort ends it): its exit status and the last lines of its log."""
    code = (f"import sys; sys.path[:0] = {[str(HERE), str(HERE.parents[1] / 'tools')]!r}; "
            f"import make_lora_compute as M, pathlib; M.measure_graph(M.O.LlamaOracle(), pathlib.Path({str(root)!r}), "
            f"M.TIED); print('reserved')")  # fmt: skip
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    lines = [line for line in (run.stdout + run.stderr).splitlines() if "GGML_ASSERT" in line or "reserved" in line]
    return {"adapter": lora_skeletons.adapter_name(TIED), "model": TIED[0], "targets": list(TIED[1]),
            "rank": TIED[2], "n_ctx": TIED[3], "flash_attn": TIED[4], "returncode": run.returncode,
            "says": [re.sub(r"^.*?(GGML_ASSERT)", r"\1", line) for line in lines]}  # fmt: skip


def measure_devices(devices: list, model_path: Path, adapter_path: Path, case: tuple) -> dict:
    """Each backend's compute buffer before and after, the model on RPC devices as `case` places it."""
    name, n_gpu_layers, tensor_split, n_ctx, flash_attn = case
    mp = O.L.llama_model_default_params()
    mp.n_gpu_layers = n_gpu_layers
    handles = (ctypes.c_void_p * (len(devices) + 1))(*devices, None)
    mp.devices = ctypes.addressof(handles)
    split = (ctypes.c_float * O.L.llama_max_devices())(*tensor_split)
    if tensor_split:
        mp.tensor_split = ctypes.cast(split, ctypes.POINTER(ctypes.c_float))
    setting = {"n_ctx": n_ctx, "n_ubatch": 512, "flash_attn": flash_attn}
    before, after, _ = _applied(model_path, [(adapter_path, 1.0)], setting, mp)
    return {"adapter": name, "n_gpu_layers": n_gpu_layers, "tensor_split": list(tensor_split), "free": FREE,
            **setting, "before": before, "after": after}  # fmt: skip


def _reserved_with(ctx, paths: list[Path], batch: tuple) -> tuple[list, int]:
    """The prompt graph's nodes (op, shape) and the compute buffer of the no_alloc context `ctx` once the adapters
    at `paths` are applied (scale 1, in that order to `llama_set_adapters_lora`)."""
    loras = [O.L.llama_adapter_lora_init(ctx.model, str(path).encode()) for path in paths]
    assert all(loras), "".join(O._LOG)[-2000:]
    adapters = (O.L.llama_adapter_lora_p_ctypes * len(loras))(*loras)
    scales = (ctypes.c_float * len(loras))(*[1.0] * len(loras))
    assert O.L.llama_set_adapters_lora(ctx.ctx, adapters, len(loras), scales) == 0
    nodes = [(n.op.split(":")[0], n.ne) for n in ctx.graph(*batch).nodes]
    after = sum(ctx.compute_bytes(*batch))
    for lora in loras:
        O.L.llama_adapter_lora_free(lora)
    return nodes, after


def measure_graph(oracle: O.LlamaOracle, root: Path, case: tuple) -> dict:
    """The prompt graph and compute buffer of a skeleton model's no_alloc context with a skeleton adapter."""
    model_name, targets, rank, n_ctx, flash_attn = case
    model = memory_models.write_model(model_name, root)
    adapter = lora_skeletons.write_adapter(model, targets, rank, root / f"{lora_skeletons.adapter_name(case)}.gguf")
    with oracle.load(model, n_ctx=n_ctx, n_batch=2048, n_ubatch=512, n_seq_max=4, kv_unified=True, n_outputs_max=4,
                     flash_attn_type=_FLASH[flash_attn]) as ctx:  # fmt: skip
        batch = ctx.reserve_batch()
        before = sum(ctx.compute_bytes(*batch))
        nodes, after = _reserved_with(ctx, [adapter], batch)
    return {"adapter": lora_skeletons.adapter_name(case), "model": model_name, "targets": list(targets), "rank": rank,
            "n_ctx": n_ctx, "flash_attn": flash_attn, "batch": list(batch), "nodes": len(nodes),
            "graph": lora_skeletons.graph_digest(nodes), "before": before, "after": after}  # fmt: skip


def measure_pair(oracle: O.LlamaOracle, root: Path, case: tuple) -> dict:
    """The prompt graph and compute buffer of a skeleton model's no_alloc context with two skeleton adapters on
    some of the same weights, given in that order (llama.cpp's own order is its unordered_map's)."""
    model_name, first, second, n_ctx, n_ubatch, flash_attn = case
    model = memory_models.write_model(model_name, root)
    paths = [lora_skeletons.write_adapter(model, targets, rank, root / f"pair{i}.gguf")
             for i, (targets, rank) in enumerate((first, second))]  # fmt: skip
    with oracle.load(model, n_ctx=n_ctx, n_batch=2048, n_ubatch=n_ubatch, n_seq_max=4, kv_unified=True,
                     n_outputs_max=4, flash_attn_type=_FLASH[flash_attn]) as ctx:  # fmt: skip
        batch = ctx.reserve_batch()
        before = sum(ctx.compute_bytes(*batch))
        nodes, after = _reserved_with(ctx, paths, batch)
    return {"model": model_name, "adapters": [[list(t), r] for t, r in (first, second)], "n_ctx": n_ctx,
            "n_ubatch": n_ubatch, "flash_attn": flash_attn, "batch": list(batch), "nodes": len(nodes),
            "graph": lora_skeletons.graph_digest(nodes), "before": before, "after": after}  # fmt: skip


def record_tiny(root: Path, chosen: list[str], kept: list[dict]) -> list[dict]:
    """The "compute" records: each chosen tiny adapter at each setting, after those kept."""
    for name, outtype in [a for a in ADAPTERS if a[0] in chosen]:
        model, path = make_lora_adapters.converted(root, name, outtype)
        for setting in SETTINGS:
            base = make_lora_adapters.ADAPTERS[name].base
            case = {"adapter": name, "outtype": outtype, "base": base, **setting, **measure(model, path, setting)}
            print(case, flush=True)
            kept.append(case)
    order = [name for name, _ in ADAPTERS]
    return sorted(kept, key=lambda c: order.index(c["adapter"]))


def record_devices(root: Path) -> list[dict]:
    """The "devices" records: every case of DEVICE_CASES on two RPC devices."""
    outtypes = dict(ADAPTERS)
    out = []
    with D.RpcDevices(FREE) as devices:
        for case in DEVICE_CASES:
            model, path = make_lora_adapters.converted(root, case[0], outtypes[case[0]])
            out.append({"outtype": outtypes[case[0]], **measure_devices(devices.devices, model, path, case)})
            print(out[-1], flush=True)
    return out


def main() -> None:
    """`--scales`: the "scales", "tied" and "pairs" keys alone; `--devices`: the "devices" key alone (with the RPC
    build: LLAMA_CPP_LIB_PATH); else the adapters named (all without), tiny and skeleton, into "compute" and
    "graphs"."""
    record = json.loads(OUT.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if sys.argv[1:] == ["--devices"]:
            record["devices"] = record_devices(root)
        elif sys.argv[1:] == ["--scales"]:
            record["scales"] = [c for case in SCALED for c in measure_scaled(root, case)]
            record["tied"] = measure_tied(root)
            oracle = O.LlamaOracle()
            record["pairs"] = [measure_pair(oracle, root, case) for case in PAIRS]
        else:
            skeletons = {lora_skeletons.adapter_name(case): case for case in lora_skeletons.GRAPHS}
            chosen = sys.argv[1:] or [name for name, _ in ADAPTERS] + list(skeletons)
            oracle = O.LlamaOracle()  # (the log collector, the backends)
            graphs = [c for c in record.get("graphs", []) if c["adapter"] not in chosen]
            for name in [name for name in skeletons if name in chosen]:
                graphs.append(measure_graph(oracle, root, skeletons[name]))
                print(graphs[-1], flush=True)
            record["graphs"] = sorted(graphs, key=lambda c: list(skeletons).index(c["adapter"]))
            kept = [c for c in record.get("compute", []) if c["adapter"] not in chosen]
            record["compute"] = record_tiny(root, chosen, kept)
    OUT.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()

"""`convert_lora` against convert_lora_to_gguf.py's recorded outputs (tests/data/lora_golden.json), on the tiny
adapters of tests/data/make_lora_adapters.py; the base models are their config.json alone (all the reference reads
of them but their tensors' names, which it never needs)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import weightkit
from weightkit import GGMLType, TensorInfo
from weightkit.cli import app
from weightkit.convert.hf import convert_hf, convert_lora
from weightkit.errors import ArgumentError, FormatError, UnsupportedError, WeightkitError
from weightkit.gguf import GGUFValueType, Value, plan_tensor, write_gguf
from weightkit.memory import GPU, LlamaCppSettings
from weightkit.memory.llamacpp import estimate
from weightkit.memory.llamacpp.architectures import read_hparams
from weightkit.memory.llamacpp.compute import build_graph, layer_kinds
from weightkit.memory.llamacpp.placement import Placement, lora_weights_per_device, tensor_device

from ..scripts import load_script

DATA = Path(__file__).resolve().parents[1] / "data"
make_lora_adapters = load_script(DATA / "make_lora_adapters.py")
make_hf_checkpoints = make_lora_adapters.make_hf_checkpoints
GOLDEN = json.loads((DATA / "lora_golden.json").read_text())
CASES = [(name, outtype) for name, record in GOLDEN["adapters"].items() for outtype in record["outputs"]]


@pytest.fixture(scope="module")
def lora_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("lora")


def base_folder(root: Path, base: str) -> Path:
    """Checkpoint `base`'s config.json alone, in a folder of its name."""
    folder = root / "bases" / base
    if not folder.exists():
        folder.mkdir(parents=True)
        make_hf_checkpoints._write_json(folder / "config.json", make_hf_checkpoints.CHECKPOINTS[base][0])
    return folder


def adapter_folder(root: Path, name: str) -> Path:
    folder = root / "adapters" / name
    if not folder.exists():
        make_lora_adapters.build(name, root / "adapters", make_lora_adapters.recorded_files(GOLDEN, name))
    return folder


def test_every_adapter_is_recorded():
    assert set(GOLDEN["adapters"]) == set(make_lora_adapters.ADAPTERS)


@pytest.mark.parametrize(("name", "outtype"), CASES)
def test_the_reference_s_file_or_its_refusal(lora_root, name, outtype):
    record = GOLDEN["adapters"][name]["outputs"][outtype]
    adapter = adapter_folder(lora_root, name)
    base = base_folder(lora_root, make_lora_adapters.ADAPTERS[name].base)
    out = lora_root / f"{name}-{outtype}.gguf"
    if "refused" in record:
        with pytest.raises((ArgumentError, UnsupportedError, FormatError)) as refused:
            convert_lora(adapter, out, base, outtype)
        assert not out.exists()
        reason = record["refused"].removeprefix("ValueError: ")  # the reference's own words, where weightkit's
        expected = "auto" if outtype == "auto" else "not a lora_A or lora_B" if "lora_A" in reason else reason
        assert expected in str(refused.value)
        return
    report = convert_lora(adapter, out, base, outtype)
    with weightkit.open(out) as m:
        assert list(m.metadata) == record["keys"]
        assert {n: [t.dtype.name, list(t.shape)] for n, t in m.tensors.items()} == record["tensors"]
    assert out.stat().st_size == record["bytes"] == report.bytes_written
    assert hashlib.sha256(out.read_bytes()).hexdigest() == record["sha256"]
    out.unlink()


def test_the_base_named_by_the_adapter_config_when_a_local_folder(lora_root, tmp_path, monkeypatch):
    """Without --base, `base_model_name_or_path` (here relative, as the reference's AutoConfig resolves it)."""
    adapter = shutil.copytree(adapter_folder(lora_root, "lora-qwen2"), tmp_path / "lora-qwen2")
    config = json.loads((adapter / "adapter_config.json").read_text())
    shutil.copytree(base_folder(lora_root, "tiny-qwen2"), tmp_path / config["base_model_name_or_path"])
    monkeypatch.chdir(tmp_path)
    convert_lora(adapter, tmp_path / "out.gguf")  # --outtype f32, the reference's default
    record = GOLDEN["adapters"]["lora-qwen2"]["outputs"]["f32"]
    assert hashlib.sha256((tmp_path / "out.gguf").read_bytes()).hexdigest() == record["sha256"]


def test_the_command(lora_root, tmp_path, weightkit_cli):
    """`weightkit convert ADAPTER OUT --lora --base BASE --outtype f16 --json`, then `estimate --lora`."""
    adapter, base = adapter_folder(lora_root, "lora-qwen2"), base_folder(lora_root, "tiny-qwen2")
    out = tmp_path / "adapter.gguf"
    r = weightkit_cli("convert", adapter, out, "--lora", "--base", base, "--outtype", "f16", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    record = GOLDEN["adapters"]["lora-qwen2"]["outputs"]["f16"]
    assert doc["architecture"] == "qwen2" and doc["outtype"] == "f16" and doc["bytes"] == record["bytes"]
    assert {n: [t["type"], t["shape"]] for n, t in doc["tensors"].items()} == record["tensors"]
    assert hashlib.sha256(out.read_bytes()).hexdigest() == record["sha256"]


def test_a_hub_base_needs_base(lora_root, tmp_path):
    with pytest.raises(ArgumentError, match=r"not a local folder.*--base"):
        convert_lora(adapter_folder(lora_root, "lora-qwen2"), tmp_path / "out.gguf")


def test_bad_adapters(lora_root, tmp_path):
    base = base_folder(lora_root, "tiny-qwen2")
    adapter = shutil.copytree(adapter_folder(lora_root, "lora-qwen2"), tmp_path / "a")
    config = json.loads((adapter / "adapter_config.json").read_text())
    (adapter / "adapter_config.json").write_text(json.dumps(config | {"lora_alpha": "8"}))
    with pytest.raises(FormatError, match="lora_alpha"):
        convert_lora(adapter, tmp_path / "out.gguf", base)
    (adapter / "adapter_config.json").write_text(json.dumps(config))
    (adapter / "adapter_model.safetensors").unlink()
    with pytest.raises(FormatError, match=r"no adapter_model\.safetensors"):
        convert_lora(adapter, tmp_path / "out.gguf", base)
    with pytest.raises(ArgumentError, match=r"no config\.json"):
        convert_lora(adapter_folder(lora_root, "lora-qwen2"), tmp_path / "out.gguf", tmp_path)
    assert not (tmp_path / "out.gguf").exists()


MEMORY = json.loads((DATA / "lora_memory.json").read_text())["placement"]


@pytest.mark.slow
@pytest.mark.parametrize("case", MEMORY, ids=[c["adapter"] for c in MEMORY])
def test_estimate_puts_the_adapter_where_libllama_does(hf_checkpoints, lora_root, case):
    """Each adapted weight's device and each device's LoRA buffer, against libllama on two RPC devices
    (tests/data/make_lora_memory.py; llama.cpp logs the buffers in MiB to two decimals)."""
    base = hf_checkpoints[case["base"]]
    model_path = lora_root / f"{case['base']}.gguf"
    if not model_path.exists():
        convert_hf(base, model_path, "f16")
    adapter_path = lora_root / f"{case['adapter']}-{case['outtype']}.gguf"
    convert_lora(adapter_folder(lora_root, case["adapter"]), adapter_path, base, case["outtype"])
    gpus = [GPU(str(i), "RPC", free) for i, free in enumerate(case["free"])]
    settings = LlamaCppSettings(
        ctx_size=256, n_gpu_layers=case["n_gpu_layers"], tensor_split=tuple(case["tensor_split"])
    )
    with weightkit.open(model_path) as model, weightkit.open(adapter_path) as adapter:
        est = estimate(model, settings, gpus, adapters=[adapter])
        placed = {n.removesuffix(".lora_a"): tensor_device(n.removesuffix(".lora_a"), est.placement)
                  for n in adapter.tensors if n.endswith(".lora_a")}  # fmt: skip
    assert placed == case["placed"]
    devices = {str(i if i < len(gpus) else -1): d.lora for i, d in enumerate(est.devices) if d.lora}
    assert {d: f"{n / 2**20:.2f}" for d, n in devices.items()} == {d: f"{m:.2f}" for d, m in case["mib"].items()}


COMPUTE = json.loads((DATA / "lora_memory.json").read_text())["compute"]


@pytest.mark.slow
@pytest.mark.parametrize("adapter", sorted({c["adapter"] for c in COMPUTE}))
def test_estimate_gives_the_compute_buffer_libllama_reserves_with_the_adapter(hf_checkpoints, lora_root, adapter):
    """The CPU's compute buffer before and after the adapter is applied (llama.cpp reserves its graph again, with
    the adapter's products), to the byte, against libllama's own (tests/data/make_lora_compute.py): each adapter
    (attention, all linear, token embeddings, output, experts) at a few contexts, ubatches and flash attention."""
    cases = [c for c in COMPUTE if c["adapter"] == adapter]
    base = hf_checkpoints[cases[0]["base"]]
    model_path = lora_root / f"{cases[0]['base']}.gguf"
    if not model_path.exists():
        convert_hf(base, model_path, "f16")
    adapter_path = lora_root / f"{adapter}-{cases[0]['outtype']}.gguf"
    convert_lora(adapter_folder(lora_root, adapter), adapter_path, base, cases[0]["outtype"])
    with weightkit.open(model_path) as model, weightkit.open(adapter_path) as lora:
        for case in cases:
            settings = LlamaCppSettings(ctx_size=case["n_ctx"], ubatch_size=case["n_ubatch"],
                                        flash_attn=case["flash_attn"])  # fmt: skip
            found = [estimate(model, settings, adapters=adapters).devices[-1].compute for adapters in ([], [lora])]
            assert found == [case["before"], case["after"]], case


DEVICES = json.loads((DATA / "lora_memory.json").read_text())["devices"]


@pytest.mark.slow
@pytest.mark.parametrize("case", DEVICES, ids=[f"{c['adapter']}-{c['n_gpu_layers']}-{c['n_ctx']}" for c in DEVICES])
def test_estimate_gives_each_devices_compute_buffer_with_the_adapter(hf_checkpoints, lora_root, case):
    """Each device's compute buffer (the GPUs', then the CPU's) before and after the adapter is applied, to the
    byte, against libllama on two RPC devices (tests/data/make_lora_compute.py --devices): the adapter's products
    scheduled as llama.cpp schedules them (its tensors are no weights to the scheduler: the token embeddings'
    pair is copied to the first GPU)."""
    base = hf_checkpoints[make_lora_adapters.ADAPTERS[case["adapter"]].base]
    model_path = lora_root / f"{base.name}.gguf"
    if not model_path.exists():
        convert_hf(base, model_path, "f16")
    adapter_path = lora_root / f"{case['adapter']}-{case['outtype']}.gguf"
    if not adapter_path.exists():
        convert_lora(adapter_folder(lora_root, case["adapter"]), adapter_path, base, case["outtype"])
    gpus = [GPU(str(i), "RPC", free) for i, free in enumerate(case["free"])]
    settings = LlamaCppSettings(ctx_size=case["n_ctx"], n_gpu_layers=case["n_gpu_layers"],
                                tensor_split=tuple(case["tensor_split"]), flash_attn=case["flash_attn"])  # fmt: skip
    with weightkit.open(model_path) as model, weightkit.open(adapter_path) as adapter:
        found = [[d.compute for d in estimate(model, settings, gpus, adapters=a).devices] for a in ([], [adapter])]
    assert found == [case["before"], case["after"]]


lora_skeletons = load_script(DATA / "lora_skeletons.py")
memory_models = load_script(DATA / "memory_models.py")
GRAPHS = json.loads((DATA / "lora_memory.json").read_text())["graphs"]


@pytest.mark.parametrize("case", GRAPHS, ids=[c["adapter"] for c in GRAPHS])
def test_the_graph_with_an_adapter_is_libllamas(tmp_path, case):
    """A real-size skeleton model's prompt graph with a skeleton adapter applied, node by node (op and shape),
    against the one libllama reserves (tests/data/make_lora_compute.py): the adapters' products where
    `build_lora_mm`, `build_lora_mm_id` and `build_inp_embd` put them; and its compute buffer."""
    model_path = memory_models.write_model(case["model"], tmp_path)
    adapter_path = lora_skeletons.write_adapter(model_path, tuple(case["targets"]), case["rank"], tmp_path / "a.gguf")
    settings = LlamaCppSettings(ctx_size=case["n_ctx"], flash_attn=case["flash_attn"])
    with weightkit.open(model_path) as model, weightkit.open(adapter_path) as adapter:
        est = estimate(model, settings, adapters=[adapter])  # (its context has the adapter applied)
        graph = build_graph(est.hparams, est.context, est.memory, model.tensors, *case["batch"]).graph
        plain = estimate(model, settings).devices[-1].compute
    assert len(graph.nodes) == case["nodes"]
    assert lora_skeletons.graph_digest([(t.op, t.ne) for t in graph.nodes]) == case["graph"]
    assert plain == case["before"]
    # libllama's buffer only grows over the one reserved without the adapter: larger, it is the adapter's graph's
    assert est.devices[-1].compute == case["after"] if case["after"] > plain else est.devices[-1].compute <= plain


def test_layers_adapted_otherwise_are_of_another_kind(tmp_path):
    """A shortened graph stands for layers alike: an adapter of some layers only makes them another kind."""
    model_path = memory_models.write_model("llama-3.1-8b", tmp_path)
    adapter_path = lora_skeletons.write_adapter(model_path, ("attn_q",), 8, tmp_path / "a.gguf")
    with weightkit.open(model_path) as model, weightkit.open(adapter_path) as adapter:
        hp = read_hparams(model)
        first = {name: info for name, info in adapter.tensors.items() if name.startswith("blk.0.")}
        kinds = layer_kinds(hp, model.tensors, None, [first])
        assert layer_kinds(hp, model.tensors, None, [adapter.tensors]) == layer_kinds(hp, model.tensors, None)
    assert kinds[0] != kinds[1] == kinds[-1]


def _adapter_gguf(path: Path, arch: str, tensors: dict[str, tuple[int, ...]], kind: str = "adapter") -> Path:
    text = GGUFValueType.STRING
    meta = {"general.architecture": Value(arch, text), "general.type": Value(kind, text),
            "adapter.type": Value("lora", text)}  # fmt: skip
    planned = [plan_tensor(n, shape, "F32", lambda s=shape: np.zeros(s, np.float32).view(np.uint8).reshape(-1))
               for n, shape in tensors.items()]  # fmt: skip
    write_gguf(path, meta, planned)
    return path


@pytest.mark.parametrize(
    ("arch", "kind", "tensors", "error"),
    [
        ("qwen2", "model", {"blk.0.attn_q.weight.lora_a": (4, 64)}, "general.type is 'model'"),
        ("llama", "adapter", {"blk.0.attn_q.weight.lora_a": (4, 64)}, "general.architecture is 'llama'"),
        ("qwen2", "adapter", {"blk.0.attn_q.weight.lora_a": (4, 64)}, "missing one component"),
        ("qwen2", "adapter", {"blk.0.attn_q.weight.lora_a": (4, 64), "blk.0.attn_q.weight.lora_b": (32, 4)},
         "do not fit"),
        ("qwen2", "adapter", {"blk.9.attn_q.weight.lora_a": (4, 64), "blk.9.attn_q.weight.lora_b": (64, 4)},
         "does not exist in the base model"),
        ("qwen2", "adapter", {"blk.0.attn_q.weight.scale": (4,)}, "unexpected suffix"),
    ],
)  # fmt: skip
def test_estimate_checks_the_adapter_as_libllama(tmp_path, arch, kind, tensors, error):
    model = {"blk.0.attn_q.weight": TensorInfo("blk.0.attn_q.weight", GGMLType.F16, (64, 64), 0, 64 * 64 * 2)}
    path = _adapter_gguf(tmp_path / "a.gguf", arch, tensors, kind)
    with weightkit.open(path) as adapter, pytest.raises(FormatError, match=error):
        lora_weights_per_device("qwen2", model, adapter, Placement((), (-1,), -1))


SCALES = json.loads((DATA / "lora_memory.json").read_text())["scales"]


@pytest.mark.slow
@pytest.mark.parametrize("adapters", sorted({json.dumps(c["adapters"]) for c in SCALES}))
def test_adapters_at_scales_give_libllamas_compute_buffer(hf_checkpoints, lora_root, adapters):
    """The CPU's compute buffer with adapters loaded at scales as `--lora-scaled` gives them (a 0: loaded, left
    out of the graph) or not applied (`--lora-init-without-apply`, a null scale in the record), several on one
    weight, to the byte, against libllama (tests/data/make_lora_compute.py --scales); in either order, as
    llama.cpp's own order is its unordered_map's."""
    cases = [c for c in SCALES if json.dumps(c["adapters"]) == adapters]
    base = hf_checkpoints[make_lora_adapters.ADAPTERS[cases[0]["adapters"][0][0]].base]
    model_path = lora_root / f"{base.name}.gguf"
    if not model_path.exists():
        convert_hf(base, model_path, "f16")
    paths = []
    for (name, _), outtype in zip(cases[0]["adapters"], cases[0]["outtypes"], strict=True):
        paths.append(lora_root / f"{name}-{outtype}.gguf")
        if not paths[-1].exists():
            convert_lora(adapter_folder(lora_root, name), paths[-1], base, outtype)
    scales = [1.0 if scale is None else scale for _, scale in cases[0]["adapters"]]
    unapplied = any(scale is None for _, scale in cases[0]["adapters"])
    with weightkit.open(model_path) as model, contextlib.ExitStack() as opened:
        files = [opened.enter_context(weightkit.open(path)) for path in paths]
        for case in cases:
            settings = LlamaCppSettings(ctx_size=case["n_ctx"], ubatch_size=case["n_ubatch"],
                                        flash_attn=case["flash_attn"], lora_init_without_apply=unapplied)  # fmt: skip
            assert estimate(model, settings).devices[-1].compute == case["before"]
            for order in (slice(None), slice(None, None, -1)):
                est = estimate(model, settings, adapters=files[order], adapter_scales=scales[order])
                assert est.devices[-1].compute == case["after"], case
            assert est.devices[-1].lora > 0  # (loaded, whatever the scale)


PAIRS = json.loads((DATA / "lora_memory.json").read_text())["pairs"]


@pytest.mark.parametrize("case", PAIRS, ids=[c["model"] for c in PAIRS])
def test_two_adapters_on_one_weight(tmp_path, case):
    """Two skeleton adapters on some of the same weights of a real-size skeleton model, against libllama's graph
    and compute buffer (tests/data/make_lora_compute.py --scales): the graph goes through them last given first
    (its unordered_map's order for two), and the compute buffer is the same in either order."""
    model_path = memory_models.write_model(case["model"], tmp_path)
    paths = [lora_skeletons.write_adapter(model_path, tuple(targets), rank, tmp_path / f"a{i}.gguf")
             for i, (targets, rank) in enumerate(case["adapters"])]  # fmt: skip
    settings = LlamaCppSettings(ctx_size=case["n_ctx"], ubatch_size=case["n_ubatch"], flash_attn=case["flash_attn"])
    with weightkit.open(model_path) as model, weightkit.open(paths[0]) as first, weightkit.open(paths[1]) as second:
        est = estimate(model, settings, adapters=[first, second])
        graph = build_graph(est.hparams, est.context, est.memory, model.tensors, *case["batch"]).graph
        swapped = estimate(model, settings, adapters=[second, first]).devices[-1].compute
        assert estimate(model, settings).devices[-1].compute == case["before"]
    assert len(graph.nodes) == case["nodes"]
    assert lora_skeletons.graph_digest([(t.op, t.ne) for t in graph.nodes]) == case["graph"]
    assert est.devices[-1].compute == swapped == case["after"]


TIED = json.loads((DATA / "lora_memory.json").read_text())["tied"]


def test_a_tied_output_with_a_token_embeddings_adapter_is_refused(tmp_path):
    """libllama aborts on it (tests/data/make_lora_compute.py --scales: the output's product finds the token
    embeddings' flipped pair, and ggml_mul_mat's GGML_ASSERT fails); weightkit refuses it, unless the adapter is
    not applied (a scale of 0, `--lora-init-without-apply`)."""
    assert TIED["returncode"] != 0 and TIED["says"] == ["GGML_ASSERT(ggml_can_mul_mat(a, b)) failed"]
    model_path = memory_models.write_model(TIED["model"], tmp_path)
    path = lora_skeletons.write_adapter(model_path, tuple(TIED["targets"]), TIED["rank"], tmp_path / "a.gguf")
    settings = LlamaCppSettings(ctx_size=TIED["n_ctx"], flash_attn=TIED["flash_attn"])
    with weightkit.open(model_path) as model, weightkit.open(path) as adapter:
        assert "output.weight" not in model.tensors
        with pytest.raises(UnsupportedError, match=r"token_embd\.weight\.lora_a .*tied token.*ggml_can_mul_mat"):
            estimate(model, settings, adapters=[adapter])
        plain = estimate(model, settings).devices[-1].compute
        for est in (estimate(model, settings, adapters=[adapter], adapter_scales=[0.0]),
                    estimate(model, replace(settings, lora_init_without_apply=True), adapters=[adapter])):  # fmt: skip
            assert est.devices[-1].compute == plain and est.devices[-1].lora > 0


def test_the_lora_flags(tmp_path):
    """`--lora A,B`, `--lora-scaled FNAME:SCALE,...` and `--lora-init-without-apply` as llama.cpp's common/arg.cpp
    reads them (each adapter loaded, whatever its scale); a bad one, or a tied output's token-embeddings pair
    applied, refused naming it."""
    model_path = memory_models.write_model(TIED["model"], tmp_path)
    path = lora_skeletons.write_adapter(model_path, ("attn_q",), 8, tmp_path / "a.gguf")
    embd = lora_skeletons.write_adapter(model_path, ("token_embd",), 8, tmp_path / "e.gguf")

    def run(*flags: str):
        return CliRunner().invoke(app, ["estimate", str(model_path), "-c", "256", "--json", *flags])

    loaded = []
    for flags in (["--lora", str(path)], ["--lora", f"{path},{path}"], ["--lora-scaled", f"{path}:0.5,{embd}:0"],
                  ["--lora", f"{path},{embd}", "--lora-init-without-apply"]):  # fmt: skip
        result = run(*flags)
        assert result.exit_code == 0, result.output
        loaded.append(json.loads(result.output)["devices"][-1]["lora"])
    assert loaded[1] == 2 * loaded[0] and loaded[2] == loaded[3] > loaded[0]
    for flags, error in ((["--lora-scaled", str(path)], "lora-scaled format: FNAME:SCALE"),
                         (["--lora-scaled", f"{path}:x"], "is not a number"),
                         (["--lora", str(embd)], "tied token embeddings")):  # fmt: skip
        result = run(*flags)
        assert isinstance(result.exception, WeightkitError) and error in str(result.exception)

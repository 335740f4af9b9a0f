"""Record what libmtmd takes for the projector files of `memory_models.PROJECTORS` (skeleton GGUFs recorded from
the reference converter by make_skeletons.py), into tests/data/mmproj_memory.json, which the tests compare
weightkit's projector estimate with. Needs llama-cpp-python 0.3.36 (its libmtmd):

    python tests/data/make_mmproj_memory.py [projector ...]

For each projector and flash attention setting (llama-server's `-fa auto` and `off`; `on` is `auto` on the CPU):
what `mtmd_get_memory_usage` gives llama-server's fit per device (weights' bytes plus compute buffer, exact), and
what clip logs when it loads the projector so (the compute buffer in MiB with two decimals, the warmup graph's
nodes, the warmup size, whether flash attention took).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "tools"))
sys.path.insert(0, str(HERE))
import memory_models  # noqa: E402
import mtmd_oracle  # noqa: E402

OUT = HERE / "mmproj_memory.json"
FLASH = {"auto": -1, "off": 0}


def record(path: Path) -> list[dict]:
    cases = []
    for flash_attn, value in FLASH.items():
        usage = mtmd_oracle.projector_memory(str(path), flash_attn_type=value)
        log = mtmd_oracle.projector_log(str(path), flash_attn_type=value)
        cases.append({"flash_attn_type": flash_attn, "usage": usage, **log})
    return cases


def main() -> None:
    names = sys.argv[1:] or sorted(memory_models.PROJECTORS)
    recorded = json.loads(OUT.read_text()) if OUT.exists() else {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            recorded[name] = record(memory_models.write_model(name, Path(tmp)))
            print(name, recorded[name], flush=True)
    OUT.write_text(json.dumps(dict(sorted(recorded.items())), indent=1) + "\n")


if __name__ == "__main__":
    main()

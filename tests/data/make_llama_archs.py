"""Record what llama.cpp's source says of its architectures into tests/data/llama_archs.json, which
tests/memory/test_llamacpp_generic.py checks weightkit's table (`known_architectures`) against:

- `names`: every name of `LLM_ARCH_NAMES` (src/llama-arch.cpp) but the dummy "clip" and "(unknown)";
- `recurrent`, `hybrid`: the names `llm_arch_is_recurrent` and `llm_arch_is_hybrid` list;
- `no_memory`: those `llama_model::create_memory` gives no memory; `own_memory`: those it gives a cache of
  their own (a case of their own, or a layer reuse or share callback in the standard cache's branch);
- `swa`: each architecture's `load_swa_pattern(ml, pattern, dense_first)` or required
  `attention.sliding_window_pattern` array (`{"array": true}`) in its `load_arch_hparams`.

    python tests/data/make_llama_archs.py --llama-cpp llama_cpp_python-0.3.36/vendor/llama.cpp
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

OUT = Path(__file__).resolve().parent / "llama_archs.json"


def _function(text: str, signature: str) -> str:
    """The body of the C++ function whose definition starts with `signature` (braces counted)."""
    start = text.index("{", text.index(signature))
    depth = 0
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start : i + 1]
    raise ValueError(f"{signature}: unbalanced braces")


def record(llama_cpp: Path) -> dict:
    src = llama_cpp / "src"
    arch_cpp = (src / "llama-arch.cpp").read_text()
    table = _function(arch_cpp, "static const std::map<llm_arch, const char *> LLM_ARCH_NAMES")
    names = dict(re.findall(r"\{\s*(LLM_ARCH_\w+),\s*\"([^\"]+)\"\s*\}", table))
    names = {enum: name for enum, name in names.items() if enum not in ("LLM_ARCH_CLIP", "LLM_ARCH_UNKNOWN")}

    def listed(body: str) -> list[str]:
        return sorted(names[e] for e in re.findall(r"LLM_ARCH_\w+", body) if e in names)

    model_cpp = (src / "llama-model.cpp").read_text()
    memory = _function(model_cpp, "llama_memory_i * llama_model::create_memory(")
    none_group, _, rest = memory.partition("res = nullptr;")
    own_cases, _, default = rest.partition("default:")
    standard = default.partition("llama_kv_cache::layer_filter_cb filter = nullptr;")[2]
    own = set(listed(" ".join(re.findall(r"case (LLM_ARCH_\w+):", own_cases))))
    own |= set(listed(" ".join(re.findall(r"arch == (LLM_ARCH_\w+)", standard))))

    classes = {}  # llama_model_<class> -> architecture names
    factory = _function(model_cpp, "static llama_model * llama_model_mapping(")
    for cases, cls in re.findall(r"((?:case LLM_ARCH_\w+:\s*)+)\s*return new llama_model_(\w+)\(", factory):
        classes.setdefault(cls, []).extend(listed(cases))
    swa = {}
    for path in sorted((src / "models").glob("*.cpp")):
        text = path.read_text()
        for cls in re.findall(r"void llama_model_(\w+)::load_arch_hparams", text):
            body = _function(text, f"void llama_model_{cls}::load_arch_hparams")
            call = re.search(r"load_swa_pattern\(ml,\s*(\d+)(?:,\s*(?:/\*[^*]*\*/\s*)?(true|false))?\)", body)
            fact = None
            if call:
                fact = {"pattern": int(call[1]), "dense_first": call[2] == "true"}
            elif re.search(r"get_arr\(LLM_KV_ATTENTION_SLIDING_WINDOW_PATTERN, hparams\.is_swa_impl\)", body):
                fact = {"array": True}
            if fact is not None:
                swa.update(dict.fromkeys(classes.get(cls, ()), fact))
    return {
        "names": list(names.values()),
        "recurrent": listed(_function(arch_cpp, "bool llm_arch_is_recurrent(")),
        "hybrid": listed(_function(arch_cpp, "bool llm_arch_is_hybrid(")),
        "no_memory": listed(none_group),
        "own_memory": sorted(own),
        "swa": dict(sorted(swa.items())),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llama-cpp", type=Path, required=True, help="llama.cpp's source (the sdist's vendor/)")
    args = parser.parse_args()
    OUT.write_text(json.dumps(record(args.llama_cpp), indent=1) + "\n")


if __name__ == "__main__":
    main()

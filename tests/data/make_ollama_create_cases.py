"""Record the table cases of Ollama's x/create tests (policy decisions, alignment, expert groups) with their
expected values as upstream has them, into ollama_create_cases.json, which tests/ollama/test_import.py reads.

Run: python tests/data/make_ollama_create_cases.py GIT_DIR [COMMIT]
(GIT_DIR: a clone of github.com/ollama/ollama; COMMIT defaults to the one docs/formats.md names.)
Each table row is read from the Go source as it stands; a policy's Go struct literal (its fields) is given
here as the config.json that builds the same policy, with the architecture key the registry files it under.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

COMMIT = "fb30760996871fa9460115c753afd2c60d4ab0f7"
OUT = Path(__file__).with_name("ollama_create_cases.json")

# (file, test function, architecture key ("" for GetTensorQuantization), {Go policy variable: config.json})
POLICY_TABLES = [
    ("create_test.go", "TestGetTensorQuantization_MixedPrecisionPromotion", "", {"": {}}),
    ("gemma4_test.go", "TestGemma4QuantizationType", "Gemma4ForCausalLM", {
        "transform26B": {"num_hidden_layers": 30, "num_experts": 128},
        "transform8E": {"num_hidden_layers": 30, "num_experts": 8},
    }),
    ("glimmer_test.go", "TestGlimmerQuantizationType", "MuseGlimmerForConditionalGeneration",
     {"": {"num_hidden_layers": 52}}),
    ("nemotron_h_test.go", "TestNemotronHImportTransformQuantizationPolicy", "NemotronHForCausalLM",
     {"": {"num_hidden_layers": 52}}),
    # testLagunaQuantizationRecipe runs under both configs of TestLagunaImportTransformSameRecipeAcrossConfigs
    ("laguna_test.go", "testLagunaQuantizationRecipe", "LagunaForCausalLM",
     {"xs.2": {"num_hidden_layers": 40, "mlp_layer_types": ["dense", "sparse", "sparse"]},
      "xs 2.1": {"num_hidden_layers": 40, "mlp_only_layers": [0], "gating_types": ["per_head"]}}),
]  # fmt: skip

SHAPE = r"(\[\]int32\{[^}]*\}|\w+)"
POSITIONAL = re.compile(r'\{"([^"]*)",\s*(?:(\w+),\s*)?"([^"]+)",\s*' + SHAPE + r',\s*"(\w*)",\s*"(\w*)"\}')
KEYED = re.compile(r'\{\s*name:\s*"([^"]*)",\s*tensor:\s*"([^"]+)",\s*shape:\s*' + SHAPE
                   + r',\s*quantize:\s*"(\w*)",\s*want:\s*"(\w*)",?\s*\}')  # fmt: skip


def go_source(git_dir: str, commit: str, name: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:x/create/{name}"], check=True,
                          capture_output=True, text=True).stdout  # fmt: skip


def function_body(src: str, func: str) -> str:
    start = src.index(f"func {func}(")
    end = src.find("\nfunc ", start + 1)
    return src[start : end if end > 0 else len(src)]


def ints(literal: str) -> list[int]:
    return [int(x) for x in re.findall(r"-?\d+", literal.split("{", 1)[1])]


def shape_of(expr: str, body: str) -> list[int]:
    if expr.startswith("[]int32"):
        return ints(expr)
    m = re.search(rf"\b{expr}\s*:?=\s*(\[\]int32\{{[^}}]*\}})", body)
    return ints(m[1])


def main(git_dir: str, commit: str = COMMIT) -> None:
    cases: dict = {"commit": commit, "policy": [], "is_aligned": [], "expert_group_prefix": [], "stacked_3d": []}
    for file, func, arch, policies in POLICY_TABLES:
        body = function_body(go_source(git_dir, commit, file), func)
        rows = [(n, v or "", t, s, q, w) for n, v, t, s, q, w in POSITIONAL.findall(body)]
        rows += [(n, "", t, s, q, w) for n, t, s, q, w in KEYED.findall(body)]
        assert rows, f"no table rows in {file} {func}"
        for desc, var, tensor, shape, quantize, want in rows:
            configs = {var: policies[var]} if var in policies and var else policies
            for label, config in configs.items():
                source = f"{file} {func}: {desc}" + (f" ({label})" if label else "")
                row = {"source": source, "architecture": arch, "config": config, "tensor": tensor}
                cases["policy"].append({**row, "shape": shape_of(shape, body), "quantize": quantize, "want": want})
    create = go_source(git_dir, commit, "create_test.go")
    body = function_body(create, "TestIsAligned")
    for desc, shape, q, want in re.findall(r'\{"([^"]*)",\s*(\[\]int32\{[^}]*\}),\s*"(\w+)",\s*(true|false)\}', body):
        cases["is_aligned"].append({"source": desc, "shape": ints(shape), "quantize": q, "want": want == "true"})
    body = function_body(create, "TestExpertGroupPrefix")
    for name, want in re.findall(r'\{"([^"]+)",\s*"([^"]*)"\}', body):
        cases["expert_group_prefix"].append({"tensor": name, "want": want})
    body = function_body(create, "TestGetTensorQuantization_StackedExpert3D")
    call = r'GetTensorQuantization\(\s*"([^"]+)",\s*(\[\]int32\{[^}]*\}),\s*"(\w+)",\s*\)\s*if \w+ != "(\w*)"'
    calls = re.findall(call, body)
    for tensor, shape, q, want in calls:
        cases["stacked_3d"].append({"tensor": tensor, "shape": ints(shape), "quantize": q, "want": want})
    OUT.write_text(json.dumps(cases, indent=1) + "\n")
    print(f"{OUT.name}: " + ", ".join(f"{k} {len(v)}" for k, v in cases.items() if isinstance(v, list)))


if __name__ == "__main__":
    main(*sys.argv[1:])

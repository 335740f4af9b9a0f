"""gguf-py's tests/test_metadata.py (llama.cpp's gguf-py, as llama-cpp-python 0.3.36 bundles it) against
weightkit's model-naming heuristics (`weightkit.convert.hf.metadata`), with upstream's expected values.

Upstream calls `gguf.Metadata` on a model card, hf parameters or a model path alone; weightkit runs the same
heuristics inside `derive_metadata(folder, config, total_params)`, so a card is written as the folder's
README.md and the fields the card decides are compared (the converter's fallback, the folder's name as
`name`, is not part of these cases).
"""

from __future__ import annotations

import pytest
import yaml

from weightkit.convert.hf.metadata import derive_metadata, id_to_title, parse_model_id

TITLES = [
    ("Mixtral-8x7B-Instruct-v0.1", "Mixtral 8x7B Instruct v0.1"),
    ("Meta-Llama-3-8B", "Meta Llama 3 8B"),
    ("hermes-2-pro-llama-3-8b-DPO", "Hermes 2 Pro Llama 3 8b DPO"),
]

# (model id, total parameters, (name, organization, basename, finetune, version, size_label))
MODEL_IDS = [
    (
        "Mistral/Mixtral-8x7B-Instruct-v0.1",
        0,
        ("Mixtral-8x7B-Instruct-v0.1", "Mistral", "Mixtral", "Instruct", "v0.1", "8x7B"),
    ),
    ("Mixtral-8x7B-Instruct-v0.1", 0, ("Mixtral-8x7B-Instruct-v0.1", None, "Mixtral", "Instruct", "v0.1", "8x7B")),
    ("Mixtral-8x7B-Instruct", 0, ("Mixtral-8x7B-Instruct", None, "Mixtral", "Instruct", None, "8x7B")),
    ("Mixtral-8x7B-v0.1", 0, ("Mixtral-8x7B-v0.1", None, "Mixtral", None, "v0.1", "8x7B")),
    ("Mixtral-8x7B", 0, ("Mixtral-8x7B", None, "Mixtral", None, None, "8x7B")),
    ("Mixtral-v0.1", 0, ("Mixtral-v0.1", None, "Mixtral", None, "v0.1", None)),
    ("Mixtral", 0, ("Mixtral", None, None, None, None, None)),
    ("NousResearch/Meta-Llama-3-8B", 0, ("Meta-Llama-3-8B", "NousResearch", "Meta-Llama-3", None, None, "8B")),
    ("Qwen1.5-MoE-A2.7B-Chat", 0, ("Qwen1.5-MoE-A2.7B-Chat", None, "Qwen1.5-MoE", "Chat", None, "A2.7B")),
    ("Qwen2-57B-A14B-Instruct", 0, ("Qwen2-57B-A14B-Instruct", None, "Qwen2", "Instruct", None, "57B-A14B")),
    (
        "microsoft/Phi-3-mini-4k-instruct",
        4 * 10**9,
        ("Phi-3-mini-4k-instruct", "microsoft", "Phi-3", "4k-instruct", None, "mini"),
    ),
    (
        "delphi-suite/stories-llama2-50k",
        50 * 10**3,
        ("stories-llama2-50k", "delphi-suite", "stories-llama2", None, None, "50K"),
    ),
    (
        "DeepSeek-Coder-V2-Lite-Instruct",
        0,
        ("DeepSeek-Coder-V2-Lite-Instruct", None, "DeepSeek-Coder-V2-Lite", "Instruct", None, None),
    ),
    (
        "crestf411/daybreak-kunoichi-2dpo-7b",
        0,
        ("daybreak-kunoichi-2dpo-7b", "crestf411", "daybreak-kunoichi", "2dpo", None, "7B"),
    ),
    ("Qwen2-0.5B-Instruct", 0, ("Qwen2-0.5B-Instruct", None, "Qwen2", "Instruct", None, "0.5B")),
    ("smallcloudai/Refact-1_6B-fim", 0, ("Refact-1_6B-fim", "smallcloudai", "Refact", "fim", None, "1.6B")),
    (
        "UCLA-AGI/Gemma-2-9B-It-SPPO-Iter3",
        0,
        ("Gemma-2-9B-It-SPPO-Iter3", "UCLA-AGI", "Gemma-2", "It-SPPO", "Iter3", "9B"),
    ),
    (
        "NousResearch/Hermes-2-Theta-Llama-3-8B",
        0,
        ("Hermes-2-Theta-Llama-3-8B", "NousResearch", "Hermes-2-Theta-Llama-3", None, None, "8B"),
    ),
    ("SeaLLMs/SeaLLMs-v3-7B-Chat", 0, ("SeaLLMs-v3-7B-Chat", "SeaLLMs", "SeaLLMs-v3", "Chat", None, "7B")),
    (
        "internlm/internlm2_5-7b-chat-1m",
        7 * 10**9,
        ("internlm2_5-7b-chat-1m", "internlm", "internlm2_5", "chat-1m", None, "7B"),
    ),
    ("pszemraj/jamba-900M-v0.13-KIx2", 0, ("jamba-900M-v0.13-KIx2", "pszemraj", "jamba", "KIx2", "v0.13", "900M")),
    ("state-spaces/mamba-2.8b-hf", 0, ("mamba-2.8b-hf", "state-spaces", "mamba", "hf", None, "2.8B")),
    ("abacaj/llama-161M-100B", 161 * 10**6, ("llama-161M-100B", "abacaj", "llama", "100b", None, "161M")),
    ("SparseLLM/relu-100B", 1340 * 10**6, ("relu-100B", "SparseLLM", "relu", "100b", None, None)),
    ("bigscience/bloom-7b1-petals", 0, ("bloom-7b1-petals", "bigscience", "bloom", "petals", None, "7.1B")),
    (
        "MaziyarPanahi/GreenNode-mini-7B-multilingual-v1olet-Mistral-7B-Instruct-v0.1",
        0,
        (
            "GreenNode-mini-7B-multilingual-v1olet-Mistral-7B-Instruct-v0.1",
            "MaziyarPanahi",
            "GreenNode-mini",
            "multilingual-v1olet-Mistral-Instruct",
            "v0.1",
            "7B",
        ),
    ),
    (
        "mistralai/Mistral-Nemo-Instruct-2407",
        0,
        ("Mistral-Nemo-Instruct-2407", "mistralai", "Mistral-Nemo", "Instruct", "2407", None),
    ),
    (
        "deepseek-ai/DeepSeek-V2-Chat-0628",
        0,
        ("DeepSeek-V2-Chat-0628", "deepseek-ai", "DeepSeek-V2", "Chat", "0628", None),
    ),
    (
        "OpenGVLab/Mini-InternVL-Chat-2B-V1-5",
        0,
        ("Mini-InternVL-Chat-2B-V1-5", "OpenGVLab", "Mini-InternVL", "Chat", "V1-5", "2B"),
    ),
    ("jondurbin/bagel-dpo-2.8b-v0.2", 0, ("bagel-dpo-2.8b-v0.2", "jondurbin", "bagel-dpo", None, "v0.2", "2.8B")),
    (
        "voxmenthe/SFR-Iterative-DPO-LLaMA-3-8B-R-unquantized",
        0,
        (
            "SFR-Iterative-DPO-LLaMA-3-8B-R-unquantized",
            "voxmenthe",
            "SFR-Iterative-DPO-LLaMA-3",
            "R-unquantized",
            None,
            "8B",
        ),
    ),
    ("microsoft/Florence-2-base", 0, ("Florence-2-base", "microsoft", None, None, None, None)),
    (
        "mistralai/-Mistral--Nemo-Base-2407-",
        0,
        ("-Mistral--Nemo-Base-2407-", "mistralai", "Mistral-Nemo-Base", None, "2407", None),
    ),
    (
        "Llama-3-Instruct-abliteration-LoRA-8B",
        0,
        ("Llama-3-Instruct-abliteration-LoRA-8B", None, "Llama-3", "Instruct-abliteration-LoRA", None, "8B"),
    ),
    (
        "Llama-3-Instruct-abliteration-LoRA-8B",
        -1234,
        ("Llama-3-Instruct-abliteration-LoRA-8B", None, "Llama-3", "Instruct-abliteration", None, "8B"),
    ),
]

OPENHERMES = {"name": "OpenHermes 2.5", "organization": "Teknium", "version": "2.5",
              "repo_url": "https://huggingface.co/teknium/OpenHermes-2.5"}  # fmt: skip
FULL_CARD = {
    "tags": ["Llama-3", "instruct", "finetune", "chatml", "DPO", "RLHF", "gpt4", "synthetic data", "distillation",
             "function calling", "json mode", "axolotl"],
    "model-index": [{"name": "Mixtral-8x7B-Instruct-v0.1", "results": []}],
    "language": ["en"],
    "datasets": ["teknium/OpenHermes-2.5"],
    "widget": [{"example_title": "Hermes 2 Pro", "messages": [
        {"role": "system", "content": "You are a sentient, superintelligent artificial general intelligence, here "
                                      "to teach and assist me."},
        {"role": "user", "content": "Write a short story about Goku discovering kirby has teamed up with Majin Buu "
                                    "to destroy the world."}]}],
    "base_model": ["EmbeddedLLM/Mistral-7B-Merge-14-v0", "janai-hq/trinity-v1"],
}  # fmt: skip
# (model card, the fields upstream expects it to set; every other field a card can set stays unset)
CARDS = [
    (FULL_CARD, {
        "base_models": [
            {"name": "Mistral 7B Merge 14 v0", "organization": "EmbeddedLLM", "version": "14-v0",
             "repo_url": "https://huggingface.co/EmbeddedLLM/Mistral-7B-Merge-14-v0"},
            {"name": "Trinity v1", "organization": "Janai Hq", "version": "v1",
             "repo_url": "https://huggingface.co/janai-hq/trinity-v1"}],
        "tags": FULL_CARD["tags"],
        "languages": ["en"],
        "datasets": [OPENHERMES],
    }),
    ({"base_models": "teknium/OpenHermes-2.5"}, {"base_models": [OPENHERMES]}),
    ({"base_models": ["https://huggingface.co/teknium/OpenHermes-2.5"]}, {"base_models": [OPENHERMES]}),
    ({"base_models": [OPENHERMES]}, {"base_models": [OPENHERMES]}),
    ({"datasets": "teknium/OpenHermes-2.5"}, {"datasets": [OPENHERMES]}),
    ({"datasets": ["https://huggingface.co/teknium/OpenHermes-2.5"]}, {"datasets": [OPENHERMES]}),
    ({"datasets": [OPENHERMES]}, {"datasets": [OPENHERMES]}),
]  # fmt: skip
CARD_FIELDS = ("base_models", "datasets", "tags", "languages", "author", "version", "organization", "finetune",
               "basename", "description", "size_label", "license")  # fmt: skip
HERMES = {"name": "Hermes 2 Pro Llama 3 8b DPO", "finetune": "DPO", "basename": "hermes-2-pro-llama-3",
          "size_label": "8B", "organization": None, "version": None}  # fmt: skip


@pytest.mark.parametrize(("text", "title"), TITLES)
def test_id_to_title(text, title):
    assert id_to_title(text) == title


@pytest.mark.parametrize(("model_id", "total_params", "expected"), MODEL_IDS)
def test_get_model_id_components(model_id, total_params, expected):
    got = parse_model_id(model_id, total_params)
    assert (got.name, got.organization, got.basename, got.finetune, got.version, got.size_label) == expected


@pytest.mark.parametrize(("card", "expected"), CARDS)
def test_apply_metadata_heuristic_from_model_card(tmp_path, card, expected):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "README.md").write_text("---\n" + yaml.safe_dump(card) + "---\n")
    got = derive_metadata(folder, {}, 0)
    assert {f: getattr(got, f) for f in CARD_FIELDS} == {f: expected.get(f) for f in CARD_FIELDS}


def test_apply_metadata_heuristic_from_hf_parameters(tmp_path):
    folder = tmp_path / "model"  # a folder name that parses to nothing: only _name_or_path decides
    folder.mkdir()
    got = derive_metadata(folder, {"_name_or_path": "./hermes-2-pro-llama-3-8b-DPO"}, 0)
    assert {f: getattr(got, f) for f in HERMES} == HERMES


def test_apply_metadata_heuristic_from_model_dir(tmp_path):
    folder = tmp_path / "hermes-2-pro-llama-3-8b-DPO"
    folder.mkdir()
    got = derive_metadata(folder, {}, 0)
    assert {f: getattr(got, f) for f in HERMES} == HERMES

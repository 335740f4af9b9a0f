"""The config blob `ollama create` writes for a safetensors import (x/create/client's manifest writer): a
`ConfigV2` with the model format, the quantization in effect, the capabilities, the minimum Ollama version
(`requires`), and the parser and renderer Ollama picks by the checkpoint's architecture and chat template."""

from __future__ import annotations

import json
from pathlib import Path

MIN_OLLAMA_VERSION = "0.19.0"  # x/create/client.MinOllamaVersion

# The built-in parsers Ollama can name for a safetensors import: (tools, thinking) (model/parsers).
PARSERS = {
    "glimmer": (True, True), "laguna": (True, True), "poolside-v1": (True, True), "cohere": (True, True),
    "glm-4.7": (True, True), "deepseek3": (True, True), "gemma4": (True, True), "qwen3.5": (True, True),
    "qwen3": (True, False), "nemotron-3-nano": (True, True), "nemotron-3.5-nano": (True, True),
}  # fmt: skip


def _read(folder: Path, name: str) -> str:
    try:
        return (folder / name).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def chat_template(folder: Path) -> str:
    """tokenizer_config.json's chat_template, else chat_template.jinja's."""
    try:
        doc = json.loads(_read(folder, "tokenizer_config.json") or "null")
    except ValueError:
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("chat_template"), str) and doc["chat_template"]:
        return doc["chat_template"]
    return _read(folder, "chat_template.jinja")


def _qwen35_family(s: str) -> bool:
    s = s.lower()
    return "qwen3_5" in s or "qwen3next" in s


def _laguna(folder: Path) -> str:
    marker = "laguna_glm_thinking_v8"
    hit = marker in chat_template(folder) or marker in _read(folder, "chat_template.jinja")
    return "poolside-v1" if hit else "laguna"


def _nemotron(folder: Path) -> str:
    marker = "{reasoning effort: efficient}"
    hit = marker in _read(folder, "chat_template.jinja") or marker in chat_template(folder)
    return "nemotron-3.5-nano" if hit else "nemotron-3-nano"


def _name_for(folder: Path, s: str, renderer: bool) -> str:
    s = s.lower()
    if s.startswith("museglimmer") or s == "muse_glimmer":
        return "glimmer"
    if "laguna" in s:
        return _laguna(folder)
    if "cohere2moe" in s or "cohere2_moe" in s:
        return "cohere"
    for stems, name in ((("gemma4",), "gemma4"), (("glm4", "glm-4"), "glm-4.7"), (("deepseek",), "deepseek3")):
        if any(stem in s for stem in stems):
            return name
    if _qwen35_family(s):
        if not renderer:
            return "qwen3.5"
        template = chat_template(folder)
        return "qwen3.8" if "resolved_reasoning_effort" in template and "preserve_thinking" in template else "qwen3.5"
    if "qwen3" in s:
        return "qwen3-coder" if renderer else "qwen3"
    if "nemotronh" in s or "nemotron_h" in s:
        return _nemotron(folder)
    return ""


def _identifiers(config: dict) -> list[str]:
    arch = config.get("architectures")
    ids = [a for a in arch if isinstance(a, str)] if isinstance(arch, list) else []
    llm = config.get("llm_config")
    for value in (config.get("model_type"), llm.get("model_type") if isinstance(llm, dict) else None):
        ids.append(value if isinstance(value, str) else "")
    return ids


def parser_and_renderer(folder: Path, config: dict) -> tuple[str, str]:
    """getParserName and getRendererName: the first of the architectures, then model_type, that names one."""
    ids = _identifiers(config)
    return (next((n for s in ids if (n := _name_for(folder, s, False))), ""),
            next((n for s in ids if (n := _name_for(folder, s, True))), ""))  # fmt: skip


def capabilities(folder: Path, config: dict, parser: str) -> list[str]:
    """completion, then vision, audio, tools and thinking as the config, parser and chat template show them."""
    caps = ["completion"]
    if isinstance(config.get("vision_config"), dict) or config.get("has_vision") is True:
        caps.append("vision")
    if isinstance(config.get("audio_config"), dict) or isinstance(config.get("sound_config"), dict):
        caps.append("audio")
    tools, thinking = PARSERS.get(parser, (False, False))
    if tools:
        caps.append("tools")
    template = chat_template(folder)
    think_tags = "<think>" in template and "</think>" in template
    split = ("content.split('</think>')" in template or 'content.split("</think>")' in template) and (
        "reasoning_content" not in template and "<SPECIAL_12>" not in template
    )
    arch = config.get("architectures") if isinstance(config.get("architectures"), list) else []
    model_type = config.get("model_type") if isinstance(config.get("model_type"), str) else ""
    always = any(_qwen35_family(s) for s in [model_type, *(a for a in arch if isinstance(a, str))])
    if think_tags or split or always or thinking:
        caps.append("thinking")
    return caps


def safetensors_config(
    folder: Path,
    config: dict,
    file_type: str,
    *,
    parser: str = "",
    renderer: str = "",
    requires: str = "",
    draft: dict | None = None,
) -> bytes:
    """The config blob's bytes: `model.ConfigV2` as Go's json.Marshal writes it (no trailing newline);
    a Modelfile's PARSER, RENDERER and REQUIRES win over what the folder implies; `draft`: its DRAFT's
    `model.Draft` (its fields in Go's order)."""
    found_parser, found_renderer = parser_and_renderer(folder, config)
    parser, renderer = parser or found_parser, renderer or found_renderer
    doc: dict = {"model_format": "safetensors", "model_family": "", "model_families": None, "model_type": "",
                 "file_type": file_type}  # fmt: skip
    if renderer:
        doc["renderer"] = renderer
    if parser:
        doc["parser"] = parser
    doc["requires"] = requires or MIN_OLLAMA_VERSION
    doc["capabilities"] = capabilities(folder, config, parser)
    if draft:
        doc["draft"] = draft
    doc["architecture"], doc["os"] = "", ""
    text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").encode()

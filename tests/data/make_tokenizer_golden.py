"""Record what transformers' AutoTokenizer makes of each tokenizer variant: tests/data/tokenizer_golden.json.

llama.cpp's converter reads BPE and WordPiece vocabularies through `AutoTokenizer.from_pretrained`; weightkit
reproduces its loading steps on the `tokenizers` library (weightkit.convert.hf.tokenizer.fast). For each
variant of make_hf_checkpoints.TOKENIZER_VARIANTS this records, as the converter computes them, the SHA-256 of
the token list and token types (`get_vocab_base`) and the pre-tokenizer check hash. Run it with the
reference's environment (transformers 4.57.6, see docs/contributing.md):

    PYTHONPATH=src /tmp/convenv/bin/python tests/data/make_tokenizer_golden.py
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import make_hf_checkpoints as mk
from transformers import AutoTokenizer, __version__

from weightkit.convert.hf.tokenizer.pre_tokenizer import _table
from weightkit.convert.hf.tokenizer.vocab import looks_special

OUT = Path(__file__).parent / "tokenizer_golden.json"


def reference(folder: Path, vocab_size: int) -> dict[str, str]:
    """`TextModel.get_vocab_base` and `get_vocab_base_pre`'s hash, with transformers."""
    tok = AutoTokenizer.from_pretrained(folder)
    check = hashlib.sha256(str(tok.encode(_table()[0])).encode()).hexdigest()
    rev = {i: t for t, i in tok.vocab.items()}
    added, decoder = tok.get_added_vocab(), tok.added_tokens_decoder
    tokens, types = [], []
    for i in range(vocab_size):
        if i not in rev:
            tokens.append(f"[PAD{i}]")
            types.append(5)
            continue
        t = rev[i]
        if t in added:
            if not decoder[i].normalized:
                t = tok.decode(tok.encode(t, add_special_tokens=False))
            if decoder[i].special or looks_special(t):
                types.append(3)
            else:
                t = t.replace("\u2581", " ")
                types.append(4)
        else:
            types.append(1)
        tokens.append(t)
    return {"vocab_sha256": vocab_digest(tokens, types), "check_hash": check}


def vocab_digest(tokens: list[str], types: list[int]) -> str:
    return hashlib.sha256(json.dumps([tokens, types], ensure_ascii=False).encode()).hexdigest()


def main() -> None:
    golden: dict = {"transformers": __version__, "variants": {}}
    with tempfile.TemporaryDirectory() as tmp:
        checkpoints = mk.build_all(Path(tmp) / "models")
        for name, (_, _, vocab_size, _) in mk.TOKENIZER_VARIANTS.items():
            folder = mk.tokenizer_variant(name, checkpoints, Path(tmp) / "variants")
            golden["variants"][name] = reference(folder, vocab_size)
            print(name, golden["variants"][name], flush=True)
    OUT.write_text(json.dumps(golden, indent=1) + "\n")


if __name__ == "__main__":
    main()

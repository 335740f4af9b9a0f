"""Record transformers' logits on tiny checkpoints of make_hf_checkpoints.py: tests/data/logits_golden.json.

tests/convert/test_llama_logits.py converts the same checkpoints with weightkit (--outtype f32), runs them in
llama.cpp (llama-cpp-python) on the same token ids and compares. For each checkpoint, transformers 4.57.6's
AutoModelForCausalLM (float32, eager attention) runs once on the first 8 token ids of a sample text (its
own tokenizer, BOS included), and the script stores, at every position: the logits of a few vocabulary columns (the
top 4 at each position and 8 spread over the vocabulary) and the log-sum-exp over the whole vocabulary (which
every logit moves). The SHA-256 of each checkpoint file is stored too, so the test can tell that the recorded
logits still belong to the checkpoints make_hf_checkpoints.py builds. Run from the repository:

    /tmp/convenv/bin/python tests/data/make_logits_golden.py

Gemma 3 is not recorded: llama.cpp scales its queries by 1/sqrt(head_dim) (1/sqrt(n_embd/n_head) for the 27B)
and ignores query_pre_attn_scalar, which the tiny checkpoint sets to 256 with heads of 16 (the real models
have the two equal), so llama.cpp and transformers legitimately disagree on it.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "src"), str(Path(__file__).parent)]
import make_hf_checkpoints  # noqa: E402

OUT = Path(__file__).parent / "logits_golden.json"
#: SiLU decoders (Llama 3 with llama3 rope scaling, bf16 source; Qwen3 with Q/K norms, f32) and a GELU one
#: with soft-capping and a sliding window (Gemma 2, f32)
NAMES = ("Tiny-Llama-3-8B-Instruct", "tiny-qwen3", "tiny-gemma-2")
TEXT = "The quick brown fox jumps over the lazy dog."
TOKENS = 8  # the first 8 of its token ids


def checkpoint_hashes(folder: Path) -> dict[str, str]:
    """SHA-256 of config.json and every safetensors file (the bytes the logits depend on)."""
    files = [folder / "config.json", *sorted(folder.glob("*.safetensors"))]
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def record(folder: Path) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ids = AutoTokenizer.from_pretrained(folder)(TEXT)["input_ids"][:TOKENS]
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].double().numpy()
    vocab = logits.shape[1]
    columns = {int(c) for row in logits for c in np.argsort(-row)[:4]}
    columns |= {int(c) for c in np.linspace(0, vocab - 1, 8)}
    columns = sorted(columns)
    top = logits.max(axis=1, keepdims=True)
    lse = (top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))).tolist()
    return {"files": checkpoint_hashes(folder), "vocab_size": vocab, "token_ids": ids, "columns": columns,
            "logits": [[round(float(row[c]), 7) for c in columns] for row in logits],
            "logsumexp": [round(x, 7) for x in lse]}  # fmt: skip


def main() -> None:
    import transformers

    golden = {"transformers": transformers.__version__, "text": TEXT, "checkpoints": {}}
    with tempfile.TemporaryDirectory() as tmp:
        vocabs = make_hf_checkpoints.vocab_files()
        for name in NAMES:
            golden["checkpoints"][name] = record(make_hf_checkpoints.build(name, Path(tmp), vocabs))
            print(name, len(golden["checkpoints"][name]["token_ids"]), "tokens")
    text = json.dumps(golden, indent=1)
    OUT.write_text(re.sub(r"\[[^\[\]{}]*\]", lambda m: re.sub(r"\s+", "", m[0]), text) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

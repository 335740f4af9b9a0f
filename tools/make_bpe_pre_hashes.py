"""Record llama.cpp's BPE pre-tokenizer table as weightkit package data.

`convert_hf_to_gguf.py` names a BPE tokenizer's pre-tokenizer (`tokenizer.ggml.pre`) by hashing the ids its
tokenizer gives for a fixed check text, then comparing with a generated chain of `if chkhsh == "...":
res = "..."` statements (not `elif`: when a hash appears twice, the last one wins). This script reads the
check text and the chain from the reference's source and writes them to
src/weightkit/convert/hf/tokenizer/data/bpe_pre_hashes.json.

    python tools/make_bpe_pre_hashes.py path/to/llama.cpp/conversion/base.py
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src/weightkit/convert/hf/tokenizer/data/bpe_pre_hashes.json"


def main(base_py: str) -> None:
    source = Path(base_py).read_text(encoding="utf-8")
    body = source[source.index("def get_vocab_base_pre") : source.index("# Marker: End get_vocab_base_pre")]
    check_text = ast.literal_eval(re.search(r"^\s*chktxt = (.*)$", body, re.M).group(1))
    pre_by_hash: dict[str, str] = {}
    for sha, pre in re.findall(r'if chkhsh == "([0-9a-f]{64})":(?:\s*#[^\n]*)*\s*res = "([^"]+)"', body):
        pre_by_hash.pop(sha, None)  # last match wins, as in the chain of ifs
        pre_by_hash[sha] = pre
    if len(re.findall(r"if chkhsh ==", body)) != sum(1 for _ in re.finditer(r'res = "', body)):
        raise SystemExit("the chain of ifs changed shape; update this script")
    table = {"check_text": check_text, "pre_by_hash": pre_by_hash}
    OUT.write_text(json.dumps(table, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(pre_by_hash)} hashes -> {OUT}")


if __name__ == "__main__":
    main(*sys.argv[1:])

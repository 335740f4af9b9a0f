"""Record what transformers 5.x saves for the tiny checkpoints of make_hf_checkpoints: tests/data/tf5_checkpoints.json.

For every checkpoint the config is made as a 5.x user makes it (`AutoConfig.for_model(model_type, **values)` with
the checkpoint's values, its architectures and dtype set) and saved, the tokenizer loaded with `AutoTokenizer` and
saved, and a generation_config.json loaded with `GenerationConfig` and saved. The record holds each file 5.x
writes that differs from the 4.x checkpoint's: config.json, tokenizer_config.json, generation_config.json and
chat_template.jinja as text; tokenizer.json as a patch of the 4.x one (its merges taken as pairs first, the form
the `tokenizers` library writes now); and the tokenizer files 5.x no longer writes (tokenizer.model,
special_tokens_map.json, added_tokens.json). make_hf_checkpoints.py builds the `-tf5` checkpoints from it without
transformers, and this script checks that what it builds is what 5.x wrote. Run with transformers 5.x:

    PYTHONPATH=src /work/venv-rec/bin/python tests/data/make_tf5_checkpoints.py [--only NAME ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import make_hf_checkpoints as mk

#: 4.x checkpoints with no 5.x save of their own: what 5.x changes in them another one's save shows
SAME_AS = {"tiny-gpt-oss-dense": "tiny-gpt-oss", "tiny-gemma-3-vision": "tiny-gemma-3"}
#: What the 4.x checkpoints say that `for_model` takes from elsewhere (the class, the saving version, the dtype).
_NOT_VALUES = ("architectures", "model_type", "torch_dtype", "transformers_version")
#: The tokenizer files a 4.x checkpoint has that 5.x's save_pretrained may not write again.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "special_tokens_map.json",
                   "added_tokens.json", "chat_template.jinja", "vocab.txt")  # fmt: skip


def json_patch(old: Any, new: Any) -> dict[str, Any]:
    """The patch that `make_hf_checkpoints.apply_json_patch` turns `old` into `new` with (key order kept)."""
    if isinstance(old, dict) and isinstance(new, dict):
        changed = {k: json_patch(old[k], v) if k in old else {"value": v} for k, v in new.items()
                   if k not in old or old[k] != v}  # fmt: skip
        return {"dict": changed, "order": list(new)}
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return {"items": {str(i): json_patch(a, b) for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b}}
    return {"value": new}


def save_as_tf5(folder: Path, out: Path) -> None:
    """config, tokenizer and generation config of the 4.x checkpoint in `folder`, saved by transformers 5.x."""
    from transformers import AutoConfig, AutoTokenizer, GenerationConfig

    raw = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config = AutoConfig.for_model(raw["model_type"], **{k: v for k, v in raw.items() if k not in _NOT_VALUES})
    config.architectures = raw["architectures"]
    config.dtype = raw["torch_dtype"]
    config.save_pretrained(out)
    AutoTokenizer.from_pretrained(folder).save_pretrained(out)
    if (folder / "generation_config.json").is_file():
        GenerationConfig.from_pretrained(folder).save_pretrained(out)


def record(folder: Path, saved: Path) -> dict[str, Any]:
    """The files of `saved` (5.x's) that differ from `folder`'s (4.x's), and the tokenizer files 5.x dropped."""
    files: dict[str, Any] = {}
    for path in sorted(saved.iterdir()):
        old = folder / path.name
        if old.is_file() and old.read_bytes() == path.read_bytes():
            continue
        if path.name == "tokenizer.json":
            before = mk.merges_as_pairs(json.loads(old.read_text(encoding="utf-8")))
            files[path.name] = {"patch": json_patch(before, json.loads(path.read_text(encoding="utf-8")))}
        else:
            files[path.name] = {"text": path.read_text(encoding="utf-8")}
    dropped = [n for n in TOKENIZER_FILES if (folder / n).is_file() and not (saved / n).is_file()]
    return {"files": files, "removed": dropped}


def check(built: Path, saved: Path) -> None:
    """The -tf5 checkpoint built from the record has 5.x's files (JSON compared as values)."""
    for path in saved.iterdir():
        mine = built / path.name
        same = (json.loads(mine.read_text(encoding="utf-8")) == json.loads(path.read_text(encoding="utf-8"))
                if path.suffix == ".json" else mine.read_bytes() == path.read_bytes())  # fmt: skip
        if not same:
            raise SystemExit(f"{built.name}: {path.name} is not what transformers 5.x wrote")
    for name in TOKENIZER_FILES:
        if (built / name).is_file() and not (saved / name).is_file():
            raise SystemExit(f"{built.name}: {name} is left although transformers 5.x does not write it")


def main() -> None:
    import tokenizers
    import transformers

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="record these checkpoints, keep the other records")
    args = parser.parse_args()
    if int(transformers.__version__.split(".")[0]) < 5:
        raise SystemExit(f"transformers {transformers.__version__}: this records what 5.x writes")
    out = mk.TF5_RECORD
    recorded: dict[str, Any] = json.loads(out.read_text())["checkpoints"] if args.only and out.is_file() else {}
    vocabs = mk.vocab_files()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        names = args.only or [n for n, (config, *_) in mk.CHECKPOINTS.items()
                              if config["transformers_version"].startswith("4.") and n not in SAME_AS]  # fmt: skip
        for name in names:
            folder = mk.build(name, root / "4", vocabs)
            saved = root / "5" / name
            save_as_tf5(folder, saved)
            recorded[name] = record(folder, saved)
            print(name, sorted(recorded[name]["files"]), "removed", recorded[name]["removed"], flush=True)
        text = {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
                "checkpoints": dict(sorted(recorded.items()))}  # fmt: skip
        out.write_text(json.dumps(text, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        mk._tf5_files.cache_clear()  # the record just written is the one to build from
        mk.TF5.update({mk.tf5_name(name): name for name in recorded})
        for name in names:
            check(mk.build(mk.tf5_name(name), root / "built", vocabs), root / "5" / name)


if __name__ == "__main__":
    main()

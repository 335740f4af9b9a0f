"""The tools people use around GGUF files: `weightkit split` and `weightkit merge` (llama-gguf-split's two jobs
under its option names, its files byte for byte, `--dry-run` for the plan) and `weightkit edit` (gguf-py's
gguf_new_metadata.py's file for the same edits); each streams tensor data with a progress bar, and takes
`--json`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..errors import ArgumentError
from ..gguf.edit import KEY_CHAT_TEMPLATE, SPECIAL_TOKENS, edit_gguf, parse_assignment, special_token_key
from ..gguf.split import ShardFile, merge_gguf, parse_split_size, split_gguf
from .options import command_app, paired_options, split_pairs
from .render import byte_progress, console, human_bytes, json_value, print_json

app = command_app()

DryRunOption = Annotated[bool, typer.Option("--dry-run", help="Show the files that would be written; write nothing.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the files as JSON (the progress bar goes to stderr).")]


@app.command()
def split(
    src: Annotated[Path, typer.Argument(help="The GGUF file to split.")],
    prefix: Annotated[Path, typer.Argument(help="Shards are written as PREFIX-00001-of-0000N.gguf.")],
    max_tensors: Annotated[
        int | None,
        typer.Option("--split-max-tensors", help="At most this many tensors a shard (the default: 128)."),
    ] = None,
    max_size: Annotated[
        str | None,
        typer.Option(
            "--split-max-size",
            help="At most this much tensor data a shard: N followed by M or G, decimal megabytes or gigabytes "
            "(500M, 48G). A tensor larger than that gets a shard of its own.",
        ),
    ] = None,
    no_tensor_first_split: Annotated[
        bool, typer.Option("--no-tensor-first-split", help="Put only the metadata in the first shard.")
    ] = False,
    dry_run: DryRunOption = False,
    as_json: JsonOption = False,
) -> None:
    """Split a GGUF into shards as llama-gguf-split --split does: the same files, byte for byte."""
    if max_tensors is not None and max_size is not None:
        raise ArgumentError("give --split-max-tensors or --split-max-size, not both")
    max_bytes = None if max_size is None else parse_split_size(max_size)
    with byte_progress("splitting", console, as_json) as update:
        shards = split_gguf(
            src,
            prefix,
            max_tensors=max_tensors,
            max_bytes=max_bytes,
            no_tensor_first_split=no_tensor_first_split,
            dry_run=dry_run,
            progress=update,
        )
    _report(shards, dry_run, as_json)


@app.command()
def merge(
    first: Annotated[Path, typer.Argument(help="A shard of the split model, e.g. NAME-00001-of-0000N.gguf.")],
    out: Annotated[Path, typer.Argument(help="The GGUF file to write; it must not exist yet.")],
    dry_run: DryRunOption = False,
    as_json: JsonOption = False,
) -> None:
    """Join a split GGUF into one file as llama-gguf-split --merge does: the same file, byte for byte."""
    with byte_progress("merging", console, as_json) as update:
        merged = merge_gguf(first, out, dry_run=dry_run, progress=update)
    _report([merged], dry_run, as_json)


def _report(files: list[ShardFile], dry_run: bool, as_json: bool) -> None:
    """Each file with its tensor count and size, as JSON or one line each."""
    if as_json:
        print_json(
            {
                "dry_run": dry_run,
                "files": [{"path": str(f.path), "tensors": len(f.tensors), "bytes": f.size} for f in files],
            }
        )
        return
    for f in files:
        console.print(f"{f.path}: {len(f.tensors)} tensors, {human_bytes(f.size)}", highlight=False)
    console.print(f"{'nothing written (--dry-run)' if dry_run else 'written'}: {len(files)} file(s)", highlight=False)


SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="KEY=VALUE[:TYPE] (repeatable): set a key; TYPE is a GGUF type (uint32, int32, float32, bool, string, "
        "...), by default the key's own type, or string for a new key.",
    ),
]
RemoveOption = Annotated[list[str] | None, typer.Option("--remove", help="KEY (repeatable): remove a key.")]
ChatTemplateOption = Annotated[
    Path | None,
    typer.Option("--chat-template", help="A Jinja file: the new tokenizer.chat_template (named ones dropped)."),
]
SpecialTokenOption = Annotated[
    list[str] | None,
    typer.Option(
        "--special-token",
        metavar="NAME TOKEN",
        help=f"NAME TOKEN (repeatable): tokenizer.ggml.NAME_token_id set to TOKEN's id; NAME is one of "
        f"{', '.join(SPECIAL_TOKENS)}.",
    ),
]


@app.command(cls=paired_options("--special-token"))
def edit(
    src: Annotated[Path, typer.Argument(help="The GGUF file to edit (in place unless -o is given).")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the edited file here; the source stays as it is.")
    ] = None,
    set_: SetOption = None,
    remove: RemoveOption = None,
    chat_template: ChatTemplateOption = None,
    special_token: SpecialTokenOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the keys set and removed as JSON.")] = False,
) -> None:
    """Edit a GGUF's metadata as gguf-py's gguf_new_metadata.py does (the same file for the same edits);
    untouched keys and the tensor data are copied byte for byte, atomically."""
    assignments = dict(parse_assignment(text) for text in set_ or [])
    template = None if chat_template is None else chat_template.read_text(encoding="utf-8")
    tokens = split_pairs(special_token)
    with byte_progress("editing", console, as_json) as update:
        values = edit_gguf(
            src, output, set=assignments, remove=remove or [], chat_template=template, special_tokens=tokens,
            progress=update,
        )  # fmt: skip
    changed = [*assignments, *([KEY_CHAT_TEMPLATE] if template is not None else [])]
    changed += [special_token_key(name) for name, _ in tokens]
    written = output or src
    if as_json:
        changes = {key: json_value(values[key]) for key in changed}
        print_json({"source": str(src), "output": str(written), "set": changes, "removed": remove or []})
        return
    console.print(f"{written}: {len(changed)} key(s) set, {len(remove or [])} removed", highlight=False)

"""SentencePiece vocabularies (`tokenizer.ggml.model = "llama"`): Llama 2, Mistral, Gemma, Phi-3.

The converter loads tokenizer.model with the sentencepiece library and copies every piece's text, score and
type, then lays the tokens named in added_tokens.json and tokenizer_config.json over them
(`TextModel._create_vocab_sentencepiece`; Phi-3 has its own variant, which also reads tokenizer.json's added
tokens). A tokenizer.model is a protocol buffer (`ModelProto`: repeated `pieces {piece, score, type}`, then
`trainer_spec`, `normalizer_spec`, ...), read here directly, with the checks sentencepiece makes when loading
one (`ModelInterface::InitializePieces`), so that a model it refuses is refused here too.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ....errors import FormatError
from ..config import CONFIG_NAME, HFConfig, read_json_object
from ..kv import KV
from .fast import TOKENIZER_CONFIG, TOKENIZER_JSON
from .protobuf import FIXED32, LENGTH, VARINT, Message, encode_field, encode_varint
from .special import load_special_vocab, write_special_vocab
from .vocab import TokenType, looks_special

SPM_MODEL = "tokenizer.model"
ADDED_TOKENS = "added_tokens.json"
_PIECE_TYPES = frozenset(int(t) for t in TokenType)
_NORMAL_TABLE = frozenset((TokenType.NORMAL, TokenType.USER_DEFINED, TokenType.UNUSED))  # not reserved ones
_UNIGRAM, _MODEL_TYPES = 1, frozenset((1, 2, 3, 4))  # unigram, BPE, word, char
_BYTE_PIECES = {f"<0x{b:02X}>": b for b in range(256)}
ADDED_SCORE, _PAD_SCORE = -1000.0, -10000.0


@dataclass(frozen=True)
class SentencePieceModel:
    """The pieces of a tokenizer.model, by id: text, score (float32) and type (sentencepiece's, = GGUF's)."""

    pieces: list[str]
    scores: np.ndarray
    types: np.ndarray


def _expect(msg: Message, wire: int, want: int, at: int, what: str) -> None:
    if wire != want:
        raise msg.error(at, f"{what} has wire type {wire}, not {want}")


def _piece(msg: Message, index: int) -> tuple[bytes, int, int]:
    """One `SentencePiece` message in any layout: (text bytes, offset of the score or -1, type). The defaults
    are "", 0.0 and NORMAL, which is also what a type SentencePiece does not define counts as (protobuf's rule
    for unknown enum values); a field given twice counts the last time."""
    text, score_at, kind = b"", -1, int(TokenType.NORMAL)
    for number, wire, value, at in msg.fields():
        if number == 1:
            _expect(msg, wire, LENGTH, at, f"piece {index}'s text")
            text = msg.data[value : msg.field_end]
        elif number == 2:
            _expect(msg, wire, FIXED32, at, f"piece {index}'s score")
            score_at = msg.field_end - 4
        elif number == 3:
            _expect(msg, wire, VARINT, at, f"piece {index}'s type")
            kind = value if value in _PIECE_TYPES else int(TokenType.NORMAL)
    return text, score_at, kind


def _common_run(data: bytes, pos: int, pieces: _Pieces) -> int:
    """Read the run of pieces at `pos` that have the layout sentencepiece writes (a text of < 128 bytes, a score,
    an optional type), without the general reader; return where the run stops (any other field, or any other
    layout, is left to the general reader, which also makes the checks). The loop only steps over the pieces by
    their lengths; their layouts are checked, and their fields found, for all at once (`_common_layout`):
    262,144 pieces take a quarter of a second this way."""
    end = len(data)
    starts: list[int] = []
    while pos + 9 <= end and data[pos] == 0x0A:
        n = data[pos + 1]
        if n >= 0x80:
            if data[pos + 2] >= 0x80:
                break
            n = ((n & 0x7F) | data[pos + 2] << 7) + 1  # and the length's second byte
        starts.append(pos)
        pos += 2 + n
    at = np.array(starts, dtype=np.int64)
    text, text_end, kind, ok = _common_layout(np.frombuffer(data, dtype=np.uint8), at)
    bad = np.flatnonzero(~ok)
    count = int(bad[0]) if bad.size else len(starts)
    if count < len(starts):
        pos = starts[count]
    pieces.texts += [data[a:b] for a, b in zip(text[:count].tolist(), text_end[:count].tolist(), strict=True)]
    pieces.score_at += (text_end[:count] + 1).tolist()
    pieces.types += kind[:count].tolist()
    pieces.offsets += starts[:count]
    return pos


def _common_layout(raw: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For the pieces starting at offsets `at`: where each text starts and ends, its type, and whether the
    piece has the common layout (field 1: a text of < 128 bytes; 2: the score; 3: a type from 1 to 6, or none,
    meaning 1). Reads past the end (of a piece that is not whole) read the last byte, and fail the check."""

    def byte(i: np.ndarray) -> np.ndarray:
        return raw[np.minimum(i, len(raw) - 1)].astype(np.int64)

    first = byte(at + 1)
    two = first >= 0x80
    n = np.where(two, (first & 0x7F) | byte(at + 2) << 7, first)
    body = at + 2 + two
    stop = body + n
    length = byte(body + 1)
    text_end = body + 2 + length
    typed = text_end + 7 == stop
    kind = np.where(typed, byte(text_end + 6), 1)
    ok = (stop <= len(raw)) & (n >= 7) & (byte(body) == 0x0A) & (length < 0x80)
    ok &= (text_end + 5 <= stop) & (byte(text_end) == 0x15)
    ok &= (text_end + 5 == stop) | (typed & (byte(text_end + 5) == 0x18) & (kind > 0) & (kind < 7))
    return body + 2, text_end, kind, ok


@dataclass
class _Pieces:
    """Pieces as read: raw texts, where each score's 4 bytes are, types, and where each piece starts."""

    texts: list[bytes] = field(default_factory=list)
    score_at: list[int] = field(default_factory=list)
    types: list[int] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)


def read_sentencepiece_model(path: Path) -> SentencePieceModel:
    """Parse and check a tokenizer.model: a FormatError names the file and the byte where it is wrong."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise FormatError(path, None, f"cannot be read ({e.strerror})") from None
    found = _Pieces()
    model_type, byte_fallback = _UNIGRAM, False
    pos = 0
    while (pos := _common_run(data, pos, found)) < len(data):
        top = Message(data, pos, len(data), path)
        number, wire, value, at = next(top.fields())
        pos = top.field_end
        if number == 1:
            _expect(top, wire, LENGTH, at, f"piece {len(found.texts)}")
            text, score_at, kind = _piece(top.sub(value), len(found.texts))
            found.texts.append(text)
            found.score_at.append(score_at)
            found.types.append(kind)
            found.offsets.append(at)
        elif number == 2:
            _expect(top, wire, LENGTH, at, "the trainer spec")
            spec = top.sub(value)
            for n, w, v, a in spec.fields():
                if n == 3:
                    _expect(spec, w, VARINT, a, "the model type")
                    model_type = v if v in _MODEL_TYPES else _UNIGRAM
                elif n == 35:
                    _expect(spec, w, VARINT, a, "byte_fallback")
                    byte_fallback = bool(v)
    pieces = _texts(path, found)
    types = np.array(found.types, dtype=np.int32)
    _check_pieces(path, pieces, types, found.offsets, byte_fallback, model_type == _UNIGRAM)
    return SentencePieceModel(pieces, _scores(data, found.score_at), types)


def write_sentencepiece_model(
    pieces: list[tuple[str, float, int]], *, byte_fallback: bool, model_type: int = 2, add_dummy_prefix: bool = True
) -> bytes:
    """A SentencePiece `ModelProto` as sentencepiece writes it: the pieces (text, score, type), a trainer spec
    (model type: 1 unigram, 2 BPE; byte fallback; unk and bos ids 0 and 1) and an identity normalizer that
    escapes spaces and adds the dummy prefix or not."""
    body = _piece_fields(pieces)
    trainer = encode_field(3, model_type) + encode_field(4, len(pieces)) + encode_field(35, int(byte_fallback))
    trainer += encode_field(40, 0) + encode_field(41, 1)  # unk_id, bos_id
    normalizer = encode_field(1, b"identity") + encode_field(3, int(add_dummy_prefix)) + encode_field(4, 0)
    normalizer += encode_field(5, 1)  # remove_extra_whitespaces off, escape_whitespaces on
    return body + encode_field(2, trainer) + encode_field(3, normalizer)


#: the keys of a piece's fields (1: its text, 2: its score, 3: its type; the piece itself is ModelProto's field 1)
_TEXT_KEY, _SCORE_KEY, _TYPE_KEY = (bytes((n << 3 | wire,)) for n, wire in ((1, LENGTH), (2, FIXED32), (3, VARINT)))
_ONE_BYTE_VARINTS = tuple(bytes((n,)) for n in range(0x80))


def _piece_fields(pieces: list[tuple[str, float, int]]) -> bytes:
    """ModelProto's `pieces` fields, byte for byte as `encode_field` nests them, without its four calls a piece
    (a vocabulary has up to 262k): the scores packed at once, one-byte varints looked up."""
    scores = struct.pack(f"<{len(pieces)}f", *(float(s) for _, s, _ in pieces))
    short = _ONE_BYTE_VARINTS
    out = []
    for i, (text, _, kind) in enumerate(pieces):
        raw = text.encode()
        n = len(raw)
        kind_varint = short[kind] if 0 <= kind < 0x80 else encode_varint(kind)
        body = b"".join((_TEXT_KEY, short[n] if n < 0x80 else encode_varint(n), raw,
                         _SCORE_KEY, scores[4 * i : 4 * i + 4], _TYPE_KEY, kind_varint))  # fmt: skip
        n = len(body)
        out += (_TEXT_KEY, short[n] if n < 0x80 else encode_varint(n), body)
    return b"".join(out)


def _texts(path: Path, found: _Pieces) -> list[str]:
    """The pieces' texts, decoded all at once (one by one only to say which is not UTF-8)."""
    try:
        texts = b"\0".join(found.texts).decode("utf-8").split("\0")  # a NUL in a piece: one by one
        if len(texts) == len(found.texts):
            return texts
    except UnicodeDecodeError:
        pass
    out = []
    for i, (raw, at) in enumerate(zip(found.texts, found.offsets, strict=True)):
        try:
            out.append(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise FormatError(path, at, f"piece {i}'s text is not UTF-8 (at its byte {e.start})") from None
    return out


def _scores(data: bytes, score_at: list[int]) -> np.ndarray:
    """The float32 scores, gathered from their offsets (-1: no score, 0.0)."""
    at = np.array(score_at, dtype=np.int64)
    raw = np.frombuffer(data, dtype=np.uint8)
    present = at >= 0
    scores = np.zeros(len(at), dtype=np.float32)
    idx = at[present, None] + np.arange(4)
    scores[present] = raw[idx].copy().view("<f4").ravel()
    return scores


def _check_pieces(path: Path, pieces: list[str], types: np.ndarray, offsets: list[int], byte_fallback: bool,
                  unigram: bool) -> None:  # fmt: skip
    """What sentencepiece refuses to load: empty, NUL-holding or repeated pieces, two unknown pieces (or none,
    without byte fallback), byte pieces without byte fallback (or byte fallback without all 256), a unigram model
    of reserved pieces only."""
    if len(set(pieces)) != len(pieces) or "" in pieces or any("\0" in t for t in pieces):
        seen: dict[str, int] = {}
        for i, text in enumerate(pieces):
            if not text:
                raise FormatError(path, offsets[i], f"piece {i} is empty")
            if "\0" in text:
                raise FormatError(path, offsets[i], f"piece {i} {text!r} holds a NUL character")
            if text in seen:
                raise FormatError(path, offsets[i], f"piece {i} {text!r} is already piece {seen[text]}")
            seen[text] = i
    unknown = np.flatnonzero(types == TokenType.UNKNOWN)
    if len(unknown) > 1:
        raise FormatError(path, offsets[unknown[1]], f"piece {unknown[1]} is a second unknown piece "
                                                     f"(piece {unknown[0]} is one)")  # fmt: skip
    if not len(unknown) and not byte_fallback:
        raise FormatError(path, None, "no unknown piece (<unk>) and no byte fallback: not a SentencePiece model")
    byte_values: set[int] = set()
    for i in np.flatnonzero(types == TokenType.BYTE).tolist():
        if not byte_fallback:
            raise FormatError(path, offsets[i], f"byte piece {i} {pieces[i]!r} in a model without byte fallback")
        if pieces[i] not in _BYTE_PIECES:
            raise FormatError(path, offsets[i], f"byte piece {i} {pieces[i]!r} is not of the form <0xXX>")
        byte_values.add(_BYTE_PIECES[pieces[i]])
    if byte_fallback and len(byte_values) != 256:
        raise FormatError(path, None, f"byte fallback with {len(byte_values)} of the 256 byte pieces")
    if unigram and not np.isin(types, list(_NORMAL_TABLE)).any():
        raise FormatError(path, None, "a unigram model with no normal pieces")


# --- the converter's vocabulary ----------------------------------------------------------------------------


@dataclass
class LlamaVocab:
    """A `llama` vocabulary as the converter writes it: every token's text, score and type."""

    tokens: list[str]
    scores: np.ndarray
    types: np.ndarray

    def put(self, token_id: int, text: str, kind: int) -> None:
        self.tokens[token_id] = text
        self.scores[token_id] = ADDED_SCORE
        self.types[token_id] = kind


def _base(model: SentencePieceModel, vocab_size: int, path: Path, *, truncate: bool) -> LlamaVocab:
    """`vocab_size` slots: `[PAD{i}]` UNUSED at -10000, then the model's pieces over them. Pieces past the end
    are dropped (the converter's warning), or refused where the converter would fail (Phi-3)."""
    n = len(model.pieces)
    if n > vocab_size and not truncate:
        raise FormatError(path, None, f"{n} pieces, more than config.json's vocab_size {vocab_size}")
    keep = min(n, vocab_size)
    tokens = model.pieces[:keep] + [f"[PAD{i}]" for i in range(keep, vocab_size)]
    scores = np.full(vocab_size, _PAD_SCORE, dtype=np.float32)
    types = np.full(vocab_size, TokenType.UNUSED, dtype=np.int32)
    scores[:keep] = model.scores[:keep]
    # sentencepiece's IsUnknown/IsControl/IsUnused/IsByte; its user-defined pieces count as normal
    kinds = model.types[:keep]
    types[:keep] = np.where(kinds == TokenType.USER_DEFINED, TokenType.NORMAL, kinds)
    return LlamaVocab(tokens, scores, types)


def _token_id(value: Any, where: Path, what: str) -> int:
    """A token id from a JSON file: a non-negative integer (JSON keys are integers written as strings)."""
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            raise FormatError(where, None, f"{what}: {value!r} is not a token id") from None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise FormatError(where, None, f"{what}: {value!r} is not a token id")
    return value


def _in_range(vocab: LlamaVocab, token_id: int, where: Path, *, skip: bool) -> bool:
    """Whether the id has a slot; ids past the end are skipped (the converter's warning) or refused."""
    if token_id < len(vocab.tokens):
        return True
    if skip:
        return False
    raise FormatError(where, None, f"token id {token_id} is not below config.json's vocab_size {len(vocab.tokens)}")


def _content(entry: Any, where: Path, what: str) -> str:
    if not isinstance(entry, dict) or not isinstance(entry.get("content"), str):
        raise FormatError(where, None, f"{what}: {entry!r} is not an added token with a content string")
    return entry["content"]


def _added_tokens_json(vocab: LlamaVocab, folder: Path) -> None:
    """added_tokens.json (`{"text": id}`): USER_DEFINED tokens at -1000."""
    path = folder / ADDED_TOKENS
    if not path.is_file():
        return
    added = read_json_object(path, ADDED_TOKENS)
    for text, value in added.items():
        token_id = _token_id(value, path, f"token {text!r}")
        if _in_range(vocab, token_id, path, skip=True):
            vocab.put(token_id, text, TokenType.USER_DEFINED)


def _added_tokens_decoder(vocab: LlamaVocab, folder: Path, *, phi3: bool) -> None:
    """tokenizer_config.json's `added_tokens_decoder`: CONTROL if special (or, except for Phi-3, special-looking),
    else USER_DEFINED with "▁" as a space (not for Phi-3); ids past the end skipped (Phi-3: refused)."""
    path = folder / TOKENIZER_CONFIG
    if not path.is_file():
        return
    decoder = read_json_object(path, TOKENIZER_CONFIG).get("added_tokens_decoder", {})
    if not isinstance(decoder, dict):
        raise FormatError(path, None, "added_tokens_decoder is not an object")
    for key, entry in decoder.items():
        token_id = _token_id(key, path, "added_tokens_decoder")
        text = _content(entry, path, f"added_tokens_decoder[{key!r}]")
        if not _in_range(vocab, token_id, path, skip=not phi3):
            continue
        if entry.get("special") or (not phi3 and looks_special(text)):
            vocab.put(token_id, text, TokenType.CONTROL)
        else:
            vocab.put(token_id, text if phi3 else text.replace("\u2581", " "), TokenType.USER_DEFINED)


def _tokenizer_json_added(vocab: LlamaVocab, folder: Path) -> None:
    """Phi-3 only: tokenizer.json's `added_tokens`, CONTROL if special, else USER_DEFINED."""
    path = folder / TOKENIZER_JSON
    if not path.is_file():
        return
    added = read_json_object(path, TOKENIZER_JSON, shared=True).get("added_tokens", [])
    if not isinstance(added, list):
        raise FormatError(path, None, "added_tokens is not a list")
    for entry in added:
        text = _content(entry, path, "added_tokens")
        token_id = _token_id(entry.get("id"), path, f"added token {text!r}")
        _in_range(vocab, token_id, path, skip=False)
        vocab.put(token_id, text, TokenType.CONTROL if entry.get("special") else TokenType.USER_DEFINED)


def _model(folder: Path) -> SentencePieceModel:
    path = folder / SPM_MODEL
    if not path.is_file():
        raise FormatError(path, None, "no tokenizer.model here (a SentencePiece tokenizer is read from it)")
    return read_sentencepiece_model(path)


def _sentencepiece_vocab(folder: Path, hparams: HFConfig) -> LlamaVocab:
    """`TextModel._create_vocab_sentencepiece`: as many tokens as config.json's vocab_size (or the model's)."""
    model = _model(folder)
    vocab_size = hparams.find(("vocab_size_per_layer_input", "vocab_size"), None) or len(model.pieces)
    vocab = _base(model, vocab_size, folder / SPM_MODEL, truncate=True)
    _added_tokens_json(vocab, folder)
    _added_tokens_decoder(vocab, folder, phi3=False)
    return vocab


def write_llama_vocab(kv: KV, folder: Path, vocab: LlamaVocab) -> None:
    """Model "llama", pre "default", tokens, scores, types, then `gguf.SpecialVocab` without merges."""
    kv.string("tokenizer.ggml.model", "llama")
    kv.string("tokenizer.ggml.pre", "default")
    kv.strings("tokenizer.ggml.tokens", vocab.tokens)
    kv.float32s("tokenizer.ggml.scores", vocab.scores)
    kv.int32s("tokenizer.ggml.token_type", vocab.types)
    special = load_special_vocab(folder, load_merges=False, n_vocab=len(vocab.tokens))
    write_special_vocab(kv, special, folder / TOKENIZER_CONFIG)


def write_sentencepiece_vocab(kv: KV, folder: Path, hparams: HFConfig) -> None:
    """`TextModel._set_vocab_sentencepiece`: model "llama", pre "default", tokens, scores, types, specials."""
    write_llama_vocab(kv, folder, _sentencepiece_vocab(folder, hparams))


def write_phi3_vocab(kv: KV, folder: Path, hparams: HFConfig) -> None:
    """`Phi3MiniModel.set_vocab`'s SentencePiece path: config.json's vocab_size (the model's if absent), no
    truncation, then added_tokens.json, tokenizer_config.json's and tokenizer.json's added tokens."""
    model = _model(folder)
    vocab_size = hparams.get("vocab_size", len(model.pieces))
    if not isinstance(vocab_size, int):
        raise FormatError(folder / CONFIG_NAME, None, f"vocab_size {vocab_size!r} is not a count")
    vocab = _base(model, vocab_size, folder / SPM_MODEL, truncate=False)
    _added_tokens_json(vocab, folder)
    _added_tokens_decoder(vocab, folder, phi3=True)
    _tokenizer_json_added(vocab, folder)
    write_llama_vocab(kv, folder, vocab)


__all__ = [
    "ADDED_SCORE",
    "LlamaVocab",
    "SentencePieceModel",
    "read_sentencepiece_model",
    "write_llama_vocab",
    "write_phi3_vocab",
    "write_sentencepiece_model",
    "write_sentencepiece_vocab",
]

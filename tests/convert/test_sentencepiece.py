"""tokenizer.model, read without the sentencepiece library: pieces, scores and types as written, every model
sentencepiece refuses to load refused too (a FormatError naming the file and, where there is one, the byte), and
no malformed file ever raising anything else. Which models sentencepiece 0.2.3 refuses was found by loading each
case of CORPUS with it; the converted vocabularies are checked against the reference converter in
test_hf_golden.py."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weightkit.convert.hf import convert_hf
from weightkit.convert.hf.tokenizer.protobuf import encode_field
from weightkit.convert.hf.tokenizer.sentencepiece import read_sentencepiece_model
from weightkit.errors import FormatError

from .conftest import make_hf_checkpoints as mk

UNK, BYTES = ("<unk>", 0.0, 2), [(f"<0x{b:02X}>", 0.0, 6) for b in range(256)]


def _model(*pieces: tuple[str, float, int], byte_fallback: bool = False, unigram: bool = False) -> bytes:
    return mk.spm_model(list(pieces), byte_fallback=byte_fallback, model_type=1 if unigram else 2)


_OK = _model(UNK, ("<s>", 0.0, 3), ("\u2581the", -1.5, 1))

# (case, file bytes, fragment of the message, byte offset or None)
CORPUS = [
    ("empty file", b"", "no unknown piece", None),
    ("truncated key varint", b"\x80", "varint runs past the end", 0),
    ("varint of 11 bytes", b"\x08" + b"\xff" * 10 + b"\x01", "longer than 10 bytes", 1),
    ("field number 0", b"\x00\x01", "field number 0", 0),
    ("wire type 3 (group)", b"\x0b", "wire type 3", 0),
    ("wire type 7", b"\x0f", "wire type 7", 0),
    ("length past the end", b"\x0a\x10abc", "claims 16 bytes", 0),
    ("truncated fixed32", b"\x15\x00\x00", "4-byte value runs past", 0),
    ("truncated file", _OK[:-3], "claims", None),
    ("piece is a varint", b"\x08\x01" + _OK, "wire type 0, not 2", 0),
    (
        "score is a varint",
        encode_field(1, encode_field(1, b"<unk>") + encode_field(2, 5) + encode_field(3, 2)),
        "score has wire type 0",
        None,
    ),
    ("text is not UTF-8", _model(UNK).replace(b"<unk>", b"<\xffnk>"), "not UTF-8", 0),
    ("empty piece", _model(UNK, ("", 0.0, 1)), "piece 1 is empty", None),
    ("NUL in a piece", _model(UNK, ("a\0b", 0.0, 1)), "NUL", None),
    ("repeated piece", _model(UNK, ("a", 0.0, 1), ("a", 0.0, 4)), "already piece 1", None),
    ("repeated across kinds", _model(UNK, ("a", 0.0, 1), ("a", 0.0, 3)), "already piece 1", None),
    ("two unknown pieces", _model(UNK, ("<u2>", 0.0, 2)), "second unknown piece", None),
    ("no unknown piece", _model(("<s>", 0.0, 3), ("a", 0.0, 1)), "no unknown piece", None),
    ("byte piece without byte fallback", _model(UNK, *BYTES), "without byte fallback", None),
    ("byte fallback, 100 byte pieces", _model(UNK, *BYTES[:100], byte_fallback=True), "100 of the 256", None),
    ("byte piece not <0xXX>", _model(UNK, *BYTES[:255], ("<0xff>", 0.0, 6), byte_fallback=True), "<0xXX>", None),
    ("unigram of reserved pieces", _model(UNK, ("<s>", 0.0, 3), unigram=True), "no normal pieces", None),
]


@pytest.mark.parametrize(("case", "data", "fragment", "offset"), CORPUS, ids=[c[0] for c in CORPUS])
def test_malformed_model_is_a_format_error(tmp_path, case, data, fragment, offset):
    path = tmp_path / "tokenizer.model"
    path.write_bytes(data)
    with pytest.raises(FormatError) as err:
        read_sentencepiece_model(path)
    assert err.value.path == str(path) and fragment in err.value.reason, str(err.value)
    if offset is not None:
        assert err.value.offset == offset, str(err.value)


ACCEPTED = [
    ("byte fallback without an unknown piece", _model(("<s>", 0.0, 3), *BYTES, byte_fallback=True), 257),
    ("a type sentencepiece does not define counts as normal", _model(UNK, ("a", 0.0, 9)), 2),
    ("a unigram model", _model(UNK, ("a", -1.0, 5), unigram=True), 2),
    ("unknown fields are skipped", encode_field(7, b"xyz") + encode_field(9, 3) + _OK, 3),
]


@pytest.mark.parametrize(("case", "data", "n"), ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_models_sentencepiece_loads_are_read(tmp_path, case, data, n):
    path = tmp_path / "tokenizer.model"
    path.write_bytes(data)
    model = read_sentencepiece_model(path)
    assert len(model.pieces) == len(model.scores) == len(model.types) == n
    assert set(model.types.tolist()) <= {1, 2, 3, 4, 5, 6}


_PIECE_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), min_size=1, max_size=200)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(_PIECE_TEXT, st.floats(width=32, allow_nan=False), st.sampled_from([1, 3, 4, 5])),
                max_size=40, unique_by=lambda p: p[0]))  # fmt: skip
def test_pieces_round_trip(tmp_path, pieces):
    """Any valid model reads back as written, in the layout sentencepiece writes and with texts of any length
    (the reader's fast path stops at a text of 128 bytes or more and the general reader takes over)."""
    pieces = [p for p in pieces if p[0] != "<unk>"] + [UNK]
    path = tmp_path / "tokenizer.model"
    path.write_bytes(mk.spm_model(pieces, byte_fallback=False))
    model = read_sentencepiece_model(path)
    assert model.pieces == [p[0] for p in pieces]
    assert model.scores.tobytes() == np.array([p[1] for p in pieces], dtype=np.float32).tobytes()
    assert model.types.tolist() == [p[2] for p in pieces]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_damaged_model_is_read_or_a_format_error(tmp_path, data):
    """Truncations and byte changes anywhere: a model, or a FormatError with an offset inside the file."""
    raw = bytearray(_model(UNK, ("<s>", 0.0, 3), *[(f"\u2581w{i}", -float(i), 1) for i in range(20)]))
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    raw = raw[: data.draw(st.integers(0, len(raw)))]
    path = tmp_path / "tokenizer.model"
    path.write_bytes(bytes(raw))
    try:
        read_sentencepiece_model(path)
    except FormatError as e:
        assert e.path == str(path)
        assert e.offset is None or 0 <= e.offset <= len(raw)


def test_real_vocabularies_read_fast(hf_checkpoints):
    """Gemma 3's 262,144 pieces and Llama 2's 32,000, with the types and scores the GGUFs they came from have."""
    gemma = read_sentencepiece_model(hf_checkpoints["tiny-gemma-3"] / "tokenizer.model")
    assert len(gemma.pieces) == 262144 and gemma.pieces[:3] == ["<pad>", "<eos>", "<bos>"]
    assert np.bincount(gemma.types, minlength=7).tolist() == [0, 255474, 1, 6248, 165, 0, 256]
    llama = read_sentencepiece_model(hf_checkpoints["tiny-llama-2-chat"] / "tokenizer.model")
    assert len(llama.pieces) == 32000 and llama.pieces[259] == "\u2581\u2581" and llama.scores[259] == -1e9


def test_convert_refuses_a_malformed_tokenizer_model(hf_checkpoints, tmp_path):
    folder = tmp_path / "tiny-llama-2-chat"
    shutil.copytree(hf_checkpoints["tiny-llama-2-chat"], folder)
    (folder / "tokenizer.model").write_bytes(_OK[:-3])
    out = tmp_path / "out.gguf"
    with pytest.raises(FormatError) as err:
        convert_hf(folder, out, "f16")
    assert "tokenizer.model" in str(err.value)
    assert list(tmp_path.iterdir()) == [folder]

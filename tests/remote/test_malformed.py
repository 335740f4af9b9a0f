"""Malformed and hostile files over HTTP: a FormatError naming the URL and the byte, and no allocation or
traffic beyond MAX_HEADER_BYTES, whatever sizes the file (or a server claiming a huge file) declares."""

from __future__ import annotations

import itertools
import json
import struct
import tracemalloc

import numpy as np
import pytest

import weightkit
from weightkit.errors import FormatError
from weightkit.gguf import write_gguf
from weightkit.remote import source

from .servers import serve_bytes

pytestmark = pytest.mark.network

HUGE = 1 << 50  # what a hostile server says the file holds: only the bytes asked for are ever sent
ARRAY, STRING = 9, 8


def gguf_header(n_tensors: int, n_kv: int) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv)


def key(name: str) -> bytes:
    return struct.pack("<Q", len(name)) + name.encode()


def open_served(faults, name: str, data: bytes, size: int | None = None):
    faults.routes[f"/{name}"] = serve_bytes(data, size)
    return weightkit.open(faults.url(f"/{name}"))


def refused(faults, name: str, data: bytes, size: int | None = None) -> FormatError:
    with pytest.raises(FormatError) as e:
        open_served(faults, name, data, size)
    assert e.value.path == faults.url(f"/{name}")
    return e.value


def test_truncated_header(faults, tmp_path):
    good = tmp_path / "good.gguf"
    write_gguf(good, {"general.architecture": "llama", "tokenizer.ggml.tokens": ["a"] * 100}, {})
    e = refused(faults, "cut.gguf", good.read_bytes()[:200])
    assert e.offset is not None and "remain" in e.reason


def test_counts_larger_than_the_file(faults):
    e = refused(faults, "count.gguf", gguf_header(0, 1 << 62))
    assert e.offset == 8 and "more than the" in e.reason


@pytest.mark.parametrize(
    ("name", "body", "length"),
    [
        ("array.gguf", key("tokenizer.ggml.tokens") + struct.pack("<IIQ", ARRAY, STRING, 1 << 40), b""),
        ("string.gguf", key("general.name") + struct.pack("<IQ", STRING, 1 << 40), b""),
        (
            "strings.gguf",
            key("tokenizer.ggml.tokens") + struct.pack("<IIQ", ARRAY, STRING, 1),
            struct.pack("<Q", 1 << 40),
        ),
    ],
)
def test_huge_declared_lengths_in_a_huge_file_are_refused_before_any_allocation(faults, name, body, length):
    """The server claims a 1 PiB file, so the lengths fit it; they cannot fit MAX_HEADER_BYTES. (`length`:
    a string's, in an array of strings, after `body`.)"""
    tracemalloc.start()
    try:
        with pytest.raises(FormatError) as e:
            open_served(faults, name, gguf_header(0, 1) + body + length, HUGE)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # Where the elements (or the string in the array) start.
    assert e.value.path == faults.url(f"/{name}") and e.value.offset == 24 + len(body)
    assert f"at most the first {source.MAX_HEADER_BYTES} bytes" in str(e.value)
    assert peak < 16 << 20
    assert [s.headers["Range"] for s in faults.seen] == ["bytes=0-1048575"]  # nothing fetched past the first read


def test_a_header_growing_past_the_limit_is_read_up_to_it_then_refused(faults, tmp_path, monkeypatch):
    monkeypatch.setattr(source, "MAX_HEADER_BYTES", 3 << 20)
    path = tmp_path / "vocab.gguf"
    write_gguf(
        path, {"general.architecture": "llama", "tokenizer.ggml.tokens": [f"{i:0100d}" for i in range(40_000)]}, {}
    )
    with pytest.raises(FormatError, match=r"vocab\.gguf: at byte \d+: the header reaches past byte \d+") as e:
        open_served(faults, "vocab.gguf", path.read_bytes())
    assert e.value.offset > 2 << 20
    ranges = [tuple(map(int, s.headers["Range"][6:].split("-"))) for s in faults.seen]
    assert ranges[0][0] == 0 and ranges[-1][1] == (3 << 20) - 1  # read up to the limit, then refused
    assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(ranges))  # each byte once


def test_safetensors_header_length_over_the_format_limit(faults):
    """Over safetensors' own 100 MB limit, the first bytes are not taken for a safetensors file at all."""
    e = refused(faults, "len.safetensors", struct.pack("<Q", 1 << 40) + b"{}", HUGE)
    assert e.offset == 0 and "not a recognised model file" in e.reason


def test_safetensors_header_longer_than_the_remote_limit(faults, monkeypatch):
    monkeypatch.setattr(source, "MAX_HEADER_BYTES", 4 << 20)
    e = refused(faults, "long.safetensors", struct.pack("<Q", 60_000_000) + b"{", HUGE)
    assert e.offset == 8 and "the header reaches past byte 60000008" in e.reason
    assert [s.path for s in faults.seen] == ["/long.safetensors", "/config.json"]  # its first read only


def test_safetensors_offsets_past_the_end(faults):
    header = json.dumps({"w": {"dtype": "F32", "shape": [1024], "data_offsets": [0, 4096]}}).encode()
    e = refused(faults, "short.safetensors", struct.pack("<Q", len(header)) + header + bytes(100))
    assert "the tensors cover 4096 bytes of data but the file holds 100" in e.reason


def test_a_broken_index(faults):
    e = refused(faults, "model.safetensors.index.json", b'{"weight_map": {"w": "../../etc/passwd"}}')
    assert "not a file in the checkpoint folder" in e.reason


def test_valid_file_still_reads_after_growth(faults, tmp_path):
    """The same vocabulary under the real limit: read as the parse goes (1 MiB, then half as much again
    each time), in one parse."""
    path = tmp_path / "vocab.gguf"
    tokens = [f"{i:0100d}" for i in range(40_000)]
    write_gguf(path, {"general.architecture": "llama", "tokenizer.ggml.tokens": tokens}, {"w": np.ones(8, np.float32)})
    with open_served(faults, "ok.gguf", path.read_bytes()) as m:
        assert list(m.metadata["tokenizer.ggml.tokens"]) == tokens
        assert m.remote.requests == 5 and m.remote.bytes_fetched == path.stat().st_size > 4 << 20


@pytest.mark.parametrize("cut", [0, 4, 8, 50], ids=["at-a-length", "in-a-length", "at-a-string", "in-a-string"])
def test_a_vocabulary_goes_on_where_the_bytes_held_end(faults, tmp_path, cut):
    """The first read ends `cut` bytes into a string's entry (its 8-byte length, then its 100 bytes): the
    loop fetches more and goes on from that string, every byte fetched once."""
    tokens = [f"{i:0100d}" for i in range(20_000)]
    path = tmp_path / "vocab.gguf"

    def write(first: str) -> bytes:
        write_gguf(path, {"general.architecture": "llama", "tokenizer.ggml.tokens": [first, *tokens]}, {})
        return path.read_bytes()

    elements = write("\x01mark").index(b"\x01mark") - 8  # where the strings start, whatever the first one
    first = "x" * ((source.FIRST_READ - cut - elements - 8) % 108)  # so that an entry starts at FIRST_READ - cut
    data = write(first)
    assert data[source.FIRST_READ - cut :].startswith(struct.pack("<Q", 100))
    with open_served(faults, "vocab.gguf", data) as m:
        assert list(m.metadata["tokenizer.ggml.tokens"]) == [first, *tokens]
        assert faults.seen[0].headers["Range"] == f"bytes=0-{source.FIRST_READ - 1}"
        assert m.remote.bytes_fetched == len(data)

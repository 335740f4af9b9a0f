"""A small, bounds-checked reader of the protocol buffers wire format (enough for a SentencePiece model), and
the few encoders that write one back.

Messages are walked field by field over the file's bytes; every varint, length and offset is checked against
the end of the enclosing message before it is used, so a truncated or hostile file is a FormatError naming the
byte where it goes wrong, never an exception from deep inside or a huge allocation.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

from ....errors import FormatError

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5


class Message:
    """One message: the bytes `data[start:end]` of the file at `path` (offsets are file offsets)."""

    def __init__(self, data: bytes, start: int, end: int, path: Path) -> None:
        self.data, self.start, self.end, self.path = data, start, end, path

    def error(self, offset: int, reason: str) -> FormatError:
        return FormatError(self.path, offset, reason)

    def _varint(self, pos: int, what: str) -> tuple[int, int]:
        data, end = self.data, self.end
        value = shift = 0
        start = pos
        while True:
            if pos >= end:
                raise self.error(start, f"{what}: the varint runs past the end of its message")
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value, pos
            shift += 7
            if shift >= 70:
                raise self.error(start, f"{what}: a varint longer than 10 bytes")

    def fields(self) -> Iterator[tuple[int, int, int, int]]:
        """(field number, wire type, value, offset of the field) for each field in order: the value is the
        integer of a varint or fixed-size field, or where a length-delimited field's bytes start (they end at
        `field_end`)."""
        pos = self.start
        while pos < self.end:
            at = pos
            key, pos = self._varint(pos, "field key")
            number, wire = key >> 3, key & 7
            if number == 0:
                raise self.error(at, "field number 0")
            if wire == VARINT:
                value, pos = self._varint(pos, f"field {number}")
            elif wire == LENGTH:
                length, pos = self._varint(pos, f"field {number}'s length")
                if length > self.end - pos:
                    raise self.error(at, f"field {number} claims {length} bytes but its message has "
                                         f"{self.end - pos} left")  # fmt: skip
                value = pos
                pos += length
            elif wire in (FIXED32, FIXED64):
                size = 4 if wire == FIXED32 else 8
                if size > self.end - pos:
                    raise self.error(at, f"field {number}: {size}-byte value runs past the end of its message")
                value = int.from_bytes(self.data[pos : pos + size], "little")
                pos += size
            else:
                raise self.error(at, f"field {number} has wire type {wire}, which this format does not use")
            self._pos = pos
            yield number, wire, value, at

    @property
    def field_end(self) -> int:
        """The end of the field `fields()` yielded last (for a length-delimited field: the end of its bytes)."""
        return self._pos

    def sub(self, start: int) -> Message:
        """The embedded message of the length-delimited field yielded last, which starts at `start`."""
        return Message(self.data, start, self._pos, self.path)


def encode_varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_field(number: int, payload: bytes | int | float) -> bytes:
    """One field: a varint for ints, fixed32 for floats, length-delimited for bytes."""
    if isinstance(payload, bytes):
        return encode_varint(number << 3 | LENGTH) + encode_varint(len(payload)) + payload
    if isinstance(payload, float):
        return encode_varint(number << 3 | FIXED32) + struct.pack("<f", payload)
    return encode_varint(number << 3 | VARINT) + encode_varint(payload)

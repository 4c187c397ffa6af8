"""Scalars from TensorBoard event files, read without TensorFlow, tensorboard or protobuf.

An event file is a TFRecord stream: each record is a little-endian uint64 length, a masked
CRC-32C of those 8 bytes, the payload, and a masked CRC-32C of the payload. Each payload is a
serialized `Event` protobuf; the few fields needed are decoded here from the wire format:

    Event:        wall_time = 1 (double), step = 2 (int64), summary = 5
    Summary:      value = 1 (repeated)
    Value:        tag = 1, simple_value = 2 (float), metadata = 9, tensor = 8
    Metadata:     plugin_data = 1 → plugin_name = 1
    TensorProto:  dtype = 1, tensor_shape = 2, tensor_content = 4, float_val = 5, double_val = 6,
                  int_val = 7, int64_val = 10, bool_val = 11, half_val = 13

Old writers (tensorboardX, torch's default) store scalars as `simple_value`; TF2 and torch with
`new_style=True` store a one-element tensor under the "scalars" plugin. Histograms, images,
text and other plugins' tensors are skipped.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

# ------------------------------------------------------------------------ CRC-32C (Castagnoli)


def _crc_table() -> list[int]:
    table = []
    for n in range(256):
        crc = n
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC_TABLE = _crc_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    table = _CRC_TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masking, so a CRC of data that holds CRCs is not itself a trivial value."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


# ------------------------------------------------------------------------ TFRecord framing


class EventFileError(Exception):
    """The file is not a well-formed event file; the message names the record and byte."""


class TruncatedRecord(EventFileError):
    def __init__(self, index: int, offset: int) -> None:
        super().__init__(f"record {index} at byte {offset} is cut short (is the file still being written?)")
        self.index = index
        self.offset = offset


@dataclass(frozen=True)
class Record:
    index: int
    offset: int
    data: bytes


def read_records(stream: BinaryIO) -> Iterator[Record]:
    """Records in order. A partial record at the very end (a writer still writing) ends the
    stream quietly; a checksum that does not match is an error."""
    index = offset = 0
    while True:
        header = stream.read(12)
        if not header:
            return
        if len(header) < 12:
            raise TruncatedRecord(index, offset)
        (length,) = struct.unpack("<Q", header[:8])
        (length_crc,) = struct.unpack("<I", header[8:])
        if masked_crc32c(header[:8]) != length_crc:
            raise EventFileError(f"record {index} at byte {offset}: the length checksum does not match")
        data = stream.read(length)
        footer = stream.read(4)
        if len(data) < length or len(footer) < 4:
            raise TruncatedRecord(index, offset)
        if masked_crc32c(data) != struct.unpack("<I", footer)[0]:
            raise EventFileError(f"record {index} at byte {offset}: the data checksum does not match")
        yield Record(index, offset, data)
        index += 1
        offset += 16 + length


# ------------------------------------------------------------------------ protobuf wire format


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise EventFileError("a varint runs past the end of its message")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise EventFileError("a varint is longer than 10 bytes")


def fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) for each field: an int for varints and fixed-width
    fields (raw bits), bytes for length-delimited ones."""
    pos = 0
    end = len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            if pos + 8 > end:
                raise EventFileError(f"field {number} runs past the end of its message")
            (value,) = struct.unpack_from("<Q", buf, pos)
            pos += 8
        elif wire == 2:
            length, pos = _varint(buf, pos)
            if pos + length > end:
                raise EventFileError(f"field {number} runs past the end of its message")
            value = buf[pos : pos + length]
            pos += length
        elif wire == 5:
            if pos + 4 > end:
                raise EventFileError(f"field {number} runs past the end of its message")
            (value,) = struct.unpack_from("<I", buf, pos)
            pos += 4
        else:
            raise EventFileError(f"field {number} has wire type {wire}, which event files do not use")
        yield number, wire, value


def _f32(bits: int) -> float:
    return float(struct.unpack("<f", struct.pack("<I", bits))[0])


def _f64(bits: int) -> float:
    return float(struct.unpack("<d", struct.pack("<Q", bits))[0])


def _int64(raw: int) -> int:
    return raw - (1 << 64) if raw >= 1 << 63 else raw


def _bfloat16(bits: int) -> float:
    return _f32((bits & 0xFFFF) << 16)


def _half(bits: int) -> float:
    return float(struct.unpack("<e", struct.pack("<H", bits & 0xFFFF))[0])


# TensorProto dtype numbers (tensorflow/core/framework/types.proto) → how tensor_content packs one element.
_CONTENT = {1: "<f", 2: "<d", 3: "<i", 4: "<B", 5: "<h", 6: "<b", 9: "<q", 10: "<?", 19: "<e"}
DT_BFLOAT16 = 14
DT_HALF = 19


def _packed(wire: int, value: int | bytes, width: int) -> list[int]:
    """A repeated numeric field: one element (unpacked) or a packed run of them."""
    if isinstance(value, int):
        return [value]
    if width == 0:  # varints
        out, pos = [], 0
        while pos < len(value):
            item, pos = _varint(value, pos)
            out.append(item)
        return out
    fmt = "<I" if width == 4 else "<Q"
    return [struct.unpack_from(fmt, value, i)[0] for i in range(0, len(value) - width + 1, width)]


def _tensor_scalar(buf: bytes) -> float | None:
    """The value of a one-element numeric tensor; None for anything else."""
    dtype = 0
    dims: list[int] = []
    values: list[float] = []
    content = b""
    for number, wire, value in fields(buf):
        if number == 1 and isinstance(value, int):
            dtype = value
        elif number == 2 and isinstance(value, bytes):
            for n, _, dim in fields(value):
                if n == 2 and isinstance(dim, bytes):
                    dims.append(next((_int64(s) for k, _, s in fields(dim) if k == 1 and isinstance(s, int)), 0))
        elif number == 4 and isinstance(value, bytes):
            content = value
        elif number == 5:
            values += [_f32(v) for v in _packed(wire, value, 4)]
        elif number == 6:
            values += [_f64(v) for v in _packed(wire, value, 8)]
        elif number in (7, 10, 11):  # int_val, int64_val, bool_val
            values += [float(_int64(v)) for v in _packed(wire, value, 0)]
        elif number == 13:  # half_val: DT_HALF and DT_BFLOAT16 bit patterns
            convert = _bfloat16 if dtype == DT_BFLOAT16 else _half
            values += [convert(v) for v in _packed(wire, value, 0)]
    if math.prod(dims) != 1:
        return None
    if content:
        if dtype == DT_BFLOAT16 and len(content) == 2:
            return _bfloat16(struct.unpack("<H", content)[0])
        fmt = _CONTENT.get(dtype)
        if fmt is None or struct.calcsize(fmt) != len(content):
            return None
        return float(struct.unpack(fmt, content)[0])
    return values[0] if len(values) == 1 else None


def _plugin_name(metadata: bytes) -> str:
    for number, _, value in fields(metadata):
        if number == 1 and isinstance(value, bytes):
            for n, _, name in fields(value):
                if n == 1 and isinstance(name, bytes):
                    return name.decode("utf-8", "replace")
    return ""


@dataclass(frozen=True)
class Scalar:
    tag: str
    step: int
    value: float
    wall_time: float
    record: int


def _value_scalar(buf: bytes) -> tuple[str, float] | None:
    tag = ""
    simple: float | None = None
    tensor: bytes | None = None
    plugin = ""
    for number, _, value in fields(buf):
        if number == 1 and isinstance(value, bytes):
            tag = value.decode("utf-8", "replace")
        elif number == 2 and isinstance(value, int):
            simple = _f32(value)
        elif number == 8 and isinstance(value, bytes):
            tensor = value
        elif number == 9 and isinstance(value, bytes):
            plugin = _plugin_name(value)
    if simple is not None:
        return tag, simple
    if tensor is not None and plugin in ("", "scalars"):
        found = _tensor_scalar(tensor)
        return None if found is None else (tag, found)
    return None


def event_scalars(record: Record) -> Iterator[Scalar]:
    wall_time = 0.0
    step = 0
    summaries: list[bytes] = []
    for number, _, value in fields(record.data):
        if number == 1 and isinstance(value, int):
            wall_time = _f64(value)
        elif number == 2 and isinstance(value, int):
            step = _int64(value)
        elif number == 5 and isinstance(value, bytes):
            summaries.append(value)
    for summary in summaries:
        for number, _, value in fields(summary):
            if number == 1 and isinstance(value, bytes):
                found = _value_scalar(value)
                if found is not None:
                    yield Scalar(found[0], step, found[1], wall_time, record.index)


def read_scalars(path: Path) -> Iterator[Scalar]:
    """Every scalar of one event file, in file order. Errors name the record."""
    with path.open("rb") as stream:
        for record in read_records(stream):
            try:
                yield from event_scalars(record)
            except EventFileError as exc:
                raise EventFileError(f"record {record.index} at byte {record.offset}: {exc}") from None


def is_event_file(path: Path) -> bool:
    return "tfevents" in path.name

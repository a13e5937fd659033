"""Test data in the three sliceable formats, written with their own writers."""

import struct

import crc32c


def write_csv(path, rows):
    with open(path, "w") as handle:
        for index in range(rows):
            handle.write(f"{path.name},{index},{index * 7 % 13}\n")
    return path


def masked_crc(data: bytes) -> int:
    crc = crc32c.crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def write_tfrecord(path, records):
    with open(path, "wb") as handle:
        for index in range(records):
            data = f"{path.name}:{index}:".encode() + b"x" * (index % 9)
            length = struct.pack("<Q", len(data))
            handle.write(length + struct.pack("<I", masked_crc(length)) + data + struct.pack("<I", masked_crc(data)))
    return path


def write_parquet(path, rows, row_group_size=100):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"file": [path.name] * rows, "row": list(range(rows)), "value": [r * 0.5 for r in range(rows)]})
    pq.write_table(table, path, row_group_size=row_group_size)
    return path

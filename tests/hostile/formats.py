"""Byte builders for the formats tandem reads (IDX, CIFAR-10, CSV, safetensors, checkpoints), for
the hostile-file generator beside this file and fuzz/make_seeds.py. Valid files only; the callers
break them. Not a reader."""
import gzip
import json
import struct
import zlib

MLP_HIDDEN = 50  # train/models.cpp: mlp is Linear(in, 50) -> ReLU -> Linear(50, classes)


def idx(dims, data):
    """An IDX file of unsigned bytes: 00 00 08 rank, big-endian sizes, then the data."""
    return bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + bytes(data)


def gz(data):
    return gzip.compress(data, mtime=0)


def cifar_record(label, pixel=0):
    return bytes([label]) + bytes([pixel % 256]) * 3072


def safetensors_header(entries, metadata=None, pad=True):
    """The prefix and header of a safetensors file. entries: [(name, dtype, shape, begin, end)]."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, begin, end in entries:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text


def safetensors(tensors, metadata=None):
    """tensors: [(name, shape, [float, ...])], float32."""
    entries, data = [], b""
    for name, shape, values in tensors:
        blob = struct.pack("<%df" % len(values), *values)
        entries.append((name, "F32", shape, len(data), len(data) + len(blob)))
        data += blob
    return safetensors_header(entries, metadata) + data


def mlp_tensors(inputs, classes):
    """The state dict of tandem's mlp for `inputs` features and `classes` classes, small values."""
    def ramp(n, scale):
        return [((i * 7) % 13 - 6) * scale for i in range(n)]
    return [("fc1.weight", [MLP_HIDDEN, inputs], ramp(MLP_HIDDEN * inputs, 0.01)),
            ("fc1.bias", [MLP_HIDDEN], ramp(MLP_HIDDEN, 0.001)),
            ("fc2.weight", [classes, MLP_HIDDEN], ramp(classes * MLP_HIDDEN, 0.01)),
            ("fc2.bias", [classes], ramp(classes, 0.001))]


def manifest(files, step=1, version=1, fmt="tandem-checkpoint"):
    """manifest.json for {name: bytes}, as io/checkpoint.cpp writes it."""
    entries = [{"name": n, "bytes": len(b), "crc32": zlib.crc32(b)} for n, b in files.items()]
    doc = {"format": fmt, "version": version, "step": step, "files": entries}
    return (json.dumps(doc, indent=2) + "\n").encode()


def checkpoint(inputs, classes, state_json=b'{"format": "tandem-train-state"}'):
    """{file name: bytes} of a checkpoint directory holding an mlp's weights."""
    files = {"model.safetensors": safetensors(mlp_tensors(inputs, classes)),
             "state.safetensors": safetensors([]),
             "state.json": state_json}
    files["manifest.json"] = manifest(files)
    return files

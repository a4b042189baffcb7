#!/usr/bin/env python3
"""Writes the seed corpora of the safetensors, checkpoint and config fuzz targets
(fuzz/corpus/<target>/) and the fixed files the checkpoint target reads beside its manifest
(fuzz/checkpoint_files/). The IDX, CIFAR-10 and CSV seeds are checked in as they are.
Uses the byte builders of tests/hostile/formats.py. Rerun: python3 fuzz/make_seeds.py"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "hostile"))
from formats import checkpoint, mlp_tensors, safetensors, safetensors_header  # noqa: E402


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as out:
        out.write(data)


def corpus(target, name, data):
    write(os.path.join(HERE, "corpus", target, name), data)


# safetensors: every dtype tandem reads, metadata, an empty file, a zero-sized tensor.
corpus("safetensors", "mlp", safetensors(mlp_tensors(2, 2), metadata={"format": "pt"}))
corpus("safetensors", "empty", safetensors([]))
typed = [("f64", "F64", [1], 8), ("bf16", "BF16", [2], 4), ("i64", "I64", [1], 8), ("u8", "U8", [3], 3),
         ("none", "F32", [0, 4], 0)]
entries, offset = [], 0
for name, dtype, shape, size in typed:
    entries.append((name, dtype, shape, offset, offset + size))
    offset += size
corpus("safetensors", "dtypes", safetensors_header(entries) + bytes(range(offset)))
# Found by the fuzzer: a (4, 0) tensor was read as not contiguous.
corpus("safetensors", "zero_columns", safetensors_header([("none", "F32", [4, 0], 0, 0)]))

# checkpoint: the fixed files, and their manifest as io/checkpoint.cpp writes it.
files = checkpoint(2, 2)
for name in ("model.safetensors", "state.safetensors", "state.json"):
    write(os.path.join(HERE, "checkpoint_files", name), files[name])
corpus("checkpoint", "manifest.json", files["manifest.json"])
corpus("checkpoint", "manifest_compact.json",
       files["manifest.json"].replace(b"\n", b"").replace(b"  ", b""))
# Found by the fuzzer: a format that is a number, not a string, once escaped as a JSON type error.
corpus("checkpoint", "format_is_a_number.json", b'{"format": 6666666666000507367200}')

# config: first byte even = JSON, odd = TOML; then a config file.
corpus("config", "all_keys.json", b"\x00" + b'{"model": "mlp", "data": "synthetic:4:3:8", '
       b'"epochs": 3, "max_steps": 0, "batch_size": 16, "optimizer": "adamw", "lr": 0.01, '
       b'"momentum": 0.9, "weight_decay": 0.0001, "schedule": "cosine", "label_smoothing": 0.1, '
       b'"devices": "cpu:2", "workers": 1, "seed": 7, "deterministic": true, "out": "runs/x", '
       b'"checkpoint_every": 5, "keep_checkpoints": 2, "resume": "auto", "eval_every": 1, '
       b'"log_format": "json"}')
corpus("config", "lr_null.json", b"\x00" + b'{"lr": null, "optimizer": "sgd"}')
corpus("config", "table.toml", b"\x01" + b'[train]\nmodel = "cnn"\nbatch_size = 32\nlr = 1e-3\n'
       b'deterministic = true\nschedule = "onecycle"\n')
corpus("config", "top_level.toml", b"\x01" + b'epochs = 2\nlabel_smoothing = 0.0\nseed = 3\n'
       b'devices = "auto"\n# comment\n')
print("seeds written under", HERE)

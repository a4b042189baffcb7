#!/usr/bin/env python3
"""Checks that a model.safetensors written by `tandem train` loads into the same network defined
in PyTorch (load_state_dict, strict) and predicts what `tandem eval --json` reported.

Usage: check_pytorch_load.py --mnist DIR --check MODEL:WEIGHTS:EVAL_JSON [--check ...]
DIR holds raw IDX files (t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte), normalised as tandem's
mnist:DIR (ToFloat, Normalize(0.1307, 0.3081)). Reads safetensors with the standard library and
numpy only (no `safetensors` package needed). Exit 0 on agreement; prints what differs otherwise.
"""
import argparse, json, os, struct, sys
import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from torch_models import CNN, MLP, ResNet8, SeedCNN  # noqa: E402

DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32, "U8": np.uint8}


def load_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    base = 8 + n
    out = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        arr = np.frombuffer(raw[base + begin:base + end], dtype=DTYPES[info["dtype"]])
        out[name] = torch.from_numpy(arr.reshape(info["shape"]).copy())
    return out


def read_idx(path):
    with open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def check(model_name, weights, expect_path, x, labels):
    """Problems found for one model (empty when PyTorch agrees with tandem), and a summary."""
    n, c, h, w = x.shape
    classes = 10
    model = {"seed-cnn": lambda: SeedCNN(c, h, w, classes), "mlp": lambda: MLP(c * h * w, classes),
             "cnn": lambda: CNN(c, h, w, classes), "resnet8": lambda: ResNet8(c, classes)}[model_name]()
    model.load_state_dict(load_safetensors(weights), strict=True)  # raises on any key/shape mismatch
    model.eval()
    with torch.no_grad():
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits, labels).item()
        predicted = logits.argmax(1)
    confusion = [[0] * classes for _ in range(classes)]
    for t, q in zip(labels.tolist(), predicted.tolist()):
        confusion[t][q] += 1
    with open(expect_path) as f:
        expect = json.load(f)
    problems = []
    if abs(loss - expect["loss"]) > 1e-4 * max(1.0, abs(loss)):
        problems.append("loss: pytorch %.7f, tandem %.7f" % (loss, expect["loss"]))
    differing = sum(abs(confusion[i][j] - expect["confusion_matrix"][i][j])
                    for i in range(classes) for j in range(classes))
    if differing > 2:  # one prediction flipped by rounding moves two cells
        problems.append("confusion matrices differ in %d counts" % differing)
    summary = "%s: %s loads in PyTorch %s; loss %.6f, accuracy %.4f as tandem's" % (
        model_name, weights, torch.__version__, loss, (predicted == labels).float().mean().item())
    return problems, summary


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mnist", required=True)
    p.add_argument("--check", action="append", required=True, help="MODEL:WEIGHTS:EVAL_JSON")
    a = p.parse_args()
    images = read_idx(os.path.join(a.mnist, "t10k-images-idx3-ubyte"))
    labels = torch.tensor(read_idx(os.path.join(a.mnist, "t10k-labels-idx1-ubyte")), dtype=torch.int64)
    x = torch.tensor(images, dtype=torch.float32).unsqueeze(1) / 255
    x = (x - 0.1307) / 0.3081
    failed = False
    for item in a.check:
        model_name, weights, expect_path = item.split(":")
        problems, summary = check(model_name, weights, expect_path, x, labels)
        if problems:
            failed = True
            print("%s: %s" % (model_name, "; ".join(problems)))
        else:
            print("ok: " + summary)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

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
import torch, torch.nn as nn

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


class SeedCNN(nn.Module):  # the seed document's Net
    def __init__(self, c, h, w, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(c, 16, 3, 1, 1)
        self.conv2 = nn.Conv2d(16, 32, 3, 1, 1)
        self.fc = nn.Linear(32 * h * w, classes)

    def forward(self, x):
        x = self.conv2(self.conv1(x))
        return self.fc(x.view(x.size(0), -1))


class MLP(nn.Module):  # the second seed document's MyModel
    def __init__(self, d, classes):
        super().__init__()
        self.fc1 = nn.Linear(d, 50)
        self.fc2 = nn.Linear(50, classes)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


class CNN(nn.Module):  # the anchor script's CNN
    def __init__(self, c, h, w, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(c, 32, 3, 1, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1, 1)
        self.fc1 = nn.Linear(64 * (h // 4) * (w // 4), 128)
        self.fc2 = nn.Linear(128, classes)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


class BasicBlock(nn.Module):  # torchvision's
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = nn.Sequential()
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.downsample(x))


class ResNet8(nn.Module):
    def __init__(self, c, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(c, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.layer1 = nn.Sequential(BasicBlock(16, 16, 1))
        self.layer2 = nn.Sequential(BasicBlock(16, 32, 2))
        self.layer3 = nn.Sequential(BasicBlock(32, 64, 2))
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        x = torch.nn.functional.adaptive_avg_pool2d(x, 1)
        return self.fc(x.flatten(1))


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

#!/usr/bin/python3
"""Generates tandem's golden reference numbers from PyTorch: tests/golden/*.safetensors.

What it writes (every file is a safetensors file; keys are "<case>.<role>"):
  io_dtypes.safetensors        one tensor per dtype tandem reads (F32, F64, BF16, I64, U8), a 0-d
                               and an empty one, values given by formulas the io test recomputes.
  op_<op>.safetensors          per case: the inputs and weights, the float32 forward output "y",
                               a fixed random upstream gradient "gy" and the gradients PyTorch
                               computes for each input ("g" + the input's role), plus the case's
                               parameters as int64 tensors ("<case>.param.<name>").
                               op_autocast_bf16 holds conv2d, linear and matmul run under
                               torch.autocast("cpu", bfloat16), y widened to float32.
  train_<model>_init.safetensors  initial weights ("init.<state_dict key>") and the batch
                               ("batch.x", "batch.y"; batch of 8) of a 5-step training run.
  train_<model>_<opt>.safetensors the loss at each step ("losses", before that step's update) and
                               the final weights ("final.<state_dict key>") for opt = sgd
                               (lr 0.01, momentum 0.9) and adam (lr 1e-3).
The seed CNN's initial weights are rounded to bfloat16 values (and stored as BF16) so that the
files stay under 3 MB in total; training itself runs in float32.

Rerun from the repository root with Debian's Python (which holds PyTorch 1.13):
    /usr/bin/python3 tools/gen_golden.py
It is deterministic (fixed seeds, one thread, deterministic algorithms): rerunning on one machine rewrites the
same bytes. Never edit the generated files by hand; change this script and rerun it.
"""
import json
import os
import struct
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden")

DTYPE_NAMES = {torch.float32: "F32", torch.float64: "F64", torch.bfloat16: "BF16",
               torch.int64: "I64", torch.uint8: "U8"}


def save_safetensors(path, tensors, metadata=None):
    """Writes the safetensors format: u64 header length, JSON header (padded with spaces to a
    multiple of 8), data buffer. Data is laid out in the order given; header keys are sorted, as
    the reference writer's JSON is, so readers must go by data_offsets, not key order."""
    header, chunks, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().cpu().contiguous()
        if t.dtype not in DTYPE_NAMES:
            raise ValueError(f"{name}: dtype {t.dtype} is not one tandem reads")
        raw = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()
        header[name] = {"dtype": DTYPE_NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in chunks:
            f.write(raw)
    print(f"wrote {os.path.relpath(path)} ({os.path.getsize(path)} bytes)")


def i64(*values):
    return torch.tensor(values, dtype=torch.int64)


class OpFile:
    """Collects cases for one op file."""

    def __init__(self, op):
        self.op = op
        self.tensors = {}

    def case(self, name, fn, inputs, params=None, extra=None):
        """fn(**inputs) -> output (or tuple whose first element is differentiated). Records the
        inputs, output y, upstream gradient gy and each floating input's gradient."""
        leaves = {}
        for role, value in inputs.items():
            leaf = value.detach().clone()
            if leaf.is_floating_point():
                leaf.requires_grad_(True)
            leaves[role] = leaf
            self.tensors[f"{name}.{role}"] = value.detach().clone()
        y = fn(**leaves)
        gy = torch.randn(y.shape, dtype=y.dtype)
        y.backward(gy)
        self.tensors[f"{name}.y"] = y.detach()
        self.tensors[f"{name}.gy"] = gy
        for role, leaf in leaves.items():
            if leaf.requires_grad:
                self.tensors[f"{name}.g{role}"] = leaf.grad
        for key, value in (params or {}).items():
            self.tensors[f"{name}.param.{key}"] = value
        for key, value in (extra or {}).items():
            self.tensors[f"{name}.{key}"] = value.detach().clone()

    def save(self):
        save_safetensors(os.path.join(OUT_DIR, f"op_{self.op}.safetensors"), self.tensors,
                         {"generator": "tools/gen_golden.py", "torch": torch.__version__})


def randn(*shape):
    return torch.randn(*shape, dtype=torch.float32)


def gen_io_dtypes():
    # Values the io test recomputes: element i of each tensor, in logical order.
    tensors = {
        "f32": (torch.arange(6, dtype=torch.float32) * 0.5 - 1.0).reshape(2, 3),
        "f64": (torch.arange(4, dtype=torch.float64) / 3.0).reshape(4),
        "bf16": (torch.arange(8, dtype=torch.float32) * 0.25 - 1.0).reshape(2, 2, 2).bfloat16(),
        "i64": (torch.arange(5, dtype=torch.int64) * 1000000007 - 2).reshape(5, 1),
        "u8": (torch.arange(10, dtype=torch.int64) * 29 % 256).to(torch.uint8).reshape(10),
        "scalar": torch.tensor(3.25, dtype=torch.float32),
        "empty": torch.zeros(0, 3, dtype=torch.float32),
    }
    save_safetensors(os.path.join(OUT_DIR, "io_dtypes.safetensors"), tensors,
                     {"generator": "tools/gen_golden.py", "purpose": "io test"})


def gen_ops():
    torch.manual_seed(1)
    f = OpFile("linear")
    f.case("bias", lambda x, w, b: F.linear(x, w, b),
           {"x": randn(4, 5), "w": randn(3, 5), "b": randn(3)})
    f.case("nobias", lambda x, w: F.linear(x, w), {"x": randn(6, 7), "w": randn(2, 7)})
    f.save()

    torch.manual_seed(2)
    f = OpFile("conv2d")
    for name, x, w, stride, pad, dil, groups in [
            ("s1p1", randn(2, 3, 6, 6), randn(4, 3, 3, 3), 1, 1, 1, 1),
            ("s2p0d2", randn(2, 3, 9, 9), randn(4, 3, 3, 3), 2, 0, 2, 1),
            ("groups2", randn(2, 4, 5, 5), randn(6, 2, 3, 3), 1, 1, 1, 2)]:
        f.case(name, lambda x, w, b, s=stride, p=pad, d=dil, g=groups:
               F.conv2d(x, w, b, stride=s, padding=p, dilation=d, groups=g),
               {"x": x, "w": w, "b": randn(w.shape[0])},
               {"stride": i64(stride, stride), "padding": i64(pad, pad),
                "dilation": i64(dil, dil), "groups": i64(groups)})
    f.save()

    torch.manual_seed(3)
    f = OpFile("max_pool2d")
    for name, x, k, s, p, ceil in [("k2s2", randn(2, 3, 6, 6), 2, 2, 0, False),
                                   ("k3s2p1", randn(2, 3, 7, 7), 3, 2, 1, False),
                                   ("k2s2ceil", randn(1, 2, 7, 7), 2, 2, 0, True)]:
        f.case(name, lambda x, k=k, s=s, p=p, c=ceil:
               F.max_pool2d(x, k, s, p, ceil_mode=c), {"x": x},
               {"kernel": i64(k, k), "stride": i64(s, s), "padding": i64(p, p),
                "ceil_mode": i64(int(ceil))})
    f.save()

    torch.manual_seed(4)
    f = OpFile("avg_pool2d")
    for name, x, k, s, p, include in [("k2s2", randn(2, 3, 6, 6), 2, 2, 0, True),
                                      ("k3s2p1", randn(2, 3, 7, 7), 3, 2, 1, True),
                                      ("k3s2p1_exclude_pad", randn(2, 3, 7, 7), 3, 2, 1, False)]:
        f.case(name, lambda x, k=k, s=s, p=p, inc=include:
               F.avg_pool2d(x, k, s, p, count_include_pad=inc), {"x": x},
               {"kernel": i64(k, k), "stride": i64(s, s), "padding": i64(p, p),
                "count_include_pad": i64(int(include))})
    f.save()

    torch.manual_seed(5)
    f = OpFile("adaptive_avg_pool2d")
    for name, x, out in [("7to3", randn(2, 3, 7, 7), (3, 3)),
                         ("6x5to4x3", randn(2, 2, 6, 5), (4, 3)),
                         ("global", randn(2, 4, 5, 5), (1, 1))]:
        f.case(name, lambda x, o=out: F.adaptive_avg_pool2d(x, o), {"x": x},
               {"output_size": i64(*out)})
    f.save()

    torch.manual_seed(6)
    f = OpFile("batch_norm")
    for name, shape, training in [("train4d", (4, 3, 5, 5), True), ("train2d", (6, 3), True),
                                  ("eval4d", (4, 3, 5, 5), False)]:
        c = shape[1]
        mean0 = randn(c) * 0.1
        var0 = torch.rand(c) + 0.5
        running_mean, running_var = mean0.clone(), var0.clone()
        f.case(name, lambda x, w, b, t=training, rm=running_mean, rv=running_var:
               F.batch_norm(x, rm, rv, w, b, training=t, momentum=0.1, eps=1e-5),
               {"x": randn(*shape) * 2.0 + 0.5, "w": randn(c), "b": randn(c)},
               {"training": i64(int(training))},
               {"running_mean": mean0, "running_var": var0,
                "running_mean_after": running_mean, "running_var_after": running_var})
    f.save()

    torch.manual_seed(7)
    f = OpFile("relu")
    x = randn(3, 4, 5)
    x[0, 0, :] = 0.0  # torch's relu gradient at exactly 0 is 0
    f.case("basic", lambda x: F.relu(x), {"x": x})
    f.save()
    f = OpFile("gelu")
    f.case("basic", lambda x: F.gelu(x), {"x": randn(3, 4, 5) * 2.0})
    f.save()

    torch.manual_seed(8)
    for op, fn in [("softmax", F.softmax), ("log_softmax", F.log_softmax)]:
        f = OpFile(op)
        for name, x, dim in [("dim1", randn(4, 7) * 3.0, 1), ("dim0_3d", randn(3, 2, 4), 0),
                             ("dimlast_3d", randn(2, 3, 5), -1)]:
            f.case(name, lambda x, d=dim, fn=fn: fn(x, dim=d), {"x": x}, {"dim": i64(dim)})
        f.save()

    torch.manual_seed(9)
    f = OpFile("cross_entropy")
    logits = randn(6, 5) * 2.0
    target = torch.randint(0, 5, (6,))
    for name, smoothing, reduction in [("ls0_mean", 0.0, "mean"), ("ls0_sum", 0.0, "sum"),
                                       ("ls01_mean", 0.1, "mean"), ("ls01_sum", 0.1, "sum")]:
        f.case(name, lambda x, t=target, s=smoothing, r=reduction:
               F.cross_entropy(x, t, label_smoothing=s, reduction=r), {"x": logits},
               {"sum": i64(int(reduction == "sum")),
                "label_smoothing": torch.tensor(smoothing, dtype=torch.float64)},
               {"target": target})
    f.save()

    torch.manual_seed(10)
    f = OpFile("mse_loss")
    x, t = randn(4, 5), randn(4, 5)
    for name, reduction in [("mean", "mean"), ("sum", "sum")]:
        f.case(name, lambda x, t, r=reduction: F.mse_loss(x, t, reduction=r),
               {"x": x, "t": t}, {"sum": i64(int(reduction == "sum"))})
    f.save()

    torch.manual_seed(11)
    f = OpFile("cat")
    f.case("dim0", lambda a, b: torch.cat([a, b], 0), {"a": randn(2, 3), "b": randn(4, 3)},
           {"dim": i64(0)})
    f.case("dim1_3way", lambda a, b, c: torch.cat([a, b, c], 1),
           {"a": randn(2, 3, 4), "b": randn(2, 1, 4), "c": randn(2, 2, 4)}, {"dim": i64(1)})
    f.case("dimlast", lambda a, b: torch.cat([a, b], -1), {"a": randn(3, 2), "b": randn(3, 5)},
           {"dim": i64(-1)})
    f.save()

    torch.manual_seed(12)
    f = OpFile("binary")
    a, b = randn(3, 1, 5), randn(4, 1)
    positive = torch.rand(4, 1) + 0.5
    f.case("add", lambda a, b: a + b, {"a": a, "b": b})
    f.case("mul", lambda a, b: a * b, {"a": a, "b": b})
    f.case("div", lambda a, b: a / b, {"a": a, "b": positive})
    f.case("mul_same", lambda a, b: a * b, {"a": randn(2, 3), "b": randn(2, 3)})
    f.save()

    torch.manual_seed(13)
    f = OpFile("reduce")
    x = randn(3, 4, 5)
    for op, fn in [("sum", torch.sum), ("mean", torch.mean)]:
        for name, dims, keepdim in [("d1", [1], False), ("d02_keep", [0, 2], True),
                                    ("dlast", [-1], False)]:
            f.case(f"{op}_{name}", lambda x, fn=fn, d=dims, k=keepdim: fn(x, d, keepdim=k),
                   {"x": x}, {"dims": i64(*dims), "keepdim": i64(int(keepdim))})
        f.case(f"{op}_all", lambda x, fn=fn: fn(x), {"x": x}, {"dims": i64(), "keepdim": i64(0)})
    f.save()

    # bfloat16 autocast (torch.autocast on the CPU): the products take float32 leaves, compute in
    # bfloat16 and are widened to float32 for y; the gradients reach the leaves as float32.
    torch.manual_seed(14)
    f = OpFile("autocast_bf16")

    def autocast(fn):
        def run(**inputs):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return fn(**inputs).float()
        return run
    f.case("conv2d", autocast(lambda x, w, b: F.conv2d(x, w, b, stride=1, padding=1)),
           {"x": randn(2, 3, 6, 6), "w": randn(4, 3, 3, 3), "b": randn(4)},
           {"stride": i64(1, 1), "padding": i64(1, 1), "dilation": i64(1, 1), "groups": i64(1)})
    f.case("linear", autocast(lambda x, w, b: F.linear(x, w, b)),
           {"x": randn(6, 20), "w": randn(5, 20), "b": randn(5)})
    f.case("matmul", autocast(lambda a, b: torch.matmul(a, b)),
           {"a": randn(4, 9), "b": randn(9, 3)})
    f.save()


class SeedCNN(nn.Module):  # the seed document's Net, for 1x28x28 input
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, 1, 1)
        self.conv2 = nn.Conv2d(16, 32, 3, 1, 1)
        self.fc = nn.Linear(32 * 28 * 28, 10)

    def forward(self, x):
        x = self.conv2(self.conv1(x))
        return self.fc(x.view(x.size(0), -1))


class SeedMLP(nn.Module):  # Linear(100, 50) -> ReLU -> Linear(50, 10)
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(100, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def gen_training(name, make_model, make_batch, seed, bf16_init):
    torch.manual_seed(seed)
    model = make_model()
    if bf16_init:
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.bfloat16().float())
    init = {k: v.detach().clone() for k, v in model.state_dict().items()}
    x = make_batch()
    y = torch.randint(0, 10, (8,))
    stored_init = {f"init.{k}": (v.bfloat16() if bf16_init else v) for k, v in init.items()}
    stored_init.update({"batch.x": x, "batch.y": y})
    meta = {"generator": "tools/gen_golden.py", "torch": torch.__version__, "steps": "5"}
    save_safetensors(os.path.join(OUT_DIR, f"train_{name}_init.safetensors"), stored_init, meta)

    for opt_name, make_opt in [("sgd", lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9)),
                               ("adam", lambda p: torch.optim.Adam(p, lr=1e-3))]:
        model.load_state_dict(init)
        opt = make_opt(model.parameters())
        losses = []
        for _ in range(5):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        out = {"losses": torch.tensor(losses, dtype=torch.float32)}
        out.update({f"final.{k}": v.detach().clone() for k, v in model.state_dict().items()})
        save_safetensors(os.path.join(OUT_DIR, f"train_{name}_{opt_name}.safetensors"), out,
                         meta)


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    os.makedirs(OUT_DIR, exist_ok=True)
    gen_io_dtypes()
    gen_ops()
    # The CNN sees image-like pixels in [0, 1) (with randn inputs it fits the batch in two steps and
    # the later losses are ~1e-5, too ill-conditioned to compare); the MLP sees standard normals.
    gen_training("cnn", SeedCNN, lambda: torch.rand(8, 1, 28, 28), seed=20, bf16_init=True)
    gen_training("mlp", SeedMLP, lambda: torch.randn(8, 100), seed=21, bf16_init=False)
    total = sum(os.path.getsize(os.path.join(OUT_DIR, n)) for n in os.listdir(OUT_DIR)
                if n.endswith(".safetensors"))
    print(f"total {total} bytes")
    if total >= 3 * 1024 * 1024:
        sys.exit("golden files exceed 3 MB; shrink the cases")


if __name__ == "__main__":
    main()

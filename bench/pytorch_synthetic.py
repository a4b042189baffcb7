#!/usr/bin/env python3
"""The PyTorch side of tandem's synthetic-data benchmarks: one of tandem's models
(tools/torch_models.py: seed-cnn, mlp, cnn, resnet8) trained with SGD (momentum 0.9) on random
images of a given shape, the way ../shared/anchors/pytorch_fmnist.py trains on Fashion-MNIST (no
host synchronisation inside the timed loop, the loss summed on the device). For ResNet-8 on
CIFAR-shaped data (3x32x32), which the anchor does not cover. Prints one JSON line:
train images/s over the timed steps, after warm-up steps. --profile N instead runs N steps under
torch.profiler after the warm-up and prints its kernel table (bench/kernel_profile.cpp's
counterpart, for comparing GPU kernels side by side).
Usage: pytorch_synthetic.py [--model resnet8] [--input 3x32x32] [--classes 10] [--batch-size 512]
                            [--steps 100] [--warmup 10] [--device cpu|cuda] [--bf16]
                            [--channels-last] [--threads N] [--seed 0] [--profile N]
"""
import argparse, json, os, sys, time
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the anchor: one BLAS thread beside torch's
import torch, torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from torch_models import CNN, MLP, ResNet8, SeedCNN  # noqa: E402


def make_model(name, c, h, w, classes):
    makers = {"seed-cnn": lambda: SeedCNN(c, h, w, classes), "mlp": lambda: MLP(c * h * w, classes),
              "cnn": lambda: CNN(c, h, w, classes), "resnet8": lambda: ResNet8(c, classes)}
    if name not in makers:
        sys.exit("pytorch_synthetic.py: unknown model '%s' (expected %s)" % (name, ", ".join(makers)))
    return makers[name]()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet8")
    p.add_argument("--input", default="3x32x32")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--device", default="cpu")
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--profile", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    try:
        c, h, w = (int(v) for v in a.input.split("x"))
    except ValueError:
        sys.exit("pytorch_synthetic.py: --input '%s' is not CxHxW, e.g. 3x32x32" % a.input)
    if a.steps < 1 or a.warmup < 0 or a.batch_size < 1:
        sys.exit("pytorch_synthetic.py: --steps, --warmup and --batch-size must be positive")
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    model = make_model(a.model, c, h, w, a.classes).to(dev, memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    # Four batches made on the device up front and cycled: the loop measures training alone.
    xs = [torch.randn(a.batch_size, c, h, w, device=dev).contiguous(memory_format=fmt) for _ in range(4)]
    ys = [torch.randint(0, a.classes, (a.batch_size,), device=dev) for _ in range(4)]
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    total = torch.zeros((), device=dev)

    def step(i):
        nonlocal total
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.bf16):
            loss = loss_fn(model(xs[i % 4]), ys[i % 4])
        loss.backward()
        opt.step()
        total += loss.detach()

    model.train()
    for i in range(a.warmup):
        step(i)
    sync()
    if a.profile > 0:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for i in range(a.profile):
                step(i)
            sync()
        print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=40,
                                        max_name_column_width=90))
        return
    t0 = time.perf_counter()
    for i in range(a.steps):
        step(i)
    sync()
    dt = time.perf_counter() - t0
    print(json.dumps({"impl": "pytorch-" + torch.__version__, "model": a.model, "input": a.input,
                      "device": str(dev), "bf16": a.bf16, "channels_last": a.channels_last,
                      "batch_size": a.batch_size, "threads": torch.get_num_threads(),
                      "steps": a.steps, "train_images_per_s": round(a.steps * a.batch_size / dt, 1),
                      "mean_loss": round(total.item() / (a.warmup + a.steps), 4)}), flush=True)


if __name__ == "__main__":
    main()

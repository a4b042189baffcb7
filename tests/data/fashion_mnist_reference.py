# Generates the reference numbers in fashion_mnist_test.cpp from Debian's dataset-fashion-mnist
# files, read independently of tandem (gzip + numpy). Run: /usr/bin/python3 fashion_mnist_reference.py
import gzip

import numpy as np

D = "/usr/share/datasets/fashion-mnist/"


def load(name, offset):
    return np.frombuffer(gzip.open(D + name).read(), dtype=np.uint8, offset=offset)


train = load("train-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28)
train_labels = load("train-labels-idx1-ubyte.gz", 8)
test = load("t10k-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28)
test_labels = load("t10k-labels-idx1-ubyte.gz", 8)
print("train labels[:10]", train_labels[:10].tolist())
print("test labels[:10]", test_labels[:10].tolist())
print("train image 0 sum", int(train[0].astype(np.int64).sum()))
print("train image 59999 sum", int(train[59999].astype(np.int64).sum()))
print("test image 0 sum", int(test[0].astype(np.int64).sum()))
print("train pixel sum", int(train.astype(np.int64).sum()))
print("train image 0 row 14", train[0, 14].tolist())
x = train.astype(np.float64) / 255
print("train mean", x.mean(), "std", x.std())
print("class counts", np.bincount(train_labels).tolist(), np.bincount(test_labels).tolist())

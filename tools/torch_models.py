"""tandem's named models (`--model seed-cnn|mlp|cnn|resnet8`) in PyTorch, with the same module
and parameter names, so a tandem state dict loads into them strictly. Shared by the test that
loads tandem's weights in PyTorch (tests/apps/check_pytorch_load.py) and the PyTorch side of the
benchmarks (bench/pytorch_synthetic.py). Constructor arguments are what tandem's registry derives
from the input shape: channels, height, width, classes (MLP: features, classes; ResNet8: channels,
classes).
"""
import torch, torch.nn as nn


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

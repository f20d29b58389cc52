"""Image classification: ResNet-50 (MLPerf, ImageNet shapes) and a ResNet-9 for CIFAR-10 (DAWNBench).

Also the ResNet trunk the detection workloads (:mod:`tracekit.workloads.detection`) build on.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tracekit.workloads.base import Task


def conv_bn(cin: int, cout: int, k: int = 3, stride: int = 1, relu: bool = True) -> nn.Sequential:
    layers = [nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False), nn.BatchNorm2d(cout)]
    if relu:
        layers.append(nn.ReLU(inplace=True))
    return nn.Sequential(*layers)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin: int, width: int, stride: int = 1):
        super().__init__()
        cout = width * self.expansion
        self.body = nn.Sequential(conv_bn(cin, width, 3, stride), conv_bn(width, cout, 3, relu=False))
        self.short = (conv_bn(cin, cout, 1, stride, relu=False)
                      if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
        return F.relu(self.body(x) + self.short(x))


class Bottleneck(nn.Module):
    """ResNet v1.5 bottleneck (stride on the 3x3 conv), as in the MLPerf reference."""

    expansion = 4

    def __init__(self, cin: int, width: int, stride: int = 1):
        super().__init__()
        cout = width * self.expansion
        self.body = nn.Sequential(conv_bn(cin, width, 1), conv_bn(width, width, 3, stride),
                                  conv_bn(width, cout, 1, relu=False))
        self.short = (conv_bn(cin, cout, 1, stride, relu=False)
                      if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
        return F.relu(self.body(x) + self.short(x))


def make_stage(block, cin: int, width: int, blocks: int, stride: int) -> tuple[nn.Sequential, int]:
    layers = []
    for i in range(blocks):
        layers.append(block(cin, width, stride if i == 0 else 1))
        cin = width * block.expansion
    return nn.Sequential(*layers), cin


class ResNetTrunk(nn.Module):
    """Stem (7x7/2 conv + 3x3/2 max-pool) and the stages ``layers`` (stride 1, then ``strides``)."""

    def __init__(self, block, layers: list[int], width: int, strides: list[int] | None = None):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width),
                                  nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        strides = strides or [1] + [2] * (len(layers) - 1)
        stages, cin = [], width
        for i, (n, s) in enumerate(zip(layers, strides)):
            stage, cin = make_stage(block, cin, width * 2 ** i, n, s)
            stages.append(stage)
        self.stages = nn.ModuleList(stages)
        self.out_channels = cin

    def forward(self, x):
        x = self.stem(x)
        for s in self.stages:
            x = s(x)
        return x


class ResNet(nn.Module):
    def __init__(self, block, layers: list[int], width: int, num_classes: int):
        super().__init__()
        self.trunk = ResNetTrunk(block, layers, width)
        self.fc = nn.Linear(self.trunk.out_channels, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.trunk(x), 1), 1))


class ResNet9(nn.Module):
    """The DAWNBench CIFAR-10 ResNet-9 (prep, 3 stages with 2 residual blocks, max-pool, linear)."""

    def __init__(self, widths: list[int], num_classes: int):
        super().__init__()
        w0, w1, w2, w3 = widths
        self.prep = conv_bn(3, w0)
        self.layer1 = nn.Sequential(conv_bn(w0, w1), nn.MaxPool2d(2))
        self.res1 = nn.Sequential(conv_bn(w1, w1), conv_bn(w1, w1))
        self.layer2 = nn.Sequential(conv_bn(w1, w2), nn.MaxPool2d(2))
        self.layer3 = nn.Sequential(conv_bn(w2, w3), nn.MaxPool2d(2))
        self.res3 = nn.Sequential(conv_bn(w3, w3), conv_bn(w3, w3))
        self.fc = nn.Linear(w3, num_classes, bias=False)

    def forward(self, x):
        x = self.layer1(self.prep(x))
        x = x + self.res1(x)
        x = self.layer3(self.layer2(x))
        x = x + self.res3(x)
        return self.fc(torch.flatten(F.adaptive_max_pool2d(x, 1), 1)) * 0.125


def _classification_task(model: nn.Module, s: dict, batch_size: int, device, lr: float,
                         label_smoothing: float) -> Task:
    def make_batch(gen):
        x = torch.randn(batch_size, 3, s["image"], s["image"], generator=gen, device=device)
        y = torch.randint(0, s["classes"], (batch_size,), generator=gen, device=device)
        return x, y

    def loss(m, batch):
        x, y = batch
        return F.cross_entropy(m(x), y, label_smoothing=label_smoothing)

    return Task(model=model, make_batch=make_batch, loss=loss,
                optimizer=lambda p: torch.optim.SGD(p, lr=lr, momentum=0.9, weight_decay=5e-5),
                convolutional=True)


def build_resnet50(s: dict, batch_size: int, device) -> Task:
    model = ResNet(Bottleneck, s["layers"], s["width"], s["classes"])
    return _classification_task(model, s, batch_size, device, lr=0.1, label_smoothing=0.1)


def build_resnet_cifar(s: dict, batch_size: int, device) -> Task:
    model = ResNet9(s["widths"], s["classes"])
    return _classification_task(model, s, batch_size, device, lr=0.4, label_smoothing=0.2)

"""The workload registry: names, suites, presets (shapes and default per-rank batch sizes).

Plain data, importable without torch (``tracekit workloads`` lists it). Each spec names the
builder in its family module (``module:function``); :func:`WorkloadSpec.build` imports it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import MappingProxyType

SUITES = ("mlperf", "dawnbench", "deepbench")
PRESETS = ("tiny", "full")


@dataclass(frozen=True)
class Preset:
    """Model shapes and the default per-rank batch size of one size preset."""

    batch_size: int
    shapes: dict

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.shapes.items() if k != "tables") + (
            f", tables={len(self.shapes['tables'])}" if "tables" in self.shapes else "")


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    suite: str
    task: str
    description: str
    builder: str  # "module:function" inside tracekit.workloads
    sample: str  # what one unit of the batch size is
    presets: dict = field(default_factory=dict)

    @property
    def default_batch_sizes(self) -> dict:
        return {k: p.batch_size for k, p in self.presets.items()}

    def build(self, preset: str, batch_size: int, device):
        """Build the :class:`~tracekit.workloads.base.Task` (imports torch)."""
        module, func = self.builder.split(":")
        fn = getattr(importlib.import_module(f"tracekit.workloads.{module}"), func)
        return fn(dict(self.presets[preset].shapes), batch_size, device)


# Criteo Kaggle (Display Advertising Challenge) categorical cardinalities, as in the DLRM repository.
_CRITEO_KAGGLE = [1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194,
                  27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572]
_DLRM_ROW_CAP = 1_000_000

_SPECS = [
    WorkloadSpec(
        "resnet50", "mlperf", "image classification",
        "ResNet-50 v1.5 on ImageNet shapes (224x224, 1000 classes), SGD momentum, label smoothing",
        "resnet:build_resnet50", "image",
        {"tiny": Preset(4, {"image": 32, "classes": 10, "layers": [1, 1, 1, 1], "width": 8}),
         "full": Preset(256, {"image": 224, "classes": 1000, "layers": [3, 4, 6, 3], "width": 64})}),
    WorkloadSpec(
        "ssd", "mlperf", "object detection",
        "SSD300 on a ResNet-34 trunk (38x38..1x1 maps, 8732 anchors, 81 classes), hard negative mining",
        "detection:build_ssd", "image",
        {"tiny": Preset(2, {"image": 64, "classes": 5, "layers": [1, 1, 1], "width": 8,
                            "extras": [[32, 2, 1], [32, 2, 1], [32, 2, 1]], "anchors": [4, 6, 6, 4],
                            "positive_fraction": 0.05}),
         "full": Preset(32, {"image": 300, "classes": 81, "layers": [3, 4, 6], "width": 64,
                             "extras": [[512, 2, 1], [512, 2, 1], [256, 2, 1], [256, 1, 0], [256, 1, 0]],
                             "anchors": [4, 6, 6, 6, 4, 4], "positive_fraction": 0.01})}),
    WorkloadSpec(
        "maskrcnn", "mlperf", "instance segmentation",
        "Reduced Mask R-CNN: ResNet-50-C4 trunk, RPN, top-k proposals (no NMS), box head, 28x28 mask head",
        "detection:build_maskrcnn", "image",
        {"tiny": Preset(2, {"image": [64, 96], "classes": 5, "layers": [1, 1, 1, 1], "width": 8,
                            "anchor_sizes": [16, 32], "anchor_ratios": [0.5, 1.0, 2.0], "gt_boxes": 2,
                            "rois": 8, "mask_rois": 4, "roi_size": 14, "mask_dim": 16}),
         "full": Preset(2, {"image": [800, 1344], "classes": 81, "layers": [3, 4, 6, 3], "width": 64,
                            "anchor_sizes": [32, 64, 128, 256, 512], "anchor_ratios": [0.5, 1.0, 2.0],
                            "gt_boxes": 16, "rois": 512, "mask_rois": 128, "roi_size": 14,
                            "mask_dim": 256})}),
    WorkloadSpec(
        "transformer", "mlperf", "translation",
        "Transformer-big encoder-decoder (6+6 layers, d=1024, 16 heads, FFN 4096, shared 33708 vocab)",
        "translation:build_transformer", "sentence pair",
        {"tiny": Preset(4, {"vocab": 100, "d_model": 32, "heads": 2, "ffn": 64, "layers": 1, "seq": 8}),
         "full": Preset(80, {"vocab": 33708, "d_model": 1024, "heads": 16, "ffn": 4096, "layers": 6,
                             "seq": 64})}),
    WorkloadSpec(
        "gnmt", "mlperf", "translation",
        "GNMT LSTM seq2seq: 4+4 layers of 1024, bidirectional first encoder layer, normalized Bahdanau attention",
        "translation:build_gnmt", "sentence pair",
        {"tiny": Preset(4, {"vocab": 64, "hidden": 16, "layers": 4, "seq": 6}),
         "full": Preset(128, {"vocab": 32320, "hidden": 1024, "layers": 4, "seq": 50})}),
    WorkloadSpec(
        "ncf", "mlperf", "recommendation",
        "NCF / NeuMF on MovieLens-20M shapes (138493 users, 26744 items, GMF 64, MLP 256-256-128-64)",
        "recommendation:build_ncf", "user-item pair",
        {"tiny": Preset(32, {"users": 100, "items": 50, "mf_dim": 8, "mlp": [16, 8]}),
         "full": Preset(65536, {"users": 138493, "items": 26744, "mf_dim": 64, "mlp": [256, 256, 128, 64]})}),
    WorkloadSpec(
        "dlrm", "mlperf", "recommendation",
        "DLRM: 13 dense + 26 categorical features, embeddings of 128, MLPs 512-256-128 / 1024-1024-512-256-1",
        "recommendation:build_dlrm", "click sample",
        {"tiny": Preset(16, {"dense": 13, "tables": [100, 50, 20, 10], "embedding_dim": 8,
                             "bottom_mlp": [16, 8], "top_mlp": [16, 1]}),
         "full": Preset(2048, {"dense": 13, "tables": [min(n, _DLRM_ROW_CAP) for n in _CRITEO_KAGGLE],
                               "embedding_dim": 128, "bottom_mlp": [512, 256, 128],
                               "top_mlp": [1024, 1024, 512, 256, 1]})}),
    WorkloadSpec(
        "minigo", "mlperf", "reinforcement learning",
        "MiniGo / AlphaGo Zero policy-value net: 19x19 board, 17 planes, 256 filters, 19 residual blocks",
        "minigo:build_minigo", "position",
        {"tiny": Preset(8, {"board": 9, "planes": 17, "filters": 16, "blocks": 2, "value_fc": 16}),
         "full": Preset(256, {"board": 19, "planes": 17, "filters": 256, "blocks": 19, "value_fc": 256})}),
    WorkloadSpec(
        "bert", "mlperf", "language modeling",
        "BERT-large pre-training: 24 layers, hidden 1024, 16 heads, seq 512, 76 masked positions, MLM + NSP",
        "bert:build_bert", "sequence",
        {"tiny": Preset(4, {"vocab": 100, "hidden": 32, "layers": 2, "heads": 2, "ffn": 64, "seq": 16,
                            "predictions": 3}),
         "full": Preset(8, {"vocab": 30522, "hidden": 1024, "layers": 24, "heads": 16, "ffn": 4096,
                            "seq": 512, "predictions": 76})}),
    WorkloadSpec(
        "resnet_cifar", "dawnbench", "image classification",
        "DAWNBench CIFAR-10 ResNet-9 (32x32, widths 64-128-256-512), SGD momentum",
        "resnet:build_resnet_cifar", "image",
        {"tiny": Preset(8, {"image": 16, "classes": 10, "widths": [8, 16, 32, 64]}),
         "full": Preset(512, {"image": 32, "classes": 10, "widths": [64, 128, 256, 512]})}),
    WorkloadSpec(
        "gemm", "deepbench", "kernel",
        "GEMM C = A W (M x K times K x N) and its weight gradient; the batch size is M",
        "deepbench:build_gemm", "row of A (M)",
        {"tiny": Preset(64, {"k": 64, "n": 64}),
         "full": Preset(4096, {"k": 4096, "n": 4096})}),
    WorkloadSpec(
        "conv", "deepbench", "kernel",
        "One 3x3 convolution layer, forward + data/weight gradients (ResNet conv3 shape: 28x28, 128->128)",
        "deepbench:build_conv", "image",
        {"tiny": Preset(2, {"c": 4, "k": 4, "h": 8, "w": 8, "r": 3, "stride": 1, "pad": 1}),
         "full": Preset(16, {"c": 128, "k": 128, "h": 28, "w": 28, "r": 3, "stride": 1, "pad": 1})}),
    WorkloadSpec(
        "rnn", "deepbench", "kernel",
        "One LSTM layer over a sequence, forward + backward (hidden 1024, 25 time steps)",
        "deepbench:build_rnn", "sequence",
        {"tiny": Preset(4, {"input": 16, "hidden": 16, "seq": 5}),
         "full": Preset(32, {"input": 1024, "hidden": 1024, "seq": 25})}),
    WorkloadSpec(
        "allreduce", "deepbench", "kernel",
        "All-reduce of one float32 gradient buffer (64 Mi elements = 256 MiB in full) across ranks",
        "deepbench:build_allreduce", "step (batch size unused)",
        {"tiny": Preset(1, {"elements": 1024}),
         "full": Preset(1, {"elements": 64 * 2**20})}),
]

REGISTRY: MappingProxyType = MappingProxyType({s.name: s for s in _SPECS})

"""Object detection (SSD on a ResNet-34 trunk) and instance segmentation (a reduced Mask R-CNN).

Both are trained on synthetic targets that are already assigned to anchors / regions of interest:
the box matching (IoU), non-maximum suppression and target encoding that the MLPerf references
run on the CPU or in custom kernels are not part of the step. See docs/workloads.md.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from tracekit.workloads.base import Task
from tracekit.workloads.resnet import BasicBlock, Bottleneck, ResNetTrunk, conv_bn, make_stage


def _conv_out(n: int, k: int, s: int, p: int) -> int:
    return (n + 2 * p - k) // s + 1


def trunk_hw(h: int, w: int, strides: list[int]) -> tuple[int, int]:
    """Feature map size after a :class:`ResNetTrunk` with stage ``strides`` (3x3 convs, pad 1)."""
    out = []
    for n in (h, w):
        n = _conv_out(_conv_out(n, 7, 2, 3), 3, 2, 1)
        for s in strides:
            n = _conv_out(n, 3, s, 1)
        out.append(n)
    return out[0], out[1]


# --------------------------------------------------------------------------------------- SSD
class SSD(nn.Module):
    """SSD300 with the MLPerf ResNet-34 backbone: stages 1-3 (the third with stride 1, giving a
    38x38 map at 300x300), extra layers down to 1x1, and 3x3 conv heads for boxes and classes."""

    STRIDES = [1, 2, 1]

    def __init__(self, s: dict):
        super().__init__()
        self.trunk = ResNetTrunk(BasicBlock, s["layers"], s["width"], strides=self.STRIDES)
        chans = [self.trunk.out_channels]
        extras = []
        for c, stride, pad in s["extras"]:
            extras.append(nn.Sequential(conv_bn(chans[-1], c // 2, 1),
                                        nn.Conv2d(c // 2, c, 3, stride, pad, bias=False),
                                        nn.BatchNorm2d(c), nn.ReLU(inplace=True)))
            chans.append(c)
        self.extras = nn.ModuleList(extras)
        self.classes = s["classes"]
        self.loc = nn.ModuleList(nn.Conv2d(c, a * 4, 3, padding=1) for c, a in zip(chans, s["anchors"]))
        self.conf = nn.ModuleList(nn.Conv2d(c, a * self.classes, 3, padding=1)
                                  for c, a in zip(chans, s["anchors"]))

    def forward(self, x):
        feats = [self.trunk(x)]
        for e in self.extras:
            feats.append(e(feats[-1]))
        b = x.shape[0]
        loc = torch.cat([h(f).permute(0, 2, 3, 1).reshape(b, -1, 4) for h, f in zip(self.loc, feats)], 1)
        conf = torch.cat([h(f).permute(0, 2, 3, 1).reshape(b, -1, self.classes)
                          for h, f in zip(self.conf, feats)], 1)
        return loc, conf


def ssd_num_anchors(s: dict) -> int:
    h, _ = trunk_hw(s["image"], s["image"], SSD.STRIDES)
    sizes = [h]
    for _, stride, pad in s["extras"]:
        sizes.append(_conv_out(sizes[-1], 3, stride, pad))
    return sum(n * n * a for n, a in zip(sizes, s["anchors"]))


def build_ssd(s: dict, batch_size: int, device) -> Task:
    model = SSD(s)
    n_anchors = ssd_num_anchors(s)

    def make_batch(gen):
        x = torch.randn(batch_size, 3, s["image"], s["image"], generator=gen, device=device)
        pos = torch.rand(batch_size, n_anchors, generator=gen, device=device) < s["positive_fraction"]
        cls = torch.randint(1, s["classes"], (batch_size, n_anchors), generator=gen, device=device)
        labels = torch.where(pos, cls, torch.zeros_like(cls))
        boxes = torch.randn(batch_size, n_anchors, 4, generator=gen, device=device) * 0.5
        return x, labels, boxes

    def loss(m, batch):
        x, labels, boxes = batch
        loc, conf = m(x)
        loc, conf = loc.float(), conf.float()
        pos = labels > 0
        num_pos = pos.sum(1)
        loc_loss = (F.smooth_l1_loss(loc, boxes, reduction="none").sum(-1) * pos).sum(1)
        ce = F.cross_entropy(conf.transpose(1, 2), labels, reduction="none")  # [B, anchors]
        # Hard negative mining: keep the 3 * num_pos negatives with the highest loss.
        neg_ce = ce.detach().masked_fill(pos, 0.0)
        rank = neg_ce.argsort(1, descending=True).argsort(1)
        neg = rank < (3 * num_pos).unsqueeze(1)
        conf_loss = (ce * (pos | neg)).sum(1)
        return ((loc_loss + conf_loss) / num_pos.clamp(min=1)).mean()

    return Task(model=model, make_batch=make_batch, loss=loss,
                optimizer=lambda p: torch.optim.SGD(p, lr=2.5e-3, momentum=0.9, weight_decay=5e-4),
                convolutional=True)


# --------------------------------------------------------------------------------- Mask R-CNN
def roi_align(feat, boxes, out: int, img_h: int, img_w: int):
    """Bilinear RoI features (one sample per bin, plain ``grid_sample``): ``feat`` [B, C, H, W],
    ``boxes`` [B, R, 4] as (x1, y1, x2, y2) image pixels -> [B * R, C, out, out]."""
    b, r = boxes.shape[:2]
    t = (torch.arange(out, device=boxes.device, dtype=torch.float32) + 0.5) / out
    x1, y1, x2, y2 = boxes.float().unbind(-1)
    gx = (x1[..., None] + (x2 - x1)[..., None] * t) / img_w * 2 - 1  # [B, R, out]
    gy = (y1[..., None] + (y2 - y1)[..., None] * t) / img_h * 2 - 1
    grid = torch.stack(torch.broadcast_tensors(gx[:, :, None, :], gy[:, :, :, None]), -1)
    grid = grid.reshape(b, r * out, out, 2)
    o = F.grid_sample(feat.float(), grid, align_corners=False)  # [B, C, R * out, out]
    c = feat.shape[1]
    return o.reshape(b, c, r, out, out).transpose(1, 2).reshape(b * r, c, out, out)


def make_anchors(fh: int, fw: int, stride: int, sizes, ratios, device):
    """Anchors [fh * fw * A, 4] in (row, column, anchor) order, A = len(sizes) * len(ratios)."""
    base = []
    for size in sizes:
        for ratio in ratios:
            w, h = size / math.sqrt(ratio), size * math.sqrt(ratio)
            base.append([-w / 2, -h / 2, w / 2, h / 2])
    base = torch.tensor(base, device=device)
    ys = (torch.arange(fh, device=device, dtype=torch.float32) + 0.5) * stride
    xs = (torch.arange(fw, device=device, dtype=torch.float32) + 0.5) * stride
    cy, cx = torch.meshgrid(ys, xs, indexing="ij")
    shifts = torch.stack([cx, cy, cx, cy], -1).reshape(-1, 1, 4)
    return (shifts + base).reshape(-1, 4)


def decode(anchors, deltas):
    wa, ha = anchors[:, 2] - anchors[:, 0], anchors[:, 3] - anchors[:, 1]
    cxa, cya = anchors[:, 0] + wa / 2, anchors[:, 1] + ha / 2
    dx, dy, dw, dh = deltas.unbind(-1)
    clip = math.log(1000.0 / 16)
    cx, cy = dx * wa + cxa, dy * ha + cya
    w, h = torch.exp(dw.clamp(max=clip)) * wa, torch.exp(dh.clamp(max=clip)) * ha
    return torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], -1)


class MaskRCNN(nn.Module):
    """Mask R-CNN, ResNet-C4 variant: ResNet stages 1-3 as the shared trunk (stride 16), an RPN
    head, top-k proposals (no NMS), RoI features by bilinear sampling, ResNet stage 4 as the box
    head, and the four-conv + deconvolution mask head at 28x28."""

    STRIDES = [1, 2, 2]

    def __init__(self, s: dict):
        super().__init__()
        self.s = s
        self.trunk = ResNetTrunk(Bottleneck, s["layers"][:3], s["width"], strides=self.STRIDES)
        c = self.trunk.out_channels
        a = len(s["anchor_sizes"]) * len(s["anchor_ratios"])
        self.rpn_conv = nn.Conv2d(c, c, 3, padding=1)
        self.rpn_cls = nn.Conv2d(c, a, 1)
        self.rpn_box = nn.Conv2d(c, 4 * a, 1)
        self.res5, c5 = make_stage(Bottleneck, c, s["width"] * 8, s["layers"][3], 2)
        self.cls = nn.Linear(c5, s["classes"])
        self.box = nn.Linear(c5, 4 * s["classes"])
        md = s["mask_dim"]
        convs = []
        for i in range(4):
            convs += [nn.Conv2d(c if i == 0 else md, md, 3, padding=1), nn.ReLU(inplace=True)]
        self.mask_head = nn.Sequential(*convs, nn.ConvTranspose2d(md, md, 2, 2), nn.ReLU(inplace=True),
                                       nn.Conv2d(md, s["classes"], 1))
        fh, fw = trunk_hw(s["image"][0], s["image"][1], self.STRIDES)
        self.register_buffer("anchors", make_anchors(fh, fw, 16, s["anchor_sizes"], s["anchor_ratios"],
                                                     None), persistent=False)

    def forward(self, images, gt_boxes):
        s = self.s
        b = images.shape[0]
        img_h, img_w = s["image"]
        feat = self.trunk(images)
        a = self.rpn_cls.out_channels
        fh, fw = feat.shape[-2:]
        r = F.relu(self.rpn_conv(feat))
        obj = self.rpn_cls(r).permute(0, 2, 3, 1).reshape(b, -1)
        deltas = self.rpn_box(r).view(b, a, 4, fh, fw).permute(0, 3, 4, 1, 2).reshape(b, -1, 4)
        with torch.no_grad():
            boxes = decode(self.anchors, deltas.detach().float())
            boxes = torch.stack([boxes[..., 0].clamp(0, img_w), boxes[..., 1].clamp(0, img_h),
                                 boxes[..., 2].clamp(0, img_w), boxes[..., 3].clamp(0, img_h)], -1)
            n_prop = s["rois"] - gt_boxes.shape[1]
            top = obj.detach().topk(n_prop, dim=1).indices
            props = torch.gather(boxes, 1, top[..., None].expand(-1, -1, 4))
            rois = torch.cat([gt_boxes, props], 1)  # ground truth first, as the reference adds it
        box_feat = roi_align(feat, rois, s["roi_size"], img_h, img_w).to(feat.dtype)
        box_feat = box_feat.contiguous(memory_format=torch.channels_last) \
            if feat.is_contiguous(memory_format=torch.channels_last) else box_feat
        h = self.res5(box_feat).mean((2, 3))
        mask_feat = roi_align(feat, rois[:, : s["mask_rois"]], s["roi_size"], img_h, img_w).to(feat.dtype)
        return obj, deltas, self.cls(h), self.box(h).view(-1, s["classes"], 4), self.mask_head(mask_feat)


def build_maskrcnn(s: dict, batch_size: int, device) -> Task:
    model = MaskRCNN(s)
    img_h, img_w = s["image"]
    n_anchors = model.anchors.shape[0]
    g, r, m_rois, ms = s["gt_boxes"], s["rois"], s["mask_rois"], 2 * s["roi_size"]

    def make_batch(gen):
        def rand(*shape):
            return torch.rand(*shape, generator=gen, device=device)

        x = torch.randn(batch_size, 3, img_h, img_w, generator=gen, device=device)
        xy = rand(batch_size, g, 2) * 0.7
        wh = 0.1 + rand(batch_size, g, 2) * 0.2
        scale = torch.tensor([img_w, img_h], device=device, dtype=torch.float32)
        gt = torch.cat([xy * scale, (xy + wh) * scale], -1)
        # RPN: 256 sampled anchors per image (half positive at most), the rest ignored (-1).
        u = rand(batch_size, n_anchors)
        sampled = u < 256 / n_anchors
        rpn_labels = torch.where(sampled, (u < 64 / n_anchors).long(), torch.full_like(u, -1, dtype=torch.long))
        rpn_targets = torch.randn(batch_size, n_anchors, 4, generator=gen, device=device) * 0.5
        # RoIs: the first mask_rois are foreground (they get masks); a quarter of the rest too.
        cls = torch.randint(1, s["classes"], (batch_size, r), generator=gen, device=device)
        fg = rand(batch_size, r) < 0.25
        fg[:, :m_rois] = True
        roi_labels = torch.where(fg, cls, torch.zeros_like(cls))
        roi_targets = torch.randn(batch_size, r, 4, generator=gen, device=device) * 0.5
        masks = (rand(batch_size, m_rois, ms, ms) < 0.5).float()
        return x, gt, rpn_labels, rpn_targets, roi_labels, roi_targets, masks

    def loss(m, batch):
        x, gt, rpn_labels, rpn_targets, roi_labels, roi_targets, masks = batch
        obj, deltas, cls, box, mask = m(x, gt)
        valid = rpn_labels >= 0
        pos = rpn_labels == 1
        n_valid = valid.sum().clamp(min=1)
        rpn_cls = F.binary_cross_entropy_with_logits(obj.float()[valid], rpn_labels[valid].float())
        rpn_box = F.smooth_l1_loss(deltas.float()[pos], rpn_targets[pos], beta=1 / 9,
                                   reduction="sum") / n_valid
        labels = roi_labels.flatten()
        cls_loss = F.cross_entropy(cls.float(), labels)
        fg = labels > 0
        box_loss = F.smooth_l1_loss(box.float()[fg, labels[fg]], roi_targets.flatten(0, 1)[fg],
                                    reduction="sum") / labels.numel()
        mask_labels = roi_labels[:, :m_rois].flatten()
        mask_logits = mask.float()[torch.arange(mask_labels.numel(), device=mask.device), mask_labels]
        mask_loss = F.binary_cross_entropy_with_logits(mask_logits, masks.flatten(0, 1))
        return rpn_cls + rpn_box + cls_loss + box_loss + mask_loss

    return Task(model=model, make_batch=make_batch, loss=loss,
                optimizer=lambda p: torch.optim.SGD(p, lr=0.02, momentum=0.9, weight_decay=1e-4),
                convolutional=True)

"""A single-stage object detector on synthetic images, in the style of the public RetinaNet /
SSD / FCOS re-implementations that avoid torchvision: anchors on a feature-map grid from
torch.meshgrid(indexing="ij") and stacked sizes, a pairwise IoU matrix written with
broadcasting (torch.max/torch.min of corners, clamp(min=0)), anchor matching by max/argmax over
the IoU matrix with each ground-truth box forcing its best anchor (index_put_/scatter), box
regression targets encoded as (dx, dy, log dw, log dh) and decoded back, a conv head with a
prior-probability bias init (-log((1 - pi) / pi)), the sigmoid focal loss written by hand
(F.binary_cross_entropy_with_logits with reduction="none", torch.where for alpha), a smooth-L1
and a GIoU box loss over positive anchors, AdamW and a MultiStepLR schedule, then
inference: scores by sigmoid, topk candidates, greedy non-maximum suppression written with
sort and a keep mask, batched NMS by offsetting boxes per class, and precision/recall at IoU
0.5. Weights and data from NumPy: the run is the same on both libraries. Written against
`torch`; the test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <recall>."""

import argparse
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=80)
args = parser.parse_args(sys.argv[1:])
rng = np.random.default_rng(0)
S, STRIDE, NUM_CLASSES = 32, 4, 2


def make_scene():
    img = rng.normal(0, 0.1, (1, S, S)).astype(np.float32)
    boxes, labels = [], []
    for _ in range(int(rng.integers(1, 3))):
        w, h = rng.integers(6, 12, 2)
        x0, y0 = rng.integers(0, S - w), rng.integers(0, S - h)
        cls = int(rng.integers(0, NUM_CLASSES))
        img[0, y0:y0 + h, x0:x0 + w] += 1.0 if cls == 0 else -1.0  # bright or dark squares
        boxes.append([x0, y0, x0 + w, y0 + h])
        labels.append(cls)
    return img, np.array(boxes, np.float32), np.array(labels, np.int64)


scenes = [make_scene() for _ in range(96)]
images = torch.from_numpy(np.stack([s[0] for s in scenes]))


def make_anchors():
    g = S // STRIDE
    cy, cx = torch.meshgrid(torch.arange(g, dtype=torch.float32),
                            torch.arange(g, dtype=torch.float32), indexing="ij")
    centers = torch.stack([cx, cy], dim=-1).reshape(-1, 1, 2) * STRIDE + STRIDE / 2
    sizes = torch.tensor([[6.0, 6.0], [9.0, 9.0], [12.0, 8.0], [8.0, 12.0]])
    return torch.cat([centers - sizes / 2, centers + sizes / 2], dim=-1).reshape(-1, 4)


def box_area(b):
    return (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])


def box_iou(a, b):
    lt = torch.max(a[:, None, :2], b[None, :, :2])
    rb = torch.min(a[:, None, 2:], b[None, :, 2:])
    inter = (rb - lt).clamp(min=0).prod(dim=2)
    return inter / (box_area(a)[:, None] + box_area(b)[None, :] - inter)


def encode(gt, anchors):
    aw, ah = anchors[:, 2] - anchors[:, 0], anchors[:, 3] - anchors[:, 1]
    ax, ay = anchors[:, 0] + 0.5 * aw, anchors[:, 1] + 0.5 * ah
    gw, gh = gt[:, 2] - gt[:, 0], gt[:, 3] - gt[:, 1]
    gx, gy = gt[:, 0] + 0.5 * gw, gt[:, 1] + 0.5 * gh
    return torch.stack([(gx - ax) / aw, (gy - ay) / ah, torch.log(gw / aw), torch.log(gh / ah)], 1)


def decode(deltas, anchors):
    aw, ah = anchors[:, 2] - anchors[:, 0], anchors[:, 3] - anchors[:, 1]
    ax, ay = anchors[:, 0] + 0.5 * aw, anchors[:, 1] + 0.5 * ah
    dw = deltas[:, 2].clamp(max=math.log(1000.0 / 16))
    dh = deltas[:, 3].clamp(max=math.log(1000.0 / 16))
    x, y = ax + deltas[:, 0] * aw, ay + deltas[:, 1] * ah
    w, h = aw * torch.exp(dw), ah * torch.exp(dh)
    return torch.stack([x - w / 2, y - h / 2, x + w / 2, y + h / 2], dim=1)


def match(anchors, gt, fg=0.5, bg=0.4):
    iou = box_iou(anchors, gt)  # (A, G)
    best_iou, best_gt = iou.max(dim=1)
    assign = torch.full((anchors.size(0),), -1, dtype=torch.long)  # -1: ignore
    assign[best_iou < bg] = -2  # background
    fg_mask = best_iou >= fg
    assign[fg_mask] = best_gt[fg_mask]
    forced = iou.argmax(dim=0)  # each box keeps its best anchor
    assign.index_put_((forced,), torch.arange(gt.size(0)))
    return assign


def giou_loss(p, t):
    inter = (torch.min(p[:, 2:], t[:, 2:]) - torch.max(p[:, :2], t[:, :2])).clamp(min=0).prod(1)
    union = box_area(p) + box_area(t) - inter
    hull = (torch.max(p[:, 2:], t[:, 2:]) - torch.min(p[:, :2], t[:, :2])).prod(1)
    return (1 - inter / union + (hull - union) / hull).mean()


def sigmoid_focal_loss(logits, targets, alpha=0.25, gamma=2.0):
    p = torch.sigmoid(logits)
    ce = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    p_t = p * targets + (1 - p) * (1 - targets)
    loss = ce * (1 - p_t) ** gamma
    return torch.where(targets == 1, alpha * loss, (1 - alpha) * loss)


class Detector(nn.Module):
    def __init__(self, num_anchors=4, prior=0.05):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
                                      nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                                      nn.MaxPool2d(2), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU())
        self.cls_head = nn.Conv2d(32, num_anchors * NUM_CLASSES, 3, padding=1)
        self.box_head = nn.Conv2d(32, num_anchors * 4, 3, padding=1)
        self.prior_bias = -math.log((1 - prior) / prior)

    def forward(self, x):
        f = self.backbone(x)
        n = x.size(0)
        cls = self.cls_head(f).permute(0, 2, 3, 1).reshape(n, -1, NUM_CLASSES)
        box = self.box_head(f).permute(0, 2, 3, 1).reshape(n, -1, 4)
        return cls, box


model = Detector()
r = np.random.default_rng(1)
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.dim() > 1:
            p.copy_(torch.from_numpy(r.normal(0, math.sqrt(2.0 / p[0].numel()), tuple(p.shape))
                                     .astype(np.float32)))
        else:
            p.zero_()
    model.cls_head.weight.mul_(0.1)
    nn.init.constant_(model.cls_head.bias, model.prior_bias)

anchors = make_anchors()
print(f"anchors {tuple(anchors.shape)}, first {anchors[0].tolist()}, last {anchors[-1].tolist()}")
gt0 = torch.from_numpy(scenes[0][1])
enc = encode(gt0, anchors[:len(gt0)])
print(f"decode(encode(gt)) == gt: {torch.allclose(decode(enc, anchors[:len(gt0)]), gt0, atol=1e-4)}")

targets = []
for img, boxes, labels in scenes:
    gt = torch.from_numpy(boxes)
    assign = match(anchors, gt)
    cls_t = torch.zeros(anchors.size(0), NUM_CLASSES)
    pos = assign >= 0
    cls_t[pos] = F.one_hot(torch.from_numpy(labels)[assign[pos]], NUM_CLASSES).float()
    targets.append((cls_t, assign, gt))
npos = [int((t[1] >= 0).sum()) for t in targets[:6]]
print(f"positive anchors per image: {npos}, ignored {int((targets[0][1] == -1).sum())}")

opt = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=1e-4)
sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[60, 72], gamma=0.1)
losses = []
for step in range(args.steps):
    i = (step * 16) % 96
    cls_out, box_out = model(images[i:i + 16])
    cls_loss = box_loss = giou = 0.0
    num_pos = 0
    for b in range(16):
        cls_t, assign, gt = targets[i + b]
        valid = assign != -1
        cls_loss = cls_loss + sigmoid_focal_loss(cls_out[b][valid], cls_t[valid]).sum()
        pos = assign >= 0
        num_pos += int(pos.sum())
        reg_t = encode(gt[assign[pos]], anchors[pos])
        box_loss = box_loss + F.smooth_l1_loss(box_out[b][pos], reg_t, beta=1 / 9,
                                               reduction="sum")
        giou = giou + giou_loss(decode(box_out[b][pos], anchors[pos]), gt[assign[pos]])
    loss = (cls_loss + box_loss) / max(num_pos, 1) + giou / 16
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:2d} loss {loss.item():.4f} (cls {cls_loss.item() / num_pos:.4f} "
              f"box {box_loss.item() / num_pos:.4f} giou {giou.item() / 16:.4f}) "
              f"lr {sched.get_last_lr()[0]:.4f}")


def nms(boxes, scores, thresh):
    order = scores.argsort(descending=True)
    boxes = boxes[order]
    iou = box_iou(boxes, boxes)
    keep = torch.ones(len(order), dtype=torch.bool)
    for k in range(len(order)):
        if keep[k]:
            suppress = iou[k] > thresh
            suppress[:k + 1] = False
            keep &= ~suppress
    return order[keep]


def batched_nms(boxes, scores, classes, thresh):
    if boxes.numel() == 0:
        return torch.empty(0, dtype=torch.long)
    offsets = classes.to(boxes.dtype) * (boxes.max() + 1)
    return nms(boxes + offsets[:, None], scores, thresh)


model.eval()
tp = fp = total = 0
with torch.no_grad():
    cls_out, box_out = model(images[:32])
    for b in range(32):
        scores, classes = cls_out[b].sigmoid().max(dim=1)
        top_scores, top_idx = scores.topk(20)
        keep_thr = top_scores > 0.2
        cand = top_idx[keep_thr]
        boxes = decode(box_out[b][cand], anchors[cand])
        kept = batched_nms(boxes, top_scores[keep_thr], classes[cand], 0.5)
        det, det_cls = boxes[kept], classes[cand][kept]
        gt, labels = torch.from_numpy(scenes[b][1]), torch.from_numpy(scenes[b][2])
        total += len(gt)
        if len(det):
            iou = box_iou(det, gt)
            best, which = iou.max(dim=1)
            hit = (best >= 0.5) & (det_cls == labels[which])
            matched = torch.unique(which[hit])
            tp += len(matched)
            fp += int((~hit).sum()) + int(hit.sum()) - len(matched)
        if b < 3:
            print(f"image {b}: {len(det)} detections, classes {det_cls.tolist()}, "
                  f"gt classes {labels.tolist()}")
precision, recall = tp / max(tp + fp, 1), tp / total
print(f"precision {precision:.3f} recall {recall:.3f} at IoU 0.5")
print(f"RESULT {losses[0]:.4f} {np.mean(losses[-5:]):.4f} {recall:.4f}")

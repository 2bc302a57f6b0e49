"""Search / iterative-algorithm loops ported from public code (group "search").

Each module keeps its origin's loop as written there: the ``while``/``for`` shape, ``break`` and
``return`` inside the loop, lists grown by ``append``, in-place writes, ``.item()``, state that
shrinks. Adaptations (numpy -> torch, attributes -> locals, prints dropped) are named in each
docstring. The held-out sets are chosen so that every exit of every loop is taken; ``exits``
says which, and ``python3 -m tests.wild_loops.measure --group search --exits`` re-checks that in eager.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.wild_loops.harness import LoopCase


def _t(rows, dtype=torch.float32):
    return torch.tensor(rows, dtype=dtype)


# ---------------------------------------------------------------------------------------------
# Detection post-processing
# ---------------------------------------------------------------------------------------------

class NmsArgsortStack(nn.Module):
    """Tutorial NMS: ``order = argsort(scores, descending=True)``; ``while order.numel() > 0``;
    keep ``order[0]``; ``if order.numel() == 1: break``; ``order = remaining[iou <= thr]``
    (``order`` shrinks to empty); ``torch.stack(keep)``.

    Origin: the pure-torch ``_nms`` classmethod + ``_box_iou`` of a public detector wrapper
    (code search hit for ``while order.numel() > 0:``, ``keep.append(current)`` ...
    ``return torch.stack(keep)``); the same loop as py-faster-rcnn ``lib/nms/py_cpu_nms.py``
    written in torch."""

    _IOU_THRESHOLD = 0.5

    def forward(self, boxes, scores):
        return self._nms(boxes, scores)

    @classmethod
    def _nms(cls, boxes, scores):
        if boxes.numel() == 0:
            return torch.empty((0,), dtype=torch.long, device=boxes.device)

        order = torch.argsort(scores, descending=True)
        keep = []
        while order.numel() > 0:
            current = order[0]
            keep.append(current)
            if order.numel() == 1:
                break
            remaining = order[1:]
            iou = cls._box_iou(boxes[current].unsqueeze(0), boxes[remaining]).squeeze(0)
            order = remaining[iou <= cls._IOU_THRESHOLD]
        return torch.stack(keep)

    @staticmethod
    def _box_iou(boxes1, boxes2):
        if boxes1.numel() == 0 or boxes2.numel() == 0:
            return boxes1.new_zeros((boxes1.shape[0], boxes2.shape[0]))
        top_left = torch.maximum(boxes1[:, None, :2], boxes2[:, :2])
        bottom_right = torch.minimum(boxes1[:, None, 2:], boxes2[:, 2:])
        wh = (bottom_right - top_left).clamp(min=0)
        inter = wh[..., 0] * wh[..., 1]
        area1 = (boxes1[:, 2] - boxes1[:, 0]) * (boxes1[:, 3] - boxes1[:, 1])
        area2 = (boxes2[:, 2] - boxes2[:, 0]) * (boxes2[:, 3] - boxes2[:, 1])
        return inter / (area1[:, None] + area2 - inter)


class NmsSortItemList(nn.Module):
    """The classic blog/tutorial NMS ("浅谈NMS的多种实现", copied into many repos, e.g. the
    ``normal_nms`` / ``box_nms`` hits of a code search): ``_, order = scores.sort(0,
    descending=True)``; ``i = order.item()`` / ``order[0].item()`` appended to a list of ints;
    ``idx = (iou <= threshold).nonzero().squeeze()``; ``if idx.numel() == 0: break``;
    ``order = order[idx + 1]``; ``return torch.LongTensor(keep)``."""

    def forward(self, bboxes, scores):
        threshold = 0.5
        x1 = bboxes[:, 0]
        y1 = bboxes[:, 1]
        x2 = bboxes[:, 2]
        y2 = bboxes[:, 3]
        areas = (x2 - x1) * (y2 - y1)
        _, order = scores.sort(0, descending=True)
        keep = []
        while order.numel() > 0:
            if order.numel() == 1:
                i = order.item()
                keep.append(i)
                break
            else:
                i = order[0].item()
                keep.append(i)
            xx1 = x1[order[1:]].clamp(min=x1[i])
            yy1 = y1[order[1:]].clamp(min=y1[i])
            xx2 = x2[order[1:]].clamp(max=x2[i])
            yy2 = y2[order[1:]].clamp(max=y2[i])
            inter = (xx2 - xx1).clamp(min=0) * (yy2 - yy1).clamp(min=0)
            iou = inter / (areas[i] + areas[order[1:]] - inter)
            idx = (iou <= threshold).nonzero().squeeze()
            if idx.numel() == 0:
                break
            order = order[idx + 1]
        return torch.LongTensor(keep)


def _ssd_nms(boxes, scores, overlap=0.5, top_k=200):
    # amdegroot/ssd.pytorch layers/box_utils.py nms, as written (out=, resize_as_, keep[count] = i)
    keep = scores.new(scores.size(0)).zero_().long()
    if boxes.numel() == 0:
        return keep
    x1 = boxes[:, 0]
    y1 = boxes[:, 1]
    x2 = boxes[:, 2]
    y2 = boxes[:, 3]
    area = torch.mul(x2 - x1, y2 - y1)
    v, idx = scores.sort(0)  # sort in ascending order
    idx = idx[-top_k:]  # indices of the top-k largest vals
    xx1 = boxes.new()
    yy1 = boxes.new()
    xx2 = boxes.new()
    yy2 = boxes.new()
    w = boxes.new()
    h = boxes.new()

    count = 0
    while idx.numel() > 0:
        i = idx[-1]  # index of current largest val
        keep[count] = i
        count += 1
        if idx.size(0) == 1:
            break
        idx = idx[:-1]  # remove kept element from view
        torch.index_select(x1, 0, idx, out=xx1)
        torch.index_select(y1, 0, idx, out=yy1)
        torch.index_select(x2, 0, idx, out=xx2)
        torch.index_select(y2, 0, idx, out=yy2)
        xx1 = torch.clamp(xx1, min=x1[i])
        yy1 = torch.clamp(yy1, min=y1[i])
        xx2 = torch.clamp(xx2, max=x2[i])
        yy2 = torch.clamp(yy2, max=y2[i])
        w.resize_as_(xx2)
        h.resize_as_(yy2)
        w = xx2 - xx1
        h = yy2 - yy1
        w = torch.clamp(w, min=0.0)
        h = torch.clamp(h, min=0.0)
        inter = w * h
        rem_areas = torch.index_select(area, 0, idx)  # load remaining areas)
        union = (rem_areas - inter) + area[i]
        IoU = inter / union  # store result in iou
        idx = idx[IoU.le(overlap)]
    return keep, count


class SsdNms(nn.Module):
    """amdegroot/ssd.pytorch ``layers/box_utils.py`` ``nms`` (``keep[count] = i; count += 1``,
    ``torch.index_select(..., out=xx1)``, ``w.resize_as_``, ``idx = idx[IoU.le(overlap)]``) and
    the use in ``layers/functions/detection.py`` ``Detect.forward``:
    ``torch.cat((scores[ids[:count]].unsqueeze(1), boxes[ids[:count]]), 1)``."""

    def forward(self, boxes, scores):
        ids, count = _ssd_nms(boxes, scores, 0.45, 200)
        return torch.cat((scores[ids[:count]].unsqueeze(1), boxes[ids[:count]]), 1)


def _yolo_bbox_iou(box1, box2, x1y1x2y2=True):
    # ultralytics/yolov3 (2019) utils/utils.py bbox_iou
    box2 = box2.t()
    b1_x1, b1_y1, b1_x2, b1_y2 = box1[0], box1[1], box1[2], box1[3]
    b2_x1, b2_y1, b2_x2, b2_y2 = box2[0], box2[1], box2[2], box2[3]
    inter_area = (torch.min(b1_x2, b2_x2) - torch.max(b1_x1, b2_x1)).clamp(0) * \
                 (torch.min(b1_y2, b2_y2) - torch.max(b1_y1, b2_y1)).clamp(0)
    union_area = ((b1_x2 - b1_x1) * (b1_y2 - b1_y1) + 1e-16) + \
                 (b2_x2 - b2_x1) * (b2_y2 - b2_y1) - inter_area
    return inter_area / union_area


class YoloV3OrNms(nn.Module):
    """ultralytics/yolov3 (2019) ``utils/utils.py`` ``non_max_suppression``, ``nms_style='OR'``
    for one image: ``for c in pred[:, -1].unique():`` then ``while dc.shape[0]:
    det_max.append(dc[:1]); if len(dc) == 1: break; dc = dc[1:][iou < nms_thres]``, then
    ``torch.cat(det_max)`` sorted by confidence. Rows: x1, y1, x2, y2, conf, cls_conf, cls.
    (The per-image ``for`` and ``output[image_i] = None`` for no detections are left out.)"""

    def forward(self, pred):
        nms_thres = 0.5
        pred = pred[(-pred[:, 4]).argsort()]
        det_max = []
        for c in pred[:, -1].unique():
            dc = pred[pred[:, -1] == c]  # select class c
            n = len(dc)
            if n == 1:
                det_max.append(dc)  # No NMS required if only 1 prediction
                continue
            elif n > 100:
                dc = dc[:100]  # limit to first 100 boxes
            while dc.shape[0]:
                det_max.append(dc[:1])  # save highest conf detection
                if len(dc) == 1:  # Stop if we're at the last detection
                    break
                iou = _yolo_bbox_iou(dc[0], dc[1:])  # iou with other boxes
                dc = dc[1:][iou < nms_thres]  # remove ious > threshold
        det_max = torch.cat(det_max)
        return det_max[(-det_max[:, 4]).argsort()]


class YoloV3MergeNms(nn.Module):
    """ultralytics/yolov3 (2019) ``non_max_suppression``, ``nms_style='MERGE'``: ``while len(dc):
    if len(dc) == 1: det_max.append(dc); break``; ``i = bbox_iou(dc[0], dc) > nms_thres``;
    in-place ``dc[0, :4] = (weights * dc[i, :4]).sum(0) / weights.sum()``; ``dc = dc[i == 0]``."""

    def forward(self, pred):
        nms_thres = 0.5
        pred = pred[(-pred[:, 4]).argsort()]
        det_max = []
        for c in pred[:, -1].unique():
            dc = pred[pred[:, -1] == c]  # select class c
            while len(dc):
                if len(dc) == 1:
                    det_max.append(dc)
                    break
                i = _yolo_bbox_iou(dc[0], dc) > nms_thres  # iou with other boxes
                weights = dc[i, 4:5]
                dc[0, :4] = (weights * dc[i, :4]).sum(0) / weights.sum()
                det_max.append(dc[:1])
                dc = dc[i == 0]
        det_max = torch.cat(det_max)
        return det_max[(-det_max[:, 4]).argsort()]


class SoftNms(nn.Module):
    """DocF/Soft-NMS ``softnms_pytorch.py`` ``soft_nms_pytorch``: ``for i in range(N)``, the
    running max swapped into row ``i`` with ``dets[i], dets[maxpos.item() + i + 1] = ...clone()``
    (in-place row swaps), Gaussian decay ``scores[pos:] = weight * scores[pos:]``, then
    ``keep = dets[:, 4][scores > thresh].int()``. The origin's ``np.maximum(...numpy())`` IoU is
    written with ``torch.maximum``."""

    def forward(self, dets, box_scores):
        sigma = 0.5
        thresh = 0.001
        N = dets.shape[0]
        indexes = torch.arange(0, N, dtype=torch.float).view(N, 1)
        dets = torch.cat((dets, indexes), dim=1)
        y1 = dets[:, 0]
        x1 = dets[:, 1]
        y2 = dets[:, 2]
        x2 = dets[:, 3]
        scores = box_scores
        areas = (x2 - x1 + 1) * (y2 - y1 + 1)

        for i in range(N):
            tscore = scores[i].clone()
            pos = i + 1

            if i != N - 1:
                maxscore, maxpos = torch.max(scores[pos:], dim=0)
                if tscore < maxscore:
                    dets[i], dets[maxpos.item() + i + 1] = dets[maxpos.item() + i + 1].clone(), dets[i].clone()
                    scores[i], scores[maxpos.item() + i + 1] = scores[maxpos.item() + i + 1].clone(), scores[i].clone()
                    areas[i], areas[maxpos + i + 1] = areas[maxpos + i + 1].clone(), areas[i].clone()

            yy1 = torch.maximum(dets[i, 0], dets[pos:, 0])
            xx1 = torch.maximum(dets[i, 1], dets[pos:, 1])
            yy2 = torch.minimum(dets[i, 2], dets[pos:, 2])
            xx2 = torch.minimum(dets[i, 3], dets[pos:, 3])
            w = torch.clamp(xx2 - xx1 + 1, min=0.0)
            h = torch.clamp(yy2 - yy1 + 1, min=0.0)
            inter = w * h
            ovr = torch.div(inter, (areas[i] + areas[pos:] - inter))

            weight = torch.exp(-(ovr * ovr) / sigma)
            scores[pos:] = weight * scores[pos:]

        keep = dets[:, 4][scores > thresh].int()
        return keep


def _point_form(boxes):
    return torch.cat((boxes[:, :2] - boxes[:, 2:] / 2, boxes[:, :2] + boxes[:, 2:] / 2), 1)


def _intersect(box_a, box_b):
    A = box_a.size(0)
    B = box_b.size(0)
    max_xy = torch.min(box_a[:, 2:].unsqueeze(1).expand(A, B, 2), box_b[:, 2:].unsqueeze(0).expand(A, B, 2))
    min_xy = torch.max(box_a[:, :2].unsqueeze(1).expand(A, B, 2), box_b[:, :2].unsqueeze(0).expand(A, B, 2))
    inter = torch.clamp((max_xy - min_xy), min=0)
    return inter[:, :, 0] * inter[:, :, 1]


def _jaccard(box_a, box_b):
    inter = _intersect(box_a, box_b)
    area_a = ((box_a[:, 2] - box_a[:, 0]) * (box_a[:, 3] - box_a[:, 1])).unsqueeze(1).expand_as(inter)
    area_b = ((box_b[:, 2] - box_b[:, 0]) * (box_b[:, 3] - box_b[:, 1])).unsqueeze(0).expand_as(inter)
    union = area_a + area_b - inter
    return inter / union


def _encode(matched, priors, variances):
    g_cxcy = (matched[:, :2] + matched[:, 2:]) / 2 - priors[:, :2]
    g_cxcy /= (variances[0] * priors[:, 2:])
    g_wh = (matched[:, 2:] - matched[:, :2]) / priors[:, 2:]
    g_wh = torch.log(g_wh) / variances[1]
    return torch.cat([g_cxcy, g_wh], 1)


class SsdMatch(nn.Module):
    """amdegroot/ssd.pytorch ``layers/box_utils.py`` ``match`` (anchor assignment): ``for j in
    range(best_prior_idx.size(0)): best_truth_idx[best_prior_idx[j]] = j`` over the ground-truth
    boxes, after ``index_fill_``, then ``conf[best_truth_overlap < threshold] = 0``. The
    ``loc_t[idx] = loc`` output buffers become return values."""

    def __init__(self):
        super().__init__()
        g = torch.linspace(0.125, 0.875, 4)
        cy, cx = torch.meshgrid(g, g, indexing="ij")
        self.register_buffer("priors", torch.stack([cx.flatten(), cy.flatten(),
                                                    torch.full((16,), 0.3), torch.full((16,), 0.3)], 1))

    def forward(self, truths, labels):
        threshold = 0.5
        variances = [0.1, 0.2]
        priors = self.priors
        overlaps = _jaccard(truths, _point_form(priors))
        best_prior_overlap, best_prior_idx = overlaps.max(1, keepdim=True)
        best_truth_overlap, best_truth_idx = overlaps.max(0, keepdim=True)
        best_truth_idx.squeeze_(0)
        best_truth_overlap.squeeze_(0)
        best_prior_idx.squeeze_(1)
        best_prior_overlap.squeeze_(1)
        best_truth_overlap.index_fill_(0, best_prior_idx, 2)  # ensure best prior
        for j in range(best_prior_idx.size(0)):
            best_truth_idx[best_prior_idx[j]] = j
        matches = truths[best_truth_idx]  # Shape: [num_priors,4]
        conf = labels[best_truth_idx] + 1  # Shape: [num_priors]
        conf[best_truth_overlap < threshold] = 0  # label as background
        loc = _encode(matches, priors, variances)
        return loc, conf


class CropPerBox(nn.Module):
    """open-mmlab/mmtracking ``mmtrack/models/mot/trackers/sort_tracker.py``
    ``SortTracker.crop_imgs`` (with the tracker's ``bboxes[:, -1] > obj_score_thr`` filter in
    front): ``for bbox in bboxes: x1, y1, x2, y2 = map(int, bbox)``; ``if x2 == x1: x2 = x1 + 1``;
    ``crop_img = img[:, :, y1:y2, x1:x2]``; ``F.interpolate(crop_img, size=img_scale)``;
    ``torch.cat(crop_imgs, 0)`` or ``img.new_zeros((0, ))``. ``img_metas`` become the image size."""

    obj_score_thr = 0.5
    img_scale = (8, 8)

    def forward(self, img, bboxes):
        valid_inds = bboxes[:, -1] > self.obj_score_thr
        bboxes = bboxes[valid_inds]
        return self.crop_imgs(img, bboxes[:, :4].clone())

    def crop_imgs(self, img, bboxes):
        h, w = img.shape[2], img.shape[3]
        bboxes[:, 0::2] = torch.clamp(bboxes[:, 0::2], min=0, max=w)
        bboxes[:, 1::2] = torch.clamp(bboxes[:, 1::2], min=0, max=h)
        crop_imgs = []
        for bbox in bboxes:
            x1, y1, x2, y2 = map(int, bbox)
            if x2 == x1:
                x2 = x1 + 1
            if y2 == y1:
                y2 = y1 + 1
            crop_img = img[:, :, y1:y2, x1:x2]
            crop_img = F.interpolate(crop_img, size=self.img_scale, mode='bilinear', align_corners=False)
            crop_imgs.append(crop_img)
        if len(crop_imgs) > 0:
            return torch.cat(crop_imgs, dim=0)
        else:
            return img.new_zeros((0, ))


# ---------------------------------------------------------------------------------------------
# Clustering
# ---------------------------------------------------------------------------------------------

def _km_pairwise_distance(data1, data2):
    A = data1.unsqueeze(dim=1)
    B = data2.unsqueeze(dim=0)
    dis = (A - B) ** 2.0
    dis = dis.sum(dim=-1).squeeze()
    return dis


class KMeans(nn.Module):
    """subhadarship/kmeans_pytorch ``kmeans_pytorch/__init__.py`` ``kmeans``: ``while True:``,
    per-cluster ``torch.nonzero(choice_cluster == index).squeeze()`` + ``index_select``, the
    empty-cluster refill ``X[torch.randint(len(X), (1,))]``, in-place
    ``initial_state[index] = selected.mean(dim=0)``, ``if center_shift ** 2 < tol: break``,
    ``if iter_limit != 0 and iteration >= iter_limit: break``. ``initialize`` takes the first
    ``num_clusters`` points (the origin draws them with ``np.random.choice``); tqdm dropped."""

    num_clusters = 3
    tol = 1e-4
    iter_limit = 4

    def forward(self, X):
        X = X.float()
        initial_state = X[list(range(self.num_clusters))]
        iteration = 0
        while True:
            dis = _km_pairwise_distance(X, initial_state)
            choice_cluster = torch.argmin(dis, dim=1)
            initial_state_pre = initial_state.clone()
            for index in range(self.num_clusters):
                selected = torch.nonzero(choice_cluster == index).squeeze()
                selected = torch.index_select(X, 0, selected)
                if selected.shape[0] == 0:
                    selected = X[torch.randint(len(X), (1,))]
                initial_state[index] = selected.mean(dim=0)
            center_shift = torch.sum(torch.sqrt(torch.sum((initial_state - initial_state_pre) ** 2, dim=1)))
            iteration = iteration + 1
            if center_shift ** 2 < self.tol:
                break
            if self.iter_limit != 0 and iteration >= self.iter_limit:
                break
        return choice_cluster, initial_state


class GmmEM(nn.Module):
    """ldeecke/gmm-torch ``gmm.py`` ``GaussianMixture.fit`` (diagonal covariance):
    ``while (i <= n_iter) and (j >= delta):``, ``__em`` / ``__score``, the reinit when the
    log-likelihood is inf/nan, ``j = self.log_likelihood - log_likelihood_old``,
    ``if j <= delta:`` revert mu and var. The parameters (``self.mu.data`` ...) are locals here."""

    n_components = 2
    n_features = 2
    eps = 1.e-6

    def __init__(self):
        super().__init__()
        self.register_buffer("mu_init", torch.tensor([[[-1.0, 0.0], [1.0, 0.5]]]))
        self.register_buffer("var_init", torch.ones(1, 2, 2))

    def _estimate_log_prob(self, x, mu, var):
        prec = torch.rsqrt(var)
        log_p = torch.sum((mu * mu + x * x - 2 * x * mu) * (prec ** 2), dim=2, keepdim=True)
        log_det = torch.sum(torch.log(prec), dim=2, keepdim=True)
        return -.5 * (self.n_features * np.log(2. * math.pi) + log_p) + log_det

    def _e_step(self, x, mu, var, pi):
        weighted_log_prob = self._estimate_log_prob(x, mu, var) + torch.log(pi)
        log_prob_norm = torch.logsumexp(weighted_log_prob, dim=1, keepdim=True)
        log_resp = weighted_log_prob - log_prob_norm
        return torch.mean(log_prob_norm), log_resp

    def _m_step(self, x, log_resp):
        resp = torch.exp(log_resp)
        pi = torch.sum(resp, dim=0, keepdim=True) + self.eps
        mu = torch.sum(resp * x, dim=0, keepdim=True) / pi
        x2 = (resp * x * x).sum(0, keepdim=True) / pi
        mu2 = mu * mu
        xmu = (resp * mu * x).sum(0, keepdim=True) / pi
        var = x2 - 2 * xmu + mu2 + self.eps
        pi = pi / x.shape[0]
        return pi, mu, var

    def _score(self, x, mu, var, pi):
        weighted_log_prob = self._estimate_log_prob(x, mu, var) + torch.log(pi)
        per_sample_score = torch.logsumexp(weighted_log_prob, dim=1)
        return per_sample_score.mean()

    def forward(self, x, delta=1e-3, n_iter=6):
        x = x.unsqueeze(1)
        mu = self.mu_init.clone()
        var = self.var_init.clone()
        pi = torch.full((1, self.n_components, 1), 1.0 / self.n_components)
        log_likelihood = torch.tensor(-np.inf)
        i = 0
        j = np.inf
        while (i <= n_iter) and (j >= delta):
            log_likelihood_old = log_likelihood
            mu_old = mu
            var_old = var
            _, log_resp = self._e_step(x, mu, var, pi)
            pi, mu, var = self._m_step(x, log_resp)
            log_likelihood = self._score(x, mu, var, pi)
            if torch.isinf(log_likelihood.abs()) or torch.isnan(log_likelihood):
                mu = self.mu_init.clone()
                var = self.var_init.clone()
                pi = torch.full((1, self.n_components, 1), 1.0 / self.n_components)
            i += 1
            j = log_likelihood - log_likelihood_old
            if j <= delta:
                mu = mu_old
                var = var_old
        return mu, var, pi


def _gaussian_kernel(distance, bandwidth):
    return (1 / (bandwidth * torch.sqrt(2 * torch.tensor(np.pi)))) \
        * torch.exp(-0.5 * ((distance / bandwidth)) ** 2)


class MeanShift(nn.Module):
    """ethnhe/PVN3D ``pvn3d/lib/utils/meanshift_pytorch.py`` ``MeanShiftTorch.fit``: ``while True:
    it += 1`` ... ``if torch.max(Adis) < self.stop_thresh or it > self.max_iter: break``, then the
    biggest cluster from ``Ar`` (first assigned inside the loop, read after it)."""

    bandwidth = 0.5
    stop_thresh = 0.5 * 1e-3
    max_iter = 5

    def forward(self, A):
        N, c = A.size()
        it = 0
        C = A.clone()
        while True:
            it += 1
            Ar = A.view(1, N, c).repeat(N, 1, 1)
            Cr = C.view(N, 1, c).repeat(1, N, 1)
            dis = torch.norm(Cr - Ar, dim=2)
            w = _gaussian_kernel(dis, self.bandwidth).view(N, N, 1)
            new_C = torch.sum(w * Ar, dim=1) / torch.sum(w, dim=1)
            Adis = torch.norm(new_C - C, dim=1)
            C = new_C
            if torch.max(Adis) < self.stop_thresh or it > self.max_iter:
                break
        # find biggest cluster
        Cr = A.view(N, 1, c).repeat(1, N, 1)
        dis = torch.norm(Ar - Cr, dim=2)
        num_in = torch.sum(dis < self.bandwidth, dim=1)
        max_num, max_idx = torch.max(num_in, 0)
        labels = dis[max_idx] < self.bandwidth
        return C[max_idx, :], labels


# ---------------------------------------------------------------------------------------------
# Solvers
# ---------------------------------------------------------------------------------------------

def _beignet_newton(func, x0, *, atol=0.000001, rtol=0.000001, maxiter=50):
    # Genentech/beignet src/beignet/_newton.py newton, as written
    if x0 is None:
        x0 = torch.zeros([0])
    for iteration in range(maxiter):
        b = x0 - torch.linalg.solve(torch.func.jacfwd(func)(x0), func(x0))
        if torch.linalg.norm(b - x0) < atol + rtol * torch.linalg.norm(b):
            return b, (True, iteration)
        x0 = b
    return b, (False, maxiter)


class NewtonBeignet(nn.Module):
    """Genentech/beignet ``src/beignet/_newton.py`` ``newton``: ``for iteration in
    range(maxiter)``, a ``torch.func.jacfwd`` Jacobian and ``torch.linalg.solve`` step, ``return b,
    (True, iteration)`` inside the loop. Solves ``x**3 = target`` elementwise (maxiter 12)."""

    def forward(self, x0, target):
        def func(x):
            return x ** 3 - target
        root, (converged, iterations) = _beignet_newton(func, x0, atol=1e-5, rtol=1e-5, maxiter=12)
        return root


class Bisection(nn.Module):
    """Bisection with a ``return`` inside the loop and ``other`` first assigned in the loop and
    returned after it: ``middle = 0.5 * (lower + upper)``; ``while 0.5 * (upper - lower) > tol:``
    ``vals = func(lower, upper, middle)``; ``if middle_criterion == 0: return (middle, *other)``;
    ``elif lower_criterion * middle_criterion < 0: upper = middle``; ``else: lower = middle``.
    Origin: a public astrophysics analysis script found by code search ("Bisection method for
    finding m_c such that ... mMLE + m_c = m_h"); ``func`` here is ``x**3 - c``."""

    tol = 1e-3

    def forward(self, lower, upper, c):
        def func(lower, upper, middle):
            return (lower ** 3 - c, middle ** 3 - c, middle ** 3)
        middle = 0.5 * (lower + upper)
        while 0.5 * (upper - lower) > self.tol:
            vals = func(lower, upper, middle)
            lower_criterion = vals[0]
            middle_criterion = vals[1]
            other = vals[2:]
            if middle_criterion == 0:
                return (middle, *other)
            elif lower_criterion * middle_criterion < 0:
                upper = middle
            else:
                lower = middle
            middle = 0.5 * (lower + upper)
        return (middle, *other)


def _rms_norm(tensor):
    return tensor.abs().pow(2).mean().sqrt()


def _compute_error_ratio(error_estimate, rtol, atol, y0, y1, norm):
    error_tol = atol + rtol * torch.max(y0.abs(), y1.abs())
    return norm(error_estimate / error_tol).abs()


def _optimal_step_size(last_step, error_ratio, safety, ifactor, dfactor, order):
    if error_ratio == 0:
        return last_step * ifactor
    if error_ratio < 1:
        dfactor = torch.ones((), dtype=last_step.dtype, device=last_step.device)
    error_ratio = error_ratio.type_as(last_step)
    exponent = torch.tensor(order, dtype=last_step.dtype, device=last_step.device).reciprocal()
    factor = torch.min(ifactor, torch.max(safety / error_ratio ** exponent, dfactor))
    return last_step * factor


def _interp_fit(y0, y1, y_mid, f0, f1, dt):
    a = 2 * dt * (f1 - f0) - 8 * (y1 + y0) + 16 * y_mid
    b = dt * (5 * f0 - 3 * f1) + 18 * y0 + 14 * y1 - 32 * y_mid
    c = dt * (f1 - 4 * f0) - 11 * y0 - 5 * y1 + 16 * y_mid
    d = dt * f0
    e = y0
    return [e, d, c, b, a]


def _interp_evaluate(coefficients, t0, t1, t):
    x = (t - t0) / (t1 - t0)
    x = x.to(coefficients[0].dtype)
    total = coefficients[0] + x * coefficients[1]
    x_power = x
    for coefficient in coefficients[2:]:
        x_power = x_power * x
        total = total + x_power * coefficient
    return total


class Bosh3Adaptive(nn.Module):
    """rtqichen/torchdiffeq ``torchdiffeq/_impl/rk_common.py`` ``RKAdaptiveStepsizeODESolver``
    with the ``bosh3`` tableau: ``_advance`` (``while next_t > self.rk_state.t1: assert n_steps <
    self.max_num_steps ...; rk_state = self._adaptive_step(rk_state); n_steps += 1``) inside
    ``integrate``'s ``for i in range(1, len(t))`` writing ``solution[i]``, and ``_adaptive_step``'s
    ``if accept_step:`` / reject branches, ``_optimal_step_size``, ``_interp_fit`` /
    ``_interp_evaluate``. ``self.rk_state`` is passed and returned (a local) instead of an
    attribute; step/jump locations, events and perturb are left out; first_step is given."""

    alpha = [1 / 2, 3 / 4, 1.]
    beta = [[1 / 2], [0., 3 / 4], [2 / 9, 1 / 3, 4 / 9]]
    c_sol = [2 / 9, 1 / 3, 4 / 9, 0.]
    c_error = [2 / 9 - 7 / 24, 1 / 3 - 1 / 4, 4 / 9 - 1 / 3, -1 / 8]
    mid = [0., 0.5, 0., 0.]
    order = 3
    max_num_steps = 200

    def __init__(self):
        super().__init__()
        self.register_buffer("rtol", torch.tensor(1e-3))
        self.register_buffer("atol", torch.tensor(1e-4))
        self.register_buffer("safety", torch.tensor(0.9))
        self.register_buffer("ifactor", torch.tensor(10.0))
        self.register_buffer("dfactor", torch.tensor(0.2))
        self.register_buffer("first_step", torch.tensor(0.5))

    def func(self, t, y):
        return -2.0 * y + torch.sin(3.0 * t) * y.roll(1, 0)

    def forward(self, y0, t):
        solution = torch.empty(len(t), *y0.shape, dtype=y0.dtype, device=y0.device)
        solution[0] = y0
        rk_state = self._before_integrate(y0, t)
        for i in range(1, len(t)):
            solution[i], rk_state = self._advance(t[i], rk_state)
        return solution

    def _before_integrate(self, y0, t):
        f0 = self.func(t[0], y0)
        return (y0, f0, t[0], t[0], self.first_step, [y0] * 5)

    def _advance(self, next_t, rk_state):
        n_steps = 0
        while next_t > rk_state[3]:
            assert n_steps < self.max_num_steps, 'max_num_steps exceeded ({}>={})'.format(n_steps, self.max_num_steps)
            rk_state = self._adaptive_step(rk_state)
            n_steps += 1
        return _interp_evaluate(rk_state[5], rk_state[2], rk_state[3], next_t), rk_state

    def _runge_kutta_step(self, y0, f0, t0, dt):
        k = torch.empty(*f0.shape, len(self.alpha) + 1, dtype=y0.dtype, device=y0.device)
        k[..., 0] = f0
        for i, (alpha_i, beta_i) in enumerate(zip(self.alpha, self.beta)):
            ti = t0 + alpha_i * dt
            yi = y0 + k[..., :i + 1].matmul(torch.tensor(beta_i) * dt).view_as(f0)
            f = self.func(ti, yi)
            k[..., i + 1] = f
        y1 = yi
        f1 = k[..., -1]
        y1_error = k.matmul(dt * torch.tensor(self.c_error))
        return y1, f1, y1_error, k

    def _adaptive_step(self, rk_state):
        y0, f0, _, t0, dt, interp_coeff = rk_state
        t1 = t0 + dt
        assert t1 > t0, 'underflow in dt {}'.format(dt.item())
        y1, f1, y1_error, k = self._runge_kutta_step(y0, f0, t0, dt)
        error_ratio = _compute_error_ratio(y1_error, self.rtol, self.atol, y0, y1, _rms_norm)
        accept_step = error_ratio <= 1
        if accept_step:
            t_next = t1
            y_next = y1
            interp_coeff = self._interp_fit(y0, y_next, k, dt)
            f_next = f1
        else:
            t_next = t0
            y_next = y0
            f_next = f0
        dt_next = _optimal_step_size(dt, error_ratio, self.safety, self.ifactor, self.dfactor, self.order)
        rk_state = (y_next, f_next, t0, t_next, dt_next, interp_coeff)
        return rk_state

    def _interp_fit(self, y0, y1, k, dt):
        dt = dt.type_as(y0)
        y_mid = y0 + k.matmul(dt * torch.tensor(self.mid)).view_as(y0)
        f0 = k[..., 0]
        f1 = k[..., -1]
        return _interp_fit(y0, y1, y_mid, f0, f1, dt)


def _trpo_conjugate_gradients(Avp, b, nsteps, residual_tol=1e-10):
    # ikostrikov/pytorch-trpo trpo.py conjugate_gradients, as written
    x = torch.zeros(b.size())
    r = b.clone()
    p = b.clone()
    rdotr = torch.dot(r, r)
    for i in range(nsteps):
        _Avp = Avp(p)
        alpha = rdotr / torch.dot(p, _Avp)
        x += alpha * p
        r -= alpha * _Avp
        new_rdotr = torch.dot(r, r)
        betta = new_rdotr / rdotr
        p = r + betta * p
        rdotr = new_rdotr
        if rdotr < residual_tol:
            break
    return x


class ConjugateGradient(nn.Module):
    """ikostrikov/pytorch-trpo ``trpo.py`` ``conjugate_gradients(Avp, b, nsteps,
    residual_tol=1e-10)``: ``for i in range(nsteps)``, in-place ``x += alpha * p``,
    ``r -= alpha * _Avp``, ``if rdotr < residual_tol: break``. Called as in ``trpo_step`` with
    ``nsteps=10``; ``Avp`` is ``A @ v`` for a positive-definite ``A``."""

    def forward(self, A, b):
        return _trpo_conjugate_gradients(lambda v: A @ v, b, 10, residual_tol=1e-8)


def _normalize(v):
    return v / v.norm()


def _cockpit_power_iteration(matmul, dim, v0=None, maxiter=100, rtol=1e-3, atol=1e-6):
    # f-dangel/cockpit backboard/eigen.py power_iteration, as written
    def converged(eigval_before, eigval_new):
        return torch.allclose(eigval_before, eigval_new, rtol=rtol, atol=atol)

    v = torch.randn(dim) if v0 is None else v0
    v = _normalize(v)
    eigval = torch.Tensor([float("inf")])
    for _ in range(maxiter):
        new_v = matmul(v)
        new_eigval = new_v.norm() / v.norm()
        v = _normalize(new_v)
        if converged(eigval, new_eigval):
            eigvec = v
            return eigval, eigvec
        eigval = new_eigval
    raise RuntimeError("Exceeded maximum number of iterations {}".format(maxiter))


class PowerIteration(nn.Module):
    """f-dangel/cockpit ``backboard/eigen.py`` ``power_iteration``: ``for _ in range(maxiter)``,
    ``if converged(eigval, new_eigval): return eigval, eigvec`` with ``torch.allclose``, the
    carried ``eigval`` starting as ``torch.Tensor([inf])`` (shape (1,)) then 0-d, and
    ``raise RuntimeError`` after the loop."""

    def forward(self, A, v0):
        eigval, eigvec = _cockpit_power_iteration(lambda v: A @ v, A.shape[0], v0=v0, maxiter=40)
        return eigval, eigvec


class Sinkhorn(nn.Module):
    """rythei/PyTorchOT ``ot_pytorch.py`` ``sink``: ``while (err > stopThr and cpt <
    numItermax):`` with ``if cpt % 10 == 0: err = (torch.sum(transp) - b).norm(1).pow(2).item()``
    (a Python float from ``.item()`` in the loop test), ``cpt += 1``. numItermax 40 (origin: 1000);
    ``Variable``/``.cuda()`` dropped."""

    def forward(self, M):
        reg = 0.5
        numItermax = 40
        stopThr = 1e-9
        a = torch.ones((M.size()[0],)) / M.size()[0]
        b = torch.ones((M.size()[1],)) / M.size()[1]
        Nini = len(a)
        Nfin = len(b)
        u = torch.ones(Nini) / Nini
        v = torch.ones(Nfin) / Nfin
        K = torch.exp(-M / reg)
        Kp = (1 / a).view(-1, 1) * K
        cpt = 0
        err = 1
        while (err > stopThr and cpt < numItermax):
            uprev = u
            vprev = v
            KtransposeU = K.t().matmul(u)
            v = torch.div(b, KtransposeU)
            u = 1. / Kp.matmul(v)
            if cpt % 10 == 0:
                transp = u.view(-1, 1) * (K * v)
                err = (torch.sum(transp) - b).norm(1).pow(2).item()
            cpt += 1
        return torch.sum(u.view((-1, 1)) * K * v.view((1, -1)) * M)


# ---------------------------------------------------------------------------------------------
# Graph search
# ---------------------------------------------------------------------------------------------

class BfsFrontier(nn.Module):
    """stineje/ecen4293F25 ``Python/matrix/matrix_graph_traversal.py`` (numpy, written in torch):
    ``while True: next_frontier = A.T @ frontier; next_frontier *= (visited == 0);
    if not next_frontier.any(): break; visited += ...; level += 1; frontier = ...``. The
    origin's ``print(level, np.where(frontier > 0))`` becomes ``depth[next_frontier > 0] = level``."""

    def forward(self, A, start):
        n = A.shape[0]
        frontier = torch.zeros(n)
        frontier[start] = 1
        visited = frontier.clone()
        depth = torch.full((n,), -1.0)
        depth[start] = 0
        level = 0
        while True:
            next_frontier = A.T @ frontier
            next_frontier *= (visited == 0)
            if not next_frontier.any():
                break
            visited += (next_frontier > 0).float()
            level += 1
            depth[next_frontier > 0] = level
            frontier = (next_frontier > 0).float()
        return depth


class DijkstraMatrix(nn.Module):
    """Ravineel/Python ``DSA/Graphs/dijkstra.py`` ``dijkstra(Wmat, s)`` (dict/numpy, written on
    tensors): ``for u in range(rows)``, ``nextd`` = min distance of the unvisited nodes,
    ``if nextvlist == []: break``, ``visited[nextv] = True``, then ``for v in range(cols): if
    Wmat[nextv, v, 0] == 1 and not visited[v]: distance[v] = min(...)`` (in-place element writes).
    The two list comprehensions over nodes are vectorised."""

    def forward(self, Wmat, s):
        rows = Wmat.shape[0]
        cols = Wmat.shape[1]
        infinity = Wmat[:, :, 1].max() * rows + 1
        visited = torch.zeros(rows, dtype=torch.bool)
        distance = torch.zeros(rows) + infinity
        distance[s] = 0
        for u in range(rows):
            nextd = torch.where(visited, torch.full_like(distance, float("inf")), distance).min()
            nextvlist = (~visited) & (distance == nextd)
            if not nextvlist.any():
                break
            nextv = nextvlist.nonzero()[0, 0]
            visited[nextv] = True
            for v in range(cols):
                if Wmat[nextv, v, 0] == 1 and not visited[v]:
                    distance[v] = torch.minimum(distance[v], distance[nextv] + Wmat[nextv, v, 1])
        return distance


class KorniaConnectedComponents(nn.Module):
    """kornia ``kornia/contrib/connected_components.py`` ``connected_components``: label
    propagation ``for _ in range(num_iterations): out[mask] = F.max_pool2d(out, 3, 1, 1)[mask]``
    (a static trip count; num_iterations 12 instead of 100)."""

    def forward(self, image):
        num_iterations = 12
        H, W = image.shape[-2:]
        image_view = image.view(-1, 1, H, W)
        mask = image_view == 1
        B, _, _, _ = image_view.shape
        out = torch.arange(B * H * W, device=image.device, dtype=image.dtype).view((-1, 1, H, W))
        out[~mask] = 0
        for _ in range(num_iterations):
            out[mask] = F.max_pool2d(out, kernel_size=3, stride=1, padding=1)[mask]
        return out.view_as(image)


class UnionFindComponents(nn.Module):
    """Path-halving union-find as it appears in many public projects (``def find(i): while
    parent[i] != i: parent[i] = parent[parent[i]]; i = parent[i]; return i``; union
    ``if ra != rb: parent[ra] = rb``) over an edge list tensor, then ``[find(i) for i in
    range(n)]`` written into a label tensor. No single canonical origin: the code-search hits for
    ``parent[i] = parent[parent[i]]`` all have this shape."""

    def forward(self, edges, n_nodes):
        n = n_nodes.shape[0]
        parent = torch.arange(n)

        def find(i):
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for e in range(edges.shape[0]):
            ra = find(edges[e, 0])
            rb = find(edges[e, 1])
            if ra != rb:
                parent[ra] = rb
        labels = torch.zeros(n, dtype=torch.long)
        for i in range(n):
            labels[i] = find(i)
        return labels


class FloodFillDilate(nn.Module):
    """Flood fill (hole filling / region growing) by repeated masked dilation until the region
    stops changing, the ``dilate`` of mindee/doctr ``doctr/models/utils/pytorch.py``
    (``max_pool2d(x, kernel_size, stride=1, padding=...)``) in a ``while True: ... if
    torch.equal(new, region): break`` loop, as region-growing code writes it (no single canonical
    origin found)."""

    def forward(self, seed, allowed):
        region = seed
        while True:
            new = F.max_pool2d(region, 3, stride=1, padding=1) * allowed
            if torch.equal(new, region):
                break
            region = new
        return region


class DfsListStack(nn.Module):
    """Iterative DFS with a Python list as the loop state: ``stack = [source]; while stack:
    node = stack.pop(); if visited[node]: continue; visited[node] = True; for nb in
    neighbours: stack.append(nb)`` (the textbook pattern; the deque/BFS form is the
    ``bfs(adjacency_matrix, source)`` generator found by code search)."""

    def forward(self, A, source):
        n = A.shape[0]
        visited = torch.zeros(n, dtype=torch.bool)
        order = torch.full((n,), -1)
        stack = [source]
        count = 0
        while stack:
            node = stack.pop()
            if visited[node]:
                continue
            visited[node] = True
            order[node] = count
            count += 1
            for nb in A[node].nonzero().flatten():
                stack.append(nb)
        return order


# ---------------------------------------------------------------------------------------------
# Tokenizer-like loops
# ---------------------------------------------------------------------------------------------

class WordPieceIds(nn.Module):
    """google-research/bert ``tokenization.py`` ``WordpieceTokenizer.tokenize`` (greedy longest
    match first) on one word given as character ids: ``while start < len(chars): end =
    len(chars); cur_substr = None; while start < end: ...; if substr in self.vocab: cur_substr =
    substr; break; end -= 1``; ``if cur_substr is None: is_bad = True; break``;
    ``sub_tokens.append(cur_substr); start = end``. The vocabulary is a padded id table; "##"
    pieces are rows flagged as continuations; ``[UNK]`` is id -1."""

    def __init__(self):
        super().__init__()
        # pieces over chars a=1 b=2 c=3 d=4: "ab" "abc" "a" "b" "##c" "##cd" "##d" "##b"
        pieces = [([1, 2], 0), ([1, 2, 3], 0), ([1], 0), ([2], 0), ([3], 1), ([3, 4], 1), ([4], 1), ([2], 1)]
        table = torch.zeros(len(pieces), 4, dtype=torch.long)
        lens = torch.zeros(len(pieces), dtype=torch.long)
        cont = torch.zeros(len(pieces), dtype=torch.long)
        for k, (ids, c) in enumerate(pieces):
            table[k, :len(ids)] = torch.tensor(ids)
            lens[k] = len(ids)
            cont[k] = c
        self.register_buffer("table", table)
        self.register_buffer("lens", lens)
        self.register_buffer("cont", cont)

    def vocab_lookup(self, substr, start):
        n = substr.shape[0]
        hit = (self.lens == n) & (self.cont == int(start > 0))
        hit = hit & (self.table[:, :n] == substr).all(1) if n <= self.table.shape[1] else hit & False
        return hit.nonzero().flatten()

    def forward(self, chars):
        is_bad = False
        start = 0
        sub_tokens = []
        while start < len(chars):
            end = len(chars)
            cur_substr = None
            while start < end:
                substr = chars[start:end]
                found = self.vocab_lookup(substr, start)
                if found.numel() > 0:
                    cur_substr = found[0]
                    break
                end -= 1
            if cur_substr is None:
                is_bad = True
                break
            sub_tokens.append(cur_substr)
            start = end
        if is_bad:
            return torch.tensor([-1])
        return torch.stack(sub_tokens)


class MinBpeEncode(nn.Module):
    """karpathy/minbpe ``minbpe/basic.py`` ``BasicTokenizer.encode`` + ``minbpe/base.py``
    ``get_stats`` / ``merge``: ``while len(ids) >= 2: stats = get_stats(ids); pair = min(stats,
    key=lambda p: self.merges.get(p, float("inf"))); if pair not in self.merges: break;
    ids = merge(ids, pair, idx)``, and ``merge``'s ``while i < len(ids): if ids[i] == pair[0] and
    i < len(ids) - 1 and ids[i+1] == pair[1]: newids.append(idx); i += 2 else: newids.append(ids[i]);
    i += 1``. ``ids`` is a tensor; the merges dict is a (V, V) rank table (inf = no merge) and a
    (V, V) table of merged ids; ``min(stats, key=rank)`` is the lowest-rank adjacent pair."""

    V = 8

    def __init__(self):
        super().__init__()
        rank = torch.full((self.V, self.V), float("inf"))
        new_id = torch.zeros((self.V, self.V), dtype=torch.long)
        for r, (a, b, m) in enumerate([(1, 2, 5), (5, 3, 6), (2, 2, 7), (6, 1, 4)]):
            rank[a, b] = r
            new_id[a, b] = m
        self.register_buffer("rank", rank)
        self.register_buffer("new_id", new_id)

    @staticmethod
    def merge(ids, pair, idx):
        newids = []
        i = 0
        while i < len(ids):
            if ids[i] == pair[0] and i < len(ids) - 1 and ids[i + 1] == pair[1]:
                newids.append(idx)
                i += 2
            else:
                newids.append(ids[i])
                i += 1
        return torch.stack(newids)

    def forward(self, ids):
        while len(ids) >= 2:
            ranks = self.rank[ids[:-1], ids[1:]]
            best = torch.argmin(ranks)
            pair = (ids[best], ids[best + 1])
            if torch.isinf(ranks[best]):
                break
            idx = self.new_id[pair[0], pair[1]]
            ids = self.merge(ids, pair, idx)
        return ids


# ---------------------------------------------------------------------------------------------
# TorchScript-test-style loops
# ---------------------------------------------------------------------------------------------

class JitLoopUnrolling(nn.Module):
    """pytorch/pytorch ``test/test_jit.py`` ``test_loop_unrolling``: ``y = 0; for i in
    range(int(x)): y -= i; return y`` (a Python int accumulated over a data-dependent range)."""

    def forward(self, x):
        y = 0
        for i in range(int(x)):
            y -= i
        return torch.tensor(y)


class JitListAppendStack(nn.Module):
    """The TorchScript-test loop that fills a list and stacks it (pytorch ``test/test_jit.py``
    list/loop tests: ``outputs = []; for i in range(x.size(0)): outputs.append(...);
    torch.stack(outputs)``), with the element depending on the running state."""

    def forward(self, x):
        outputs = []
        h = torch.zeros(x.size(1))
        for i in range(x.size(0)):
            h = torch.tanh(x[i] + h)
            outputs.append(h * i)
        return torch.stack(outputs)


# ---------------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------------

def _scores(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, generator=g) * 0.8 + 0.1


# boxes for the NMS family: x1 < x2, y1 < y2
_B_MIXED = _t([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [21, 19, 31, 29], [50, 50, 60, 60]])
_B_ONE = _t([[0, 0, 10, 10]])
_B_PAIR = _t([[0, 0, 10, 10], [1, 0, 11, 10]])            # IoU 0.82: second suppressed
_B_APART = _t([[0, 0, 5, 5], [10, 10, 15, 15], [20, 0, 25, 5]])  # no overlap
_B_ALL = _t([[0, 0, 10, 10], [0, 1, 10, 11], [1, 0, 11, 10], [1, 1, 11, 11]])  # all overlap
_B_SIX = _t([[0, 0, 10, 10], [2, 2, 12, 12], [30, 30, 40, 40], [31, 31, 41, 41],
             [60, 0, 70, 10], [0, 60, 10, 70]])

_NMS_HELD = [(_B_ONE, _t([0.9])), (_B_PAIR, _t([0.9, 0.8])), (_B_APART, _t([0.3, 0.9, 0.6])),
             (_B_ALL, _t([0.5, 0.9, 0.7, 0.6])), (_B_SIX, _scores(6, 3)), (_B_MIXED, _scores(5, 1))]
_NMS_EXITS = ["one box: `order.numel() == 1` break on trip 1",
              "two overlapping: carried `order` filtered to empty after trip 1 (while test false)",
              "no overlap: 3 trips, break at numel()==1 on trip 3",
              "all overlap: trip 1 empties `order` / idx.numel()==0 break",
              "six boxes, three pairs: N trips",
              "five boxes mixed: 3 trips"]
_NMS_DYN = {"boxes": {0: "n"}, "scores": {0: "n"}}


def _yolo_pred(boxes, conf, cls):
    n = boxes.shape[0]
    return torch.cat([boxes, conf[:, None], torch.ones(n, 1), _t(cls)[:, None]], 1)


def _crop_boxes(rows):
    return _t(rows)


def _spd(n, seed):
    g = torch.Generator().manual_seed(seed)
    m = torch.randn(n, n, generator=g)
    return m @ m.T + n * torch.eye(n)


def _km_points(centers, per, seed, spread=0.1):
    g = torch.Generator().manual_seed(seed)
    pts = [torch.tensor(c) + spread * torch.randn(per, 2, generator=g) for c in centers]
    return torch.cat(pts)


def _adj(n, edges, directed=False):
    A = torch.zeros(n, n)
    for a, b in edges:
        A[a, b] = 1
        if not directed:
            A[b, a] = 1
    return A


def _wmat(n, edges):
    W = torch.zeros(n, n, 2)
    for a, b, w in edges:
        W[a, b, 0] = 1
        W[a, b, 1] = w
    return W


def _grid(rows):
    return _t(rows)[None, None]


CASES: list[LoopCase] = [
    LoopCase(
        name="nms_argsort_stack",
        origin="public detector wrapper _nms (code search), = py-faster-rcnn py_cpu_nms in torch",
        make=NmsArgsortStack,
        example=(_B_MIXED, _scores(5, 1)),
        dynamic_shapes=_NMS_DYN,
        held_out=_NMS_HELD,
        exits=_NMS_EXITS,
    ),
    LoopCase(
        name="nms_sort_item_list",
        origin="blog 'NMS的多种实现' nms (sort, .item(), nonzero().squeeze(), LongTensor(keep))",
        make=NmsSortItemList,
        example=(_B_MIXED, _scores(5, 1)),
        dynamic_shapes={"bboxes": {0: "n"}, "scores": {0: "n"}},
        held_out=_NMS_HELD,
        exits=["one box: numel()==1 .item() break", "pair: idx.numel()==0 break on trip 1",
               "no overlap: 3 trips, numel()==1 break", "all overlap: idx.numel()==0 break on trip 1",
               "six boxes: N trips", "five boxes: 3 trips"],
    ),
    LoopCase(
        name="ssd_nms_keep_count",
        origin="amdegroot/ssd.pytorch layers/box_utils.py nms + Detect.forward",
        make=SsdNms,
        example=(_B_MIXED, _scores(5, 1)),
        dynamic_shapes=_NMS_DYN,
        held_out=_NMS_HELD,
        exits=["one box: idx.size(0)==1 break on trip 1", "pair: idx emptied after trip 1",
               "no overlap: break at size 1 on trip 3", "all overlap: idx emptied after trip 1",
               "six boxes: N trips", "five boxes: 3 trips"],
    ),
    LoopCase(
        name="yolov3_or_nms_per_class",
        origin="ultralytics/yolov3 (2019) utils/utils.py non_max_suppression OR",
        make=YoloV3OrNms,
        example=(_yolo_pred(_B_MIXED, _scores(5, 1), [0, 0, 1, 1, 0]),),
        dynamic_shapes={"pred": {0: "n"}},
        held_out=[(_yolo_pred(_B_ONE, _t([0.9]), [0]),),
                  (_yolo_pred(_B_PAIR, _t([0.9, 0.8]), [2, 2]),),
                  (_yolo_pred(_B_APART, _t([0.3, 0.9, 0.6]), [1, 1, 1]),),
                  (_yolo_pred(_B_ALL, _t([0.5, 0.9, 0.7, 0.6]), [0, 0, 0, 0]),),
                  (_yolo_pred(_B_SIX, _scores(6, 3), [0, 0, 0, 1, 1, 2]),)],
        exits=["one class, one box: n == 1 `continue` (while not entered)",
               "one class, pair: dc emptied after 1 trip",
               "no overlap: 3 trips, len(dc)==1 break",
               "all overlap: dc emptied after 1 trip",
               "three classes: 0 (continue), 1 and 2-trip while loops in the for"],
    ),
    LoopCase(
        name="yolov3_merge_nms",
        origin="ultralytics/yolov3 (2019) utils/utils.py non_max_suppression MERGE",
        make=YoloV3MergeNms,
        example=(_yolo_pred(_B_MIXED, _scores(5, 1), [0, 0, 1, 1, 0]),),
        dynamic_shapes={"pred": {0: "n"}},
        held_out=[(_yolo_pred(_B_ONE, _t([0.9]), [0]),),
                  (_yolo_pred(_B_PAIR, _t([0.9, 0.8]), [2, 2]),),
                  (_yolo_pred(_B_APART, _t([0.3, 0.9, 0.6]), [1, 1, 1]),),
                  (_yolo_pred(_B_ALL, _t([0.5, 0.9, 0.7, 0.6]), [0, 0, 0, 0]),),
                  (_yolo_pred(_B_SIX, _scores(6, 3), [0, 0, 0, 1, 1, 2]),)],
        exits=["one box: len(dc)==1 break on trip 1", "pair merged: dc emptied after trip 1",
               "no overlap: 3 trips ending in len(dc)==1 break", "all merged: emptied after trip 1",
               "three classes: mixed"],
    ),
    LoopCase(
        name="soft_nms_swaps",
        origin="DocF/Soft-NMS softnms_pytorch.py soft_nms_pytorch",
        make=SoftNms,
        example=(_t([[200, 200, 400, 400], [220, 220, 420, 420], [200, 240, 400, 440],
                     [240, 200, 440, 400], [1, 1, 2, 2]]), _t([0.8, 0.7, 0.6, 0.5, 0.9])),
        dynamic_shapes={"dets": {0: "n"}, "box_scores": {0: "n"}},
        held_out=[(_t([[0, 0, 10, 10]]), _t([0.9])),
                  (_t([[0, 0, 10, 10], [1, 1, 11, 11]]), _t([0.4, 0.9])),
                  (_t([[0, 0, 10, 10], [1, 1, 11, 11]]), _t([0.9, 0.4])),
                  (_t([[0, 0, 10, 10], [100, 100, 110, 110], [2, 2, 12, 12], [0, 50, 9, 60]]),
                   _t([0.2, 0.5, 0.95, 0.3])),
                  (_t([[200, 200, 400, 400], [220, 220, 420, 420], [200, 240, 400, 440],
                       [240, 200, 440, 400], [1, 1, 2, 2]]), _t([0.8, 0.7, 0.6, 0.5, 0.9]))],
        exits=["N=1: one trip, `i != N-1` false", "N=2 swap taken", "N=2 no swap",
               "N=4 swaps and decays", "the origin's own example (N=5)"],
    ),
    LoopCase(
        name="ssd_match_anchor_assign",
        origin="amdegroot/ssd.pytorch layers/box_utils.py match",
        make=SsdMatch,
        example=(_t([[0.1, 0.1, 0.4, 0.4], [0.5, 0.5, 0.9, 0.9]]), torch.tensor([3, 1])),
        dynamic_shapes={"truths": {0: "n_obj"}, "labels": {0: "n_obj"}},
        held_out=[(_t([[0.2, 0.2, 0.5, 0.6]]), torch.tensor([2])),
                  (_t([[0.1, 0.1, 0.4, 0.4], [0.12, 0.1, 0.42, 0.4], [0.6, 0.1, 0.9, 0.3]]),
                   torch.tensor([0, 4, 2])),
                  (_t([[0.0, 0.0, 0.3, 0.3], [0.3, 0.0, 0.6, 0.3], [0.6, 0.6, 0.95, 0.95],
                       [0.0, 0.6, 0.3, 0.9], [0.4, 0.4, 0.6, 0.6]]), torch.tensor([1, 2, 3, 4, 5]))],
        exits=["1 object: 1 trip", "3 objects, two share a best prior (later j overwrites)",
               "5 objects: 5 trips"],
    ),
    LoopCase(
        name="crop_per_box_interpolate_cat",
        origin="open-mmlab/mmtracking sort_tracker.py SortTracker.crop_imgs",
        make=CropPerBox,
        example=(torch.linspace(0, 1, 3 * 16 * 16).view(1, 3, 16, 16),
                 _t([[1.2, 2.0, 9.7, 12.1, 0.9], [4, 4, 8, 6, 0.2], [0, 0, 16, 16, 0.8]])),
        dynamic_shapes={"img": None, "bboxes": {0: "n"}},
        held_out=[(torch.linspace(0, 1, 3 * 16 * 16).view(1, 3, 16, 16), _t([[1, 1, 5, 5, 0.9]])),
                  (torch.linspace(-1, 1, 3 * 16 * 16).view(1, 3, 16, 16),
                   _t([[3, 3, 3.4, 9, 0.7], [2, 5, 14, 5.2, 0.95], [-3, -2, 20, 7, 0.6], [0, 0, 4, 4, 0.1]])),
                  (torch.linspace(0, 1, 3 * 16 * 16).view(1, 3, 16, 16),
                   _t([[1, 1, 5, 5, 0.9], [2, 2, 9, 9, 0.8]])),
                  (torch.linspace(0, 1, 3 * 16 * 16).view(1, 3, 16, 16), _t([[1, 1, 5, 5, 0.1]]))],
        exits=["1 box kept: 1 trip", "degenerate x2==x1 / y2==y1 boxes and a box clamped to the image",
               "2 boxes: 2 trips", "no box above threshold: 0 trips, `img.new_zeros((0,))` branch"],
    ),
    LoopCase(
        name="kmeans_while_shift_tol",
        origin="subhadarship/kmeans_pytorch kmeans_pytorch/__init__.py kmeans",
        make=KMeans,
        example=(_km_points([(0, 0), (3, 3), (0, 4)], 4, 0),),
        dynamic_shapes={"X": {0: "n"}},
        held_out=[(_t([[0, 0], [5, 5], [9, 0]]),),
                  (_t([[0, 0], [0, 0.2], [5, 5], [9, 0]]),),
                  (_km_points([(0, 0), (3, 3), (0, 4)], 5, 1, spread=0.8),),
                  (torch.cat([_t([[0.0, 0.0], [0.1, 0.0], [0.0, 0.1]]),
                              _km_points([(0, 0), (1.5, 1.5), (3, 3), (4.5, 4.5)], 3, 6, 0.3)]),)],
        exits=["3 points = 3 centers: shift 0, break after trip 1",
               "4 points: break on tol after trip 2",
               "overlapping clusters: 3 trips, tol break",
               "centers seeded in one corner of a line of clusters: iter_limit break (4 trips)"],
    ),
    LoopCase(
        name="gmm_em_converge",
        origin="ldeecke/gmm-torch gmm.py GaussianMixture.fit (diag)",
        make=GmmEM,
        example=(_km_points([(-1, 0), (1, 0.5)], 6, 0, 0.3),),
        dynamic_shapes={"x": {0: "n"}},
        held_out=[(_km_points([(-1, 0), (1, 0.5)], 8, 1, 0.2),),
                  (_km_points([(-2, 0), (2, 1)], 3, 2, 0.5),),
                  (_km_points([(0, 0), (0.3, 0.1)], 10, 3, 1.0),)],
        exits=["separated clusters: converges (j < delta)", "few points: converges", "overlapping: n_iter bound"],
        atol=1e-3,
    ),
    LoopCase(
        name="mean_shift_while_true",
        origin="ethnhe/PVN3D lib/utils/meanshift_pytorch.py MeanShiftTorch.fit",
        make=MeanShift,
        example=(_km_points([(0, 0), (2, 2)], 4, 0, 0.2),),
        dynamic_shapes={"A": {0: "n"}},
        held_out=[(_t([[0.5, 0.5]]),),
                  (_km_points([(0, 0)], 5, 1, 0.05),),
                  (_km_points([(0, 0), (0.6, 0.6)], 5, 2, 0.3),)],
        exits=["one point: converged, break after trip 1", "tight cluster: break on stop_thresh",
               "spread: it > max_iter break"],
    ),
    LoopCase(
        name="newton_beignet_return_in_loop",
        origin="Genentech/beignet src/beignet/_newton.py newton",
        make=NewtonBeignet,
        example=(_t([1.5, 2.0]), _t([8.0, 27.0])),
        dynamic_shapes={"x0": {0: "d"}, "target": {0: "d"}},
        held_out=[(_t([2.0, 3.0]), _t([8.0, 27.0])),
                  (_t([1.0]), _t([1.2])),
                  (_t([40.0, 1.0, 2.0]), _t([1.0, 1.0, 8.0]))],
        exits=["x0 is the root: return on iteration 0", "few iterations then return",
               "far start: maxiter reached, `return b, (False, maxiter)`"],
    ),
    LoopCase(
        name="bisection_return_in_while",
        origin="public analysis script bisection(lower, upper, tol, func) (code search)",
        make=Bisection,
        example=(_t(0.0), _t(4.0), _t(5.0)),
        dynamic_shapes=None,
        held_out=[(_t(-1.0), _t(1.0), _t(0.0)),
                  (_t(0.0), _t(0.003), _t(1e-9)),
                  (_t(0.0), _t(10.0), _t(100.0))],
        exits=["middle is the root: `return` on trip 1", "interval 0.003: 1 trip then test false",
               "N trips until 0.5*(upper-lower) <= tol"],
    ),
    LoopCase(
        name="ode_bosh3_adaptive_steps",
        origin="rtqichen/torchdiffeq _impl/rk_common.py _advance/_adaptive_step (bosh3)",
        make=Bosh3Adaptive,
        example=(_t([1.0, 0.5, -0.3]), _t([0.0, 0.4, 1.0, 2.5])),
        dynamic_shapes={"y0": {0: "d"}, "t": {0: "T"}},
        held_out=[(_t([1.0, 0.5]), _t([0.0, 0.1])),
                  (_t([1.0, -1.0, 2.0]), _t([0.0, 0.05, 0.1, 0.11, 3.0])),
                  (_t([2.0]), _t([0.0, 1.0])),
                  (_t([1.0, 0.5, 0.25, 0.1]), _t([0.0]))],
        exits=["T=2: one step", "close times: 0-trip _advance calls, then many steps incl. rejected ones",
               "d=1, one long interval: rejected first step", "T=1: the for loop runs 0 times"],
        atol=1e-4,
    ),
    LoopCase(
        name="conjugate_gradient_break",
        origin="ikostrikov/pytorch-trpo trpo.py conjugate_gradients",
        make=ConjugateGradient,
        example=(_spd(4, 0), torch.ones(4)),
        dynamic_shapes={"A": {0: "n", 1: "n"}, "b": {0: "n"}},
        held_out=[(2.0 * torch.eye(3), torch.ones(3)),
                  (_spd(2, 1), _t([1.0, -1.0])),
                  (_spd(12, 2) + torch.diag(torch.logspace(0, 3, 12)), torch.linspace(-1, 1, 12)),
                  (_spd(1, 3), _t([2.0]))],
        exits=["b eigenvector: break after trip 1", "n=2: break after ~2 trips",
               "n=12 ill-conditioned: nsteps=10 bound", "n=1: break after trip 1"],
        atol=1e-3, rtol=1e-2,
    ),
    LoopCase(
        name="power_iteration_return_raise",
        origin="f-dangel/cockpit backboard/eigen.py power_iteration",
        make=PowerIteration,
        example=(_spd(3, 0), torch.ones(3)),
        dynamic_shapes={"A": {0: "n", 1: "n"}, "v0": {0: "n"}},
        held_out=[(torch.diag(_t([3.0, 1.0])), _t([1.0, 0.0])),
                  (_spd(4, 1), torch.ones(4)),
                  (_t([[2.0]]), _t([1.0]))],
        exits=["v0 eigenvector: return on trip 2", "several trips then return", "n=1: return on trip 2"],
        atol=1e-3, rtol=1e-2,
    ),
    LoopCase(
        name="sinkhorn_item_err",
        origin="rythei/PyTorchOT ot_pytorch.py sink",
        make=Sinkhorn,
        example=(torch.rand(4, 3, generator=torch.Generator().manual_seed(0)),),
        dynamic_shapes={"M": {0: "n", 1: "m"}},
        held_out=[(torch.rand(3, 1, generator=torch.Generator().manual_seed(1)),),
                  (torch.rand(2, 5, generator=torch.Generator().manual_seed(2)),),
                  (torch.rand(1, 1, generator=torch.Generator().manual_seed(3)),)],
        exits=["m=1: err ~ 0 after trip 1, while test false", "m=5: numItermax bound",
               "1x1: 1 trip"],
    ),
    LoopCase(
        name="bfs_frontier_while_true",
        origin="stineje/ecen4293F25 Python/matrix/matrix_graph_traversal.py",
        make=BfsFrontier,
        example=(_adj(5, [(0, 1), (1, 2), (0, 3)]), torch.tensor(0)),
        dynamic_shapes={"A": {0: "n", 1: "n"}, "start": None},
        held_out=[(_adj(3, [(1, 2)]), torch.tensor(0)),
                  (_adj(2, [(0, 1)]), torch.tensor(1)),
                  (_adj(6, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]), torch.tensor(0)),
                  (_adj(1, []), torch.tensor(0))],
        exits=["isolated start: break on trip 1", "2 nodes: break on trip 2",
               "path of 6: break on trip 6", "1 node: break on trip 1"],
    ),
    LoopCase(
        name="dijkstra_matrix_nested_for",
        origin="Ravineel/Python DSA/Graphs/dijkstra.py dijkstra",
        make=DijkstraMatrix,
        example=(_wmat(4, [(0, 1, 10), (0, 2, 80), (1, 2, 6), (2, 3, 7)]), torch.tensor(0)),
        dynamic_shapes={"Wmat": {0: "n", 1: "n"}, "s": None},
        held_out=[(_wmat(1, []), torch.tensor(0)),
                  (_wmat(3, [(1, 2, 4)]), torch.tensor(0)),
                  (_wmat(7, [(0, 1, 10), (0, 2, 80), (1, 2, 6), (1, 4, 20), (2, 3, 70), (4, 5, 50),
                             (4, 6, 5), (5, 6, 10)]), torch.tensor(0))],
        exits=["1 node: 1 outer trip", "unreachable nodes: all rows visited at infinity",
               "the origin's own 7-node example"],
    ),
    LoopCase(
        name="kornia_connected_components_static",
        origin="kornia kornia/contrib/connected_components.py connected_components",
        make=KorniaConnectedComponents,
        example=(_grid([[1, 1, 0, 0], [0, 1, 0, 1], [0, 0, 0, 1], [1, 0, 1, 1]]),),
        dynamic_shapes={"image": {2: "h", 3: "w"}},
        held_out=[(_grid([[1, 0, 1], [0, 0, 0], [1, 1, 1]]),),
                  (_grid([[1]]),),
                  (_grid([[1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 1], [1, 1, 1, 1, 0, 1], [1, 0, 0, 1, 1, 1]]),)],
        exits=["3x3: static 12 trips", "1x1", "4x6 snake (needs >8 propagation steps)"],
    ),
    LoopCase(
        name="union_find_path_halving",
        origin="path-halving union-find (common public pattern, code search)",
        make=UnionFindComponents,
        example=(torch.tensor([[0, 1], [2, 3], [1, 3]]), torch.zeros(5)),
        dynamic_shapes={"edges": {0: "e"}, "n_nodes": {0: "n"}},
        held_out=[(torch.tensor([[0, 0]]), torch.zeros(1)),
                  (torch.tensor([[0, 1], [1, 2], [2, 3], [3, 4], [0, 4]]), torch.zeros(6)),
                  (torch.tensor([[3, 2], [2, 1], [1, 0]]), torch.zeros(4))],
        exits=["self-loop, 1 node: find 0 trips, ra == rb", "chain then a cycle edge: finds of 2+ trips",
               "reverse chain: long find paths, path halving writes"],
    ),
    LoopCase(
        name="flood_fill_until_stable",
        origin="region growing by dilation (doctr dilate) in `while True: ... torch.equal` loop",
        make=FloodFillDilate,
        example=(_grid([[1, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]),
                 _grid([[1, 1, 0, 1], [0, 1, 0, 1], [0, 1, 1, 1], [0, 0, 0, 1]])),
        dynamic_shapes={"seed": {2: "h", 3: "w"}, "allowed": {2: "h", 3: "w"}},
        held_out=[(_grid([[1]]), _grid([[1]])),
                  (_grid([[0, 1], [0, 0]]), _grid([[0, 1], [1, 1]])),
                  (_grid([[1, 0, 0, 0, 0], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0]]),
                   _grid([[1, 1, 1, 1, 1], [0, 0, 0, 0, 1], [1, 1, 1, 1, 1]]))],
        exits=["1x1 already full: break on trip 1", "2x2: 2 trips", "snake: N trips"],
    ),
    LoopCase(
        name="dfs_list_stack_pop",
        origin="iterative DFS with a list stack (textbook pattern; bfs(adjacency_matrix) via code search)",
        make=DfsListStack,
        example=(_adj(4, [(0, 1), (1, 2), (0, 3)]), torch.tensor(0)),
        dynamic_shapes={"A": {0: "n", 1: "n"}, "source": None},
        held_out=[(_adj(1, []), torch.tensor(0)),
                  (_adj(3, [(0, 1), (1, 2), (0, 2)]), torch.tensor(1)),
                  (_adj(5, [(0, 1), (2, 3)]), torch.tensor(2))],
        exits=["1 node: 1 trip", "triangle: revisits hit `continue`", "two components"],
    ),
    LoopCase(
        name="wordpiece_greedy_longest_match",
        origin="google-research/bert tokenization.py WordpieceTokenizer.tokenize",
        make=WordPieceIds,
        example=(torch.tensor([1, 2, 3, 4]),),
        dynamic_shapes={"chars": {0: "len"}},
        held_out=[(torch.tensor([1]),),
                  (torch.tensor([1, 2, 3]),),
                  (torch.tensor([1, 2, 2, 4]),),
                  (torch.tensor([4, 1]),),
                  (torch.tensor([1, 4, 3]),)],
        exits=["'a': 1 outer trip, inner break on trip 1", "'abc': longest match whole word",
               "'abbd': inner loop shrinks end, 3 pieces", "'da': no piece, is_bad break -> [UNK]",
               "'adc': '##d' then '##c'"],
    ),
    LoopCase(
        name="minbpe_encode_merge",
        origin="karpathy/minbpe basic.py encode + base.py merge",
        make=MinBpeEncode,
        example=(torch.tensor([1, 2, 3, 1, 2, 1]),),
        dynamic_shapes={"ids": {0: "len"}},
        held_out=[(torch.tensor([3]),),
                  (torch.tensor([3, 3]),),
                  (torch.tensor([1, 2]),),
                  (torch.tensor([1, 2, 3, 1]),),
                  (torch.tensor([2, 2, 2, 1, 2, 1, 2, 3]),)],
        exits=["len 1: outer while false at once", "no merge rank: break on trip 1",
               "one merge empties to len 1: while test false", "chain of merges down to one id",
               "several merges, overlapping pairs in merge()"],
    ),
    LoopCase(
        name="jit_loop_unrolling_int_acc",
        origin="pytorch/pytorch test/test_jit.py test_loop_unrolling",
        make=JitLoopUnrolling,
        example=(torch.tensor(5),),
        dynamic_shapes=None,
        held_out=[(torch.tensor(0),), (torch.tensor(1),), (torch.tensor(2),), (torch.tensor(9),)],
        exits=["0 trips", "1 trip", "2 trips", "9 trips"],
    ),
    LoopCase(
        name="jit_list_append_stack",
        origin="pytorch/pytorch test/test_jit.py list-in-loop tests (append then torch.stack)",
        make=JitListAppendStack,
        example=(torch.randn(4, 3, generator=torch.Generator().manual_seed(0)),),
        dynamic_shapes={"x": {0: "steps"}},
        held_out=[(torch.randn(1, 3, generator=torch.Generator().manual_seed(1)),),
                  (torch.randn(2, 3, generator=torch.Generator().manual_seed(2)),),
                  (torch.randn(7, 3, generator=torch.Generator().manual_seed(3)),)],
        exits=["1 trip", "2 trips", "7 trips"],
    ),
]

# Cases whose converted loop stays a Python loop (static trip count): no Loop op is expected.
STATIC_CASES = {"kornia_connected_components_static"}

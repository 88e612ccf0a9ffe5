"""innetdnn.py — the innet integer model and test set files in Python, and the
integer reference inference (numpy), for tools/dnn/train.py and the checks.

The format and the semantics are specified in docs/dnn.md; src/dnn/model.c and
src/dnn/ref.c are the C side. qinfer() here must agree with innet_dnn_ref_infer()
bit for bit (tests/integration/dnn_levels.sh checks it on the shipped test set).
"""
import struct
import zlib

import numpy as np

MAGIC = b"INNETDNN"
VERSION = 1
TS_MAGIC = b"INNETDTS"
CONV2D, DENSE, RELU, MAXPOOL2, FLATTEN = 1, 2, 3, 4, 5
NAMES = {CONV2D: "conv2d", DENSE: "dense", RELU: "relu", MAXPOOL2: "maxpool2", FLATTEN: "flatten"}


def write_model(path, in_shape, layers):
    """layers: list of dicts {type, [w int8 array, b int32 array, shift, stride, pad]}.
    conv w: (out_c, in_c, kh, kw); dense w: (out, in)."""
    out = bytearray(MAGIC + struct.pack("<HHHHHH", VERSION, len(layers), *in_shape, 0))
    for l in layers:
        t = l["type"]
        if t in (CONV2D, DENSE):
            w = np.asarray(l["w"], dtype=np.int8)
            b = np.asarray(l["b"], dtype="<i4")
            wb = w.tobytes()
            wb += b"\0" * ((-len(wb)) % 4)
            payload = wb + b.tobytes()
            kh, kw = (w.shape[2], w.shape[3]) if t == CONV2D else (0, 0)
            stride, pad = (l.get("stride", 1), l.get("pad", 0)) if t == CONV2D else (0, 0)
            out += struct.pack("<BBBBBBHII", t, l["shift"], kh, kw, stride, pad, 0, w.shape[0], len(payload))
            out += payload
        else:
            out += struct.pack("<BBBBBBHII", t, 0, 0, 0, 0, 0, 0, 0, 0)
    out += struct.pack("<I", zlib.crc32(bytes(out)) & 0xFFFFFFFF)
    with open(path, "wb") as f:
        f.write(out)


def read_model(path):
    """Returns (in_shape, layers) with the same dicts as write_model takes (w, b as numpy)."""
    d = open(path, "rb").read()
    if d[:8] != MAGIC:
        raise ValueError("not an innet model file")
    if struct.unpack("<I", d[-4:])[0] != zlib.crc32(d[:-4]) & 0xFFFFFFFF:
        raise ValueError("CRC mismatch")
    ver, n, c, h, w, _ = struct.unpack("<HHHHHH", d[8:20])
    if ver != VERSION:
        raise ValueError("version %d" % ver)
    shape = (c, h, w)
    off = 20
    layers = []
    for _ in range(n):
        t, shift, kh, kw, stride, pad, _r, units, plen = struct.unpack("<BBBBBBHII", d[off:off + 16])
        off += 16
        l = {"type": t}
        if t in (CONV2D, DENSE):
            if t == CONV2D:
                nw = units * shape[0] * kh * kw
                wshape = (units, shape[0], kh, kw)
            else:
                nw = units * shape[0] * shape[1] * shape[2]
                wshape = (units, nw // units)
            l["w"] = np.frombuffer(d, dtype=np.int8, count=nw, offset=off).reshape(wshape)
            l["b"] = np.frombuffer(d, dtype="<i4", count=units, offset=off + nw + (-nw) % 4).astype(np.int64)
            l.update(shift=shift, stride=stride, pad=pad)
            off += plen
            if t == CONV2D:
                shape = (units, (shape[1] + 2 * pad - kh) // stride + 1, (shape[2] + 2 * pad - kw) // stride + 1)
            else:
                shape = (units, 1, 1)
        elif t == MAXPOOL2:
            shape = (shape[0], shape[1] // 2, shape[2] // 2)
        elif t == FLATTEN:
            shape = (shape[0] * shape[1] * shape[2], 1, 1)
        layers.append(l)
    return (c, h, w), layers


def requant(acc, shift):
    """Round half up by shift bits (arithmetic shift), saturate to int8."""
    acc = acc.astype(np.int64)
    if shift > 0:
        acc = (acc + (1 << (shift - 1))) >> shift
    return np.clip(acc, -128, 127)


def conv_int(x, w, b, stride, pad):
    """x: (N, C, H, W) int64; w: (O, C, kh, kw). Exact integer conv with zero padding."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, o, oh, ow), dtype=np.int64) + b.reshape(1, o, 1, 1)
    w64 = w.astype(np.int64)
    for ky in range(kh):
        for kx in range(kw):
            patch = xp[:, :, ky:ky + stride * oh:stride, kx:kx + stride * ow:stride]  # N C oh ow
            out += np.einsum("nchw,oc->nohw", patch, w64[:, :, ky, kx])
    return out


def qinfer(layers, x):
    """x: (N, C, H, W) int8 inputs. Returns int64 logits (N, classes)."""
    a = x.astype(np.int64)
    for i, l in enumerate(layers):
        last = i == len(layers) - 1
        t = l["type"]
        if t == CONV2D:
            acc = conv_int(a, l["w"], l["b"], l["stride"], l["pad"])
            a = acc if last else requant(acc, l["shift"])
        elif t == DENSE:
            acc = a.reshape(a.shape[0], -1) @ l["w"].astype(np.int64).T + l["b"]
            a = (acc if last else requant(acc, l["shift"])).reshape(a.shape[0], -1, 1, 1)
        elif t == RELU:
            a = np.maximum(a, 0)
        elif t == MAXPOOL2:
            n, c, h, w = a.shape
            h2, w2 = h // 2, w // 2
            a = a[:, :, :2 * h2, :2 * w2].reshape(n, c, h2, 2, w2, 2).max(axis=(3, 5))
        elif t == FLATTEN:
            a = a.reshape(a.shape[0], -1, 1, 1)
    return a.reshape(a.shape[0], -1)


def write_testset(path, x, labels):
    """x: (N, C, H, W) int8; labels: (N,) 0..255."""
    n, c, h, w = x.shape
    out = bytearray(TS_MAGIC + struct.pack("<HHHHI", 1, c, h, w, n))
    for i in range(n):
        out += bytes([int(labels[i])]) + np.asarray(x[i], dtype=np.int8).tobytes()
    with open(path, "wb") as f:
        f.write(out)


def read_testset(path):
    d = open(path, "rb").read()
    if d[:8] != TS_MAGIC:
        raise ValueError("not an innet test set")
    _v, c, h, w, n = struct.unpack("<HHHHI", d[8:20])
    rec = 1 + c * h * w
    arr = np.frombuffer(d, dtype=np.uint8, offset=20).reshape(n, rec)
    return arr[:, 1:].view(np.int8).reshape(n, c, h, w), arr[:, 0].copy()

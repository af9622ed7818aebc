#!/usr/bin/python3
"""Independent PyTorch implementation of a Llama/deci forward pass with LoRA, for the
parity test. It parses GGUF itself (F32 tensors only) and shares no code with clone.

usage: torch_reference.py MODEL.gguf TOKENS.txt OUT.npy [ADAPTER.gguf:WEIGHT ...]
Writes the logits of every token, float64 [n_tokens, n_vocab], as raw little-endian.
With HIDDEN_LAYERS=k in the environment it writes instead the mean over tokens of the
hidden states after the first k layers, float64 [n_embd] (no adapters apply).
"""
import struct
import sys

import numpy as np
import torch

torch.set_default_dtype(torch.float64)


def read_gguf(path):
    data = open(path, "rb").read()
    pos = 0

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return vals[0] if len(vals) == 1 else vals

    def string():
        n = take("Q")
        nonlocal pos
        s = data[pos:pos + n].decode("utf-8", errors="replace")
        pos += n
        return s

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        return take(scalar[t])

    assert take("I") == 0x46554747, "not GGUF"
    version = take("I")
    assert version in (2, 3)
    n_tensors, n_kv = take("Q"), take("Q")
    kv = {}
    for _ in range(n_kv):
        k = string()
        kv[k] = value(take("I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        nd = take("I")
        ne = [take("q") for _ in range(nd)]
        ttype, off = take("I"), take("Q")
        infos.append((name, ne, ttype, off))
    align = kv.get("general.alignment", 32)
    base = (pos + align - 1) // align * align
    tensors = {}
    for name, ne, ttype, off in infos:
        assert ttype == 0, f"{name}: reference reads F32 only"
        count = int(np.prod(ne))
        arr = np.frombuffer(data, dtype="<f4", count=count, offset=base + off).astype(np.float64)
        tensors[name] = torch.from_numpy(arr.reshape(list(reversed(ne))).copy())  # [rows, cols]
    return kv, tensors


def rms_norm(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def rope(x, pos, base):
    # x [T, H, D]; rotate adjacent pairs (2i, 2i+1) by pos * base^(-2i/D)
    T, H, D = x.shape
    inv = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    ang = pos[:, None].double() * inv[None, :]  # [T, D/2]
    c, s = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x0 * c - x1 * s
    out[..., 1::2] = x0 * s + x1 * c
    return out


def main():
    model_path, tokens_path, out_path = sys.argv[1:4]
    adapters = []
    for spec in sys.argv[4:]:
        p, w = spec.rsplit(":", 1)
        akv, at = read_gguf(p)
        adapters.append((float(w) * akv["adapter.lora.alpha"], at))
    kv, W = read_gguf(model_path)
    arch = kv["general.architecture"]
    g = lambda k, d=None: kv.get(f"{arch}.{k}", d)
    L = g("block_count")
    per = lambda v: v if isinstance(v, list) else [v] * L
    heads, kvh, ff = per(g("attention.head_count")), per(g("attention.head_count_kv")), per(g("feed_forward_length"))
    dk = g("attention.key_length")
    dv = g("attention.value_length", dk)
    eps = g("attention.layer_norm_rms_epsilon")
    base = g("rope.freq_base", 10000.0)
    tokens = [int(t) for t in open(tokens_path).read().split()]
    T = len(tokens)
    pos = torch.arange(T)

    import os
    stop = int(os.environ.get("HIDDEN_LAYERS", "-1"))
    if stop >= 0:
        adapters = []

    def lin(name, x):
        y = x @ W[name].T
        for scale_alpha, at in adapters:
            if name + ".lora_a" in at:
                A, B = at[name + ".lora_a"], at[name + ".lora_b"]  # [r, in], [out, r]
                y = y + (scale_alpha / A.shape[0]) * ((x @ A.T) @ B.T)
        return y

    x = W["token_embd.weight"][tokens]
    mask = torch.full((T, T), float("-inf")).triu(1)
    for l in range(L):
        if l == stop:
            break
        b = f"blk.{l}."
        if heads[l] > 0:
            h = rms_norm(x, W[b + "attn_norm.weight"], eps)
            q = rope(lin(b + "attn_q.weight", h).view(T, heads[l], dk), pos, base)
            k = rope(lin(b + "attn_k.weight", h).view(T, kvh[l], dk), pos, base)
            v = lin(b + "attn_v.weight", h).view(T, kvh[l], dv)
            rep = heads[l] // kvh[l]
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
            att = torch.einsum("thd,shd->hts", q, k) / dk ** 0.5 + mask
            o = torch.einsum("hts,shd->thd", torch.softmax(att, -1), v).reshape(T, heads[l] * dv)
            x = x + lin(b + "attn_output.weight", o)
        if ff[l] > 0:
            h = rms_norm(x, W[b + "ffn_norm.weight"], eps)
            x = x + lin(b + "ffn_down.weight", torch.nn.functional.silu(lin(b + "ffn_gate.weight", h)) * lin(b + "ffn_up.weight", h))
    if stop >= 0:
        x.mean(0).numpy().astype("<f8").tofile(out_path)
        return
    x = rms_norm(x, W["output_norm.weight"], eps)
    out = W.get("output.weight", W["token_embd.weight"])
    logits = x @ out.T
    logits.numpy().astype("<f8").tofile(out_path)


if __name__ == "__main__":
    main()

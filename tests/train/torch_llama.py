#!/usr/bin/python3
"""An independent PyTorch Llama (adjacent-pair RoPE, GQA, SwiGLU, RMSNorm; per-layer
head counts and FFN widths, layers without attention or FFN; LoRA adapters), used two ways:

  torch_llama.py parity IN OUT   one training step: the loss, every gradient, and every
                                 tensor after one torch.optim.AdamW step (see parity()).
  torch_llama.py bench [--threads N] [--n-embd D] ...   training throughput (tokens/s)
                                 of the same model and batch clone's `train bench` runs.
"""
import argparse
import json
import math
import sys
import time

import numpy as np
import torch


def rope(x, n_heads, head_dim, pos, base):
    # x [n, n_heads * head_dim]; pairs (2i, 2i+1) rotate by pos * base^(-2i/head_dim)
    n = x.shape[0]
    x = x.view(n, n_heads, head_dim // 2, 2)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    theta = pos.to(torch.float64)[:, None] * torch.pow(torch.tensor(base, dtype=torch.float64),
                                                       -2.0 * i / head_dim)[None, :]
    c = torch.cos(theta).to(x.dtype)[:, None, :]
    s = torch.sin(theta).to(x.dtype)[:, None, :]
    a, b = x[..., 0], x[..., 1]
    return torch.stack((a * c - b * s, a * s + b * c), dim=-1).reshape(n, n_heads * head_dim)


def rmsnorm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def forward(p, cfg, tokens, n_seq, seq_len, adapters=()):
    """cfg: n_embd, head_dim, eps, rope_base, layers = [[n_head, n_head_kv, n_ff], ...] (a
    layer with 0 heads has no attention, one with n_ff 0 no FFN), tied (head = embedding).
    adapters: [(weight * alpha / rank, {"<tensor>.lora_a": A [r, in], ".lora_b": B [out, r]})]."""
    hd, eps, base = cfg["head_dim"], cfg["eps"], cfg["rope_base"]
    n = n_seq * seq_len
    pos = torch.arange(seq_len).repeat(n_seq)
    x = p["token_embd.weight"][tokens]
    mask = torch.full((seq_len, seq_len), float("-inf")).triu(1)

    def lin(name, h):
        y = h @ p[name].T
        for s, t in adapters:
            if name + ".lora_a" in t:
                y = y + s * ((h @ t[name + ".lora_a"].T) @ t[name + ".lora_b"].T)
        return y

    for l, (H, Hkv, ff) in enumerate(cfg["layers"]):
        b = f"blk.{l}."
        if H > 0:
            h = rmsnorm(x, p[b + "attn_norm.weight"], eps)
            q = rope(lin(b + "attn_q.weight", h), H, hd, pos, base)
            k = rope(lin(b + "attn_k.weight", h), Hkv, hd, pos, base)
            v = lin(b + "attn_v.weight", h)
            q = q.view(n_seq, seq_len, H, hd).transpose(1, 2)
            k = k.view(n_seq, seq_len, Hkv, hd).transpose(1, 2).repeat_interleave(H // Hkv, dim=1)
            v = v.view(n_seq, seq_len, Hkv, hd).transpose(1, 2).repeat_interleave(H // Hkv, dim=1)
            att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(hd) + mask, dim=-1)
            a = (att @ v).transpose(1, 2).reshape(n, H * hd)
            x = x + lin(b + "attn_output.weight", a)
        if ff > 0:
            h = rmsnorm(x, p[b + "ffn_norm.weight"], eps)
            x = x + lin(b + "ffn_down.weight",
                        torch.nn.functional.silu(lin(b + "ffn_gate.weight", h)) * lin(b + "ffn_up.weight", h))
    x = rmsnorm(x, p["output_norm.weight"], eps)
    head = p["token_embd.weight"] if cfg.get("tied") else p["output.weight"]
    return x @ head.T


def parity(inp, out):
    """IN: a JSON header line (config, tensors [[name, shape], ...] in order, adapters
    [{"scale": weight * alpha / rank, "tensors": [names]}], the AdamW step), then every
    tensor (float32, header order), int32 tokens, int32 targets and, with "kd_weight" >= 0,
    the teacher's logits (float32, [tokens, vocab]). OUT: the loss (float64),
    every gradient, then every tensor after one AdamW step (float32, header order)."""
    with open(inp, "rb") as f:
        header = json.loads(f.readline())
        params = {}
        for name, shape in header["tensors"]:
            count = int(np.prod(shape))
            params[name] = torch.tensor(np.fromfile(f, dtype=np.float32, count=count).reshape(shape),
                                        requires_grad=True)
        n = header["n_seq"] * header["seq_len"]
        tokens = torch.tensor(np.fromfile(f, dtype=np.int32, count=n).astype(np.int64))
        targets = torch.tensor(np.fromfile(f, dtype=np.int32, count=n).astype(np.int64))
    adapters = [(a["scale"], {t: params[t] for t in a["tensors"]}) for a in header["adapters"]]
    logits = forward(params, header, tokens, header["n_seq"], header["seq_len"], adapters)
    w = header.get("kd_weight", -1)
    if w >= 0:  # distillation: (1 - w) CE + w KL(teacher || model) over the rows with a target
        with open(inp, "rb") as f:
            f.seek(-n * logits.shape[1] * 4, 2)
            teacher = torch.tensor(np.fromfile(f, dtype=np.float32).reshape(n, logits.shape[1]))
        rows = targets >= 0
        log_q = torch.nn.functional.log_softmax(logits[rows], dim=-1)
        log_p = torch.nn.functional.log_softmax(teacher[rows], dim=-1)
        kl = torch.nn.functional.kl_div(log_q, log_p, log_target=True, reduction="none").sum(-1)
        ce = torch.nn.functional.nll_loss(log_q, targets[rows], reduction="none")
        loss = ((1 - w) * ce + w * kl).mean()
    else:
        loss = torch.nn.functional.cross_entropy(logits, targets, ignore_index=-1)
    loss.backward()
    names = [name for name, _ in header["tensors"]]
    grads = [params[name].grad.detach().clone() for name in names]
    # One AdamW step as torch.optim.AdamW takes it: the global norm clipped first, decoupled
    # weight decay on matrices only (tensors of 1 dimension in a group without decay).
    o = header["adamw"]
    torch.nn.utils.clip_grad_norm_([params[k] for k in names], o["clip"])
    groups = [{"params": [params[k] for k in names if params[k].dim() >= 2], "weight_decay": o["weight_decay"]},
              {"params": [params[k] for k in names if params[k].dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"])
    opt.step()
    with open(out, "wb") as f:
        np.array([loss.item()], dtype=np.float64).tofile(f)
        for g in grads:
            g.numpy().astype(np.float32).tofile(f)
        for name in names:
            params[name].detach().numpy().astype(np.float32).tofile(f)


def bench(a):
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    hd = a.n_embd // a.n_head
    cfg = dict(n_embd=a.n_embd, head_dim=hd, eps=1e-5, rope_base=10000.0,
               layers=[[a.n_head, a.n_head_kv, a.n_ff]] * a.n_layer)
    shapes = {"token_embd.weight": (a.vocab, a.n_embd), "output_norm.weight": (a.n_embd,),
              "output.weight": (a.vocab, a.n_embd)}
    for l in range(a.n_layer):
        shapes.update({f"blk.{l}.attn_norm.weight": (a.n_embd,), f"blk.{l}.ffn_norm.weight": (a.n_embd,),
                       f"blk.{l}.attn_q.weight": (a.n_head * hd, a.n_embd),
                       f"blk.{l}.attn_k.weight": (a.n_head_kv * hd, a.n_embd),
                       f"blk.{l}.attn_v.weight": (a.n_head_kv * hd, a.n_embd),
                       f"blk.{l}.attn_output.weight": (a.n_embd, a.n_head * hd),
                       f"blk.{l}.ffn_gate.weight": (a.n_ff, a.n_embd),
                       f"blk.{l}.ffn_up.weight": (a.n_ff, a.n_embd),
                       f"blk.{l}.ffn_down.weight": (a.n_embd, a.n_ff)})
    p = {k: (torch.randn(s) * 0.02 if len(s) == 2 else torch.ones(s)).requires_grad_() for k, s in shapes.items()}
    opt = torch.optim.AdamW(p.values(), lr=1e-3)
    n = a.batch * a.seq_len
    times = []
    for step in range(a.warmup + a.steps):
        tokens = torch.randint(0, a.vocab, (n,))
        targets = torch.randint(0, a.vocab, (n,))
        t0 = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(forward(p, cfg, tokens, a.batch, a.seq_len), targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
    dt = sum(times) / len(times)
    print(json.dumps({"impl": "pytorch " + torch.__version__, "threads": a.threads,
                      "params": sum(v.numel() for v in p.values()),
                      "tokens_per_step": n, "step_s": dt, "tokens_per_s": n / dt}))


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "parity":
        parity(sys.argv[2], sys.argv[3])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["bench"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--n-embd", type=int, default=192)
    ap.add_argument("--n-layer", type=int, default=12)
    ap.add_argument("--n-head", type=int, default=6)
    ap.add_argument("--n-head-kv", type=int, default=2)
    ap.add_argument("--n-ff", type=int, default=512)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    bench(ap.parse_args())


if __name__ == "__main__":
    main()

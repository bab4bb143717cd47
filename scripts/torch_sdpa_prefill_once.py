#!/usr/bin/env python3
"""One PyTorch SDPA call on the GPU (bf16, [b, h, s, d]), for a profiler to capture: a prefill,
or with --query-len 1 and --kv-heads a grouped-query decode over a contiguous cache, e.g.

    ncu --clock-control none -k regex:'sdpa|fmha|flash' --launch-count 1 \\
        python3 scripts/torch_sdpa_prefill_once.py --backend cudnn --seq 16384 --causal
    ncu ... python3 scripts/torch_sdpa_prefill_once.py --batch 64 --seq 4096 --query-len 1 \\
        --heads 32 --kv-heads 8

The inputs are those of scripts/bench_torch_sdpa.py (uniform queries in [-2, 2], keys and
values in [-1, 1]); one warm-up call precedes the one to profile.
"""
import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "fa2": SDPBackend.FLASH_ATTENTION}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=sorted(BACKENDS), default="cudnn")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--seq", type=int, default=16384, help="keys per sequence")
    ap.add_argument("--query-len", type=int, help="queries per sequence (default: --seq)")
    ap.add_argument("--kv-heads", type=int, help="KV heads (default: --heads)")
    ap.add_argument("--head-size", type=int, default=128)
    ap.add_argument("--causal", action="store_true")
    args = ap.parse_args()
    q_len = args.query_len or args.seq
    kv_heads = args.kv_heads or args.heads
    if args.causal and q_len != args.seq:
        ap.error("--causal takes as many queries as keys (SDPA's causal mask is top-left aligned)")
    g = torch.Generator(device="cuda").manual_seed(1)
    kv_shape = (args.batch, kv_heads, args.seq, args.head_size)
    q_shape = (args.batch, args.heads, q_len, args.head_size)
    q = (torch.rand(*q_shape, device="cuda", generator=g) * 4 - 2).to(torch.bfloat16)
    k = (torch.rand(*kv_shape, device="cuda", generator=g) * 2 - 1).to(torch.bfloat16)
    v = (torch.rand(*kv_shape, device="cuda", generator=g) * 2 - 1).to(torch.bfloat16)
    with sdpa_kernel([BACKENDS[args.backend]]):
        for _ in range(2):
            F.scaled_dot_product_attention(q, k, v, is_causal=args.causal, enable_gqa=kv_heads != args.heads)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""One PyTorch SDPA prefill on the GPU (bf16, [b, h, s, d]), for a profiler to capture, e.g.

    ncu --clock-control none -k regex:'sdpa|fmha|flash' --launch-count 1 \\
        python3 scripts/torch_sdpa_prefill_once.py --backend cudnn --seq 16384 --causal

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
    ap.add_argument("--seq", type=int, default=16384)
    ap.add_argument("--head-size", type=int, default=128)
    ap.add_argument("--causal", action="store_true")
    args = ap.parse_args()
    g = torch.Generator(device="cuda").manual_seed(1)
    shape = (args.batch, args.heads, args.seq, args.head_size)
    q = (torch.rand(*shape, device="cuda", generator=g) * 4 - 2).to(torch.bfloat16)
    k = (torch.rand(*shape, device="cuda", generator=g) * 2 - 1).to(torch.bfloat16)
    v = (torch.rand(*shape, device="cuda", generator=g) * 2 - 1).to(torch.bfloat16)
    with sdpa_kernel([BACKENDS[args.backend]]):
        for _ in range(2):
            F.scaled_dot_product_attention(q, k, v, is_causal=args.causal)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()

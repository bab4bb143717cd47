#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention (FlashAttention-2 and cuDNN backends) on the shapes
attnsel_cuda_bench measured, and one table with both.

    python3 scripts/bench_torch_sdpa.py --ours ours.json [--out torch.json]

Prefill runs on contiguous [b, h, s, d] tensors; decode on a contiguous cache with
enable_gqa (PyTorch has no paged cache). Timing: CUDA events around each call, the L2
flushed before each, median of the repeats. TB/s counts K and V bytes once; TFLOP/s counts
4*b*h*s_q*s_kv*d (causal: only the visible keys). The same run measures a bf16 8192^3
matrix product as the compute ceiling.
"""
import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

FLUSH = None


def timed(fn, reps):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ms = []
    for r in range(reps + 3):
        FLUSH.sum()  # a read-only pass evicts L2 without dirty lines to write back
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        if r >= 3:
            ms.append(start.elapsed_time(stop))
    return statistics.median(ms)


def matmul_tflops():
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    ms = timed(lambda: a @ b, 10)
    return 2 * 8192**3 / (ms * 1e-3) / 1e12


def run_shape(r, backend, reps):
    dt = torch.bfloat16
    b, s_q, s_kv, h, hk, d = r["batch"], r["query_len"], r["seq_len"], r["heads"], r["kv_heads"], r["head_size"]
    g = torch.Generator(device="cuda").manual_seed(1)
    q = (torch.rand(b, h, s_q, d, device="cuda", generator=g, dtype=torch.float32) * 4 - 2).to(dt)
    k = (torch.rand(b, hk, s_kv, d, device="cuda", generator=g, dtype=torch.float32) * 2 - 1).to(dt)
    v = (torch.rand(b, hk, s_kv, d, device="cuda", generator=g, dtype=torch.float32) * 2 - 1).to(dt)
    causal = r["causal"] and s_q > 1
    if causal and s_q != s_kv:
        return None  # SDPA's is_causal is top-left aligned; only the square case matches vLLM's
    gqa = hk != h
    with sdpa_kernel([backend]):
        try:
            fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
            fn()
            torch.cuda.synchronize()
        except RuntimeError as e:
            return {"error": str(e).splitlines()[0][:120]}
        ms = timed(fn, reps)
    return {"ms": ms, "tflops": r["flops"] / (ms * 1e-3) / 1e12, "tbs": r["bytes"] / (ms * 1e-3) / 1e12}


def main():
    global FLUSH
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--out")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    ours = json.load(open(args.ours))
    FLUSH = torch.ones(64 << 20, dtype=torch.float32, device="cuda")
    mm = matmul_tflops()
    rows = [r for r in ours["results"] if r["variant"] == "default"]
    options = [r for r in ours["results"] if r["variant"] != "default"]
    backends = {"FA2": SDPBackend.FLASH_ATTENTION, "cuDNN": SDPBackend.CUDNN_ATTENTION}
    torch_results = []
    for r in rows:
        res = {"name": r["name"]}
        for label, be in backends.items():
            res[label] = run_shape(r, be, args.reps * (3 if r["kind"] == "decode" else 1))
        torch_results.append(res)
    if args.out:
        json.dump({"matmul_tflops": mm, "results": torch_results}, open(args.out, "w"), indent=2)

    print()
    print(f"device: {torch.cuda.get_device_name()}   ceilings measured in this run: read {ours['read_gbs'] / 1e3:.2f} TB/s"
          f" (attnsel probe), bf16 matmul 8192^3 {mm:.0f} TFLOP/s (torch)")
    hdr = f"{'shape':<44} {'attnsel':>9} {'FA2':>9} {'cuDNN':>9} {'vs FA2':>7} {'vs cuDNN':>8} {'of ceil':>7} {'err':>8}"
    print(hdr)
    print("-" * len(hdr))
    for r, t in zip(rows, torch_results):
        unit = "tbs" if r["kind"] == "decode" else "tflops"
        ceiling = ours["read_gbs"] / 1e3 if unit == "tbs" else mm

        def val(x):
            return x.get(unit) if isinstance(x, dict) and unit in x else None

        a, f2, cd = r[unit], val(t["FA2"]), val(t["cuDNN"])
        fmt = (lambda x: f"{x:9.3f}") if unit == "tbs" else (lambda x: f"{x:9.1f}")
        cell = lambda x: fmt(x) if x is not None else f"{'n/a':>9}"
        ratio = lambda x: f"{a / x:7.2f}" if x else f"{'-':>7}"
        print(f"{r['name']:<44} {cell(a)} {cell(f2)} {cell(cd)} {ratio(f2)} {ratio(cd):>8} {a / ceiling:7.0%} "
              f"{r['rel_err']:8.1e}")
    print(f"(decode rows in TB/s, prefill rows in TFLOP/s)")
    errors = [(t["name"], k, v["error"]) for t in torch_results for k, v in t.items()
              if isinstance(v, dict) and "error" in v]
    for name, k, e in errors:
        print(f"  {k} on {name}: {e}")
    if options:
        print("\nattnsel with a tuning option:")
        for r in options:
            unit = "tbs" if r["kind"] == "decode" else "tflops"
            print(f"  {r['name']:<44} [{r['variant']}] {r[unit]:.3f} {unit}  {r['plan']}")


if __name__ == "__main__":
    sys.exit(main())

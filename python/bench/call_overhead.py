#!/usr/bin/env python3
"""The Python layer's host cost per layer call: PagedAttention.forward against the same
attnsel_kernel_execute called straight through ctypes, with the tensors exported once and every
argument built beforehand (the same C work: checks against the plan and the kernel).

    OMP_NUM_THREADS=1 PYTHONPATH=python ATTNSEL_LIBRARY=build/src/libattnsel.so \\
        python3 python/bench/call_overhead.py [--framework torch|numpy] [--device cpu|cuda]

The default shape is a small decode (one sequence of 16 tokens, 8 heads of 128, bf16 on torch,
f32 on numpy) so that the kernel is short and the host's share shows. Both timings are the best
of several rounds of many calls, taken alternately in the same run; the difference is the
overhead per call (the target is at most 10 µs)."""
import argparse
import ctypes
import json
import sys
import time


def tensors(framework, device, num_heads, head_size, context, block_size):
    blocks = (context + block_size - 1) // block_size
    shape = (blocks + 1, block_size, num_heads, head_size)
    if framework == "numpy":
        import numpy as np
        rng = np.random.default_rng(0)
        kc = rng.uniform(-1, 1, shape).astype(np.float32)
        return kc, rng.uniform(-1, 1, shape).astype(np.float32), rng.uniform(-1, 1, (1, num_heads, head_size)).astype(
            np.float32), np.empty((1, num_heads, head_size), np.float32)
    import torch
    torch.manual_seed(0)
    kc = torch.rand(shape, dtype=torch.bfloat16, device=device) * 2 - 1
    vc = torch.rand(shape, dtype=torch.bfloat16, device=device) * 2 - 1
    q = torch.rand(1, num_heads, head_size, dtype=torch.bfloat16, device=device) * 2 - 1
    return kc, vc, q, torch.empty_like(q)


def measure(forward, direct, calls, rounds, sync):
    """Best µs per call of each, alternating rounds."""
    for _ in range(max(calls // 10, 20)):
        forward()
        direct()
    sync()
    best = {"forward": float("inf"), "direct": float("inf")}
    for _ in range(rounds):
        for name, fn in (("direct", direct), ("forward", forward)):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            sync()
            best[name] = min(best[name], (time.perf_counter() - t0) / calls * 1e6)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--framework", choices=["torch", "numpy"], default="torch")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--num-heads", type=int, default=8)
    parser.add_argument("--head-size", type=int, default=128)
    parser.add_argument("--context", type=int, default=16, help="tokens of the one sequence (default 16)")
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--calls", type=int, default=5000, help="calls per round (default 5000)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    if args.device == "cuda" and args.framework != "torch":
        parser.error("--device cuda needs --framework torch")

    import attnsel
    from attnsel import _library as L
    from attnsel._dlpack import exported

    kc, vc, q, out = tensors(args.framework, args.device, args.num_heads, args.head_size, args.context,
                             args.block_size)
    attn = attnsel.PagedAttention(args.num_heads, args.head_size, args.num_heads, device=args.device)
    blocks = (args.context + args.block_size - 1) // args.block_size
    step = attn.plan(kc, vc, [0, 1], [args.context], [list(range(1, blocks + 1))])

    sync = lambda: None  # noqa: E731
    stream = None
    if args.device == "cuda":
        import torch
        sync = torch.cuda.synchronize
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    # The C call alone: every argument built once, the tensors' DLTensors kept.
    keep = [exported(t, n) for t, n in ((q, "query"), (kc, "key_cache"), (vc, "value_cache"), (out, "output"))]
    execute = L.lib.attnsel_kernel_execute
    c_args = (attn._handle, step._handle) + tuple(e.pointer for e in keep) + (None, stream)

    def direct():
        if execute(*c_args):
            raise RuntimeError(L.last_error())

    best = measure(lambda: attn.forward(q, kc, vc, step, out), direct, args.calls, args.rounds, sync)
    result = {"framework": args.framework, "device": args.device, "shape": {
        "num_seqs": 1, "context": args.context, "num_heads": args.num_heads, "head_size": args.head_size},
        "forward_us": round(best["forward"], 3), "c_execute_us": round(best["direct"], 3),
        "python_overhead_us": round(best["forward"] - best["direct"], 3)}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{args.framework} on {args.device}, 1 x {args.context} tokens, {args.num_heads} heads x {args.head_size}: "
              f"forward {best['forward']:.2f} µs, C execute alone {best['direct']:.2f} µs, "
              f"Python overhead {best['forward'] - best['direct']:.2f} µs per call (target <= 10)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

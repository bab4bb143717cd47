#!/usr/bin/env python3
"""FLASH_ATTN's CUDA kernels from Python on torch tensors: correctness against PyTorch's
scaled_dot_product_attention on the same data, on torch's current stream (the default one and
a side stream), and the Python layer's host cost per call.

    python3 scripts/gpu_torch_check.py --library build/libattnsel.so [--json out.json]

The per-call overhead is the host time of PagedAttention.forward minus that of calling
attnsel_kernel_execute directly through ctypes with tensors exported once (the same C work),
both measured over many calls in the same run; the target is at most 10 µs."""
import argparse
import ctypes
import json
import math
import os
import sys
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--library", help="libattnsel.so to use (default: the installed one)")
    parser.add_argument("--calls", type=int, default=2000, help="calls per timing (default 2000)")
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args()
    if args.library:
        os.environ["ATTNSEL_LIBRARY"] = os.path.abspath(args.library)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import torch
    import attnsel
    from attnsel import _library as L
    from attnsel.kernels import _dlpack

    if not torch.cuda.is_available():
        print("gpu_torch_check: no CUDA device")
        return 2
    torch.manual_seed(0)
    dev = torch.device("cuda")
    results = {"library": attnsel.library_path, "torch": torch.__version__, "device": torch.cuda.get_device_name()}
    failures = []

    def reference(q, k_all, v_all, seq_lens, new_tokens, qsl, h, kvh, d):
        out = torch.empty_like(q, dtype=torch.float32)
        for s, (length, new) in enumerate(zip(seq_lens, new_tokens)):
            k = k_all[s][:length].float().repeat_interleave(h // kvh, dim=1).transpose(0, 1)
            v = v_all[s][:length].float().repeat_interleave(h // kvh, dim=1).transpose(0, 1)
            qs = q[qsl[s]:qsl[s + 1]].float().transpose(0, 1)
            mask = torch.arange(length, device=dev)[None, :] <= torch.arange(new, device=dev)[:, None] + length - new
            o = torch.nn.functional.scaled_dot_product_attention(qs, k, v, attn_mask=mask, scale=1 / math.sqrt(d))
            out[qsl[s]:qsl[s + 1]] = o.transpose(0, 1)
        return out

    def case(name, seq_lens, new_tokens, h=32, kvh=8, d=128, bs=16, stream=None):
        blocks_per = [math.ceil(l / bs) for l in seq_lens]
        num_blocks = sum(blocks_per) + 3
        perm = torch.randperm(num_blocks)
        table = torch.zeros(len(seq_lens), max(blocks_per), dtype=torch.int32)
        used = 0
        for s, n in enumerate(blocks_per):
            table[s, :n] = perm[used:used + n]
            used += n
        k_all = [torch.rand(l, kvh, d, device=dev, dtype=torch.bfloat16) * 2 - 1 for l in seq_lens]
        v_all = [torch.rand(l, kvh, d, device=dev, dtype=torch.bfloat16) * 2 - 1 for l in seq_lens]
        slots = torch.cat([table[s, torch.arange(l) // bs].long() * bs + torch.arange(l) % bs
                           for s, l in enumerate(seq_lens)])
        all_qsl = [0]
        for l in seq_lens:
            all_qsl.append(all_qsl[-1] + l)
        qsl = [0]
        for n in new_tokens:
            qsl.append(qsl[-1] + n)
        attn = attnsel.PagedAttention(h, d, kvh, device="cuda")
        kc = torch.zeros(num_blocks, bs, kvh, d, device=dev, dtype=torch.bfloat16)
        vc = torch.zeros_like(kc)
        q = torch.rand(qsl[-1], h, d, device=dev, dtype=torch.bfloat16) * 2 - 1
        out = torch.full_like(q, float("nan"))
        if stream is not None:
            stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream) if stream is not None else torch.cuda.stream(torch.cuda.current_stream()):
            attn.write_kv_cache(torch.cat(k_all), torch.cat(v_all), kc, vc, attn.plan(all_qsl, seq_lens, table, slots))
            step = attn.plan(qsl, seq_lens, table)
            attn.forward(q, kc, vc, step, out)
            expected = reference(q, k_all, v_all, seq_lens, new_tokens, qsl, h, kvh, d)
        torch.cuda.synchronize()
        err = (out.float() - expected).abs().max().item()
        ok = err <= 2e-2 and not torch.isnan(out).any().item()
        results[name] = {"max_abs_error": err, "passed": ok}
        print(f"{name:40s} max |error| {err:.2e}  {'passed' if ok else 'FAILED'}")
        if not ok:
            failures.append(name)
        return attn, step, q, kc, vc, out

    case("decode 8 x 1000, default stream", [1000 + 7 * i for i in range(8)], [1] * 8)
    case("mixed prefill + decode, default stream", [333, 64, 1025], [333, 1, 17])
    side = torch.cuda.Stream()
    case("decode 4 x 2048, side stream", [2048] * 4, [1] * 4, stream=side)
    attn, step, q, kc, vc, out = case("decode 1 x 4096, for timing", [4096], [1])

    # Host cost per layer call: the package's forward vs the C call with pre-exported tensors.
    exported = [_dlpack(t, n) for t, n in ((q, "q"), (kc, "kc"), (vc, "vc"), (out, "out"))]
    stream = torch.cuda.current_stream().cuda_stream
    execute = L.lib.attnsel_kernel_execute

    def direct():
        return execute(attn._handle, step._handle, exported[0][1], exported[1][1], exported[2][1], exported[3][1],
                       stream)

    def timed(fn):
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(args.calls):
                fn()
            best = min(best, (time.perf_counter() - t0) / args.calls)
            torch.cuda.synchronize()
        return best * 1e6

    c_us = timed(direct)
    py_us = timed(lambda: attn.forward(q, kc, vc, step, out))
    overhead = py_us - c_us
    results["per_call_us"] = {"python_forward": py_us, "c_execute": c_us, "python_overhead": overhead}
    print(f"host time per layer call: forward {py_us:.1f} µs, C execute alone {c_us:.1f} µs, "
          f"Python overhead {overhead:.1f} µs (target <= 10)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    if failures:
        print("gpu_torch_check: FAILED:", ", ".join(failures))
        return 1
    print("gpu_torch_check: all cases passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

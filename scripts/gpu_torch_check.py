#!/usr/bin/env python3
"""FLASH_ATTN's CUDA kernels from Python on torch tensors, through step plans: correctness against
PyTorch's scaled_dot_product_attention on the same data, on torch's current stream (the default
one and a side stream), a plan reused by several layers and updated for the next step, a decode
step captured in a CUDA graph and replayed with new lengths, and the Python layer's host cost
per call.

    python3 scripts/gpu_torch_check.py --library build/src/libattnsel.so [--json out.json]

The per-call overhead is the host time of PagedAttention.forward minus that of calling
attnsel_kernel_execute directly through ctypes with every argument built once (the same C
work), measured alternately in short rounds (fewer launches than the device's queue holds, so
the host is never held back by the device) by python/bench/call_overhead.py's method; the
target is at most 10 µs."""
import argparse
import ctypes
import dataclasses
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--library", help="libattnsel.so to use (default: the installed one)")
    parser.add_argument("--calls", type=int, default=256, help="calls per timing round (default 256)")
    parser.add_argument("--rounds", type=int, default=40, help="timing rounds (default 40)")
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args()
    if args.library:
        os.environ["ATTNSEL_LIBRARY"] = os.path.abspath(args.library)
    sys.path.insert(0, os.path.join(HERE, "..", "python"))
    sys.path.insert(0, os.path.join(HERE, "..", "python", "bench"))
    import torch
    import attnsel
    from attnsel import _library as L
    from attnsel._dlpack import exported
    from call_overhead import measure

    if not torch.cuda.is_available():
        print("gpu_torch_check: no CUDA device")
        return 2
    torch.manual_seed(0)
    dev = torch.device("cuda")
    results = {"library": attnsel.library_path, "torch": torch.__version__, "device": torch.cuda.get_device_name(),
               "kernel": dataclasses.asdict(attnsel.kernel_info("FLASH_ATTN"))}
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

    def record(name, out, expected):
        err = (out.float() - expected).abs().max().item()
        ok = err <= 2e-2 and not torch.isnan(out).any().item()
        results[name] = {"max_abs_error": err, "passed": ok}
        print(f"{name:52s} max |error| {err:.2e}  {'passed' if ok else 'FAILED'}")
        if not ok:
            failures.append(name)

    def prefix(lengths):
        out = [0]
        for n in lengths:
            out.append(out[-1] + n)
        return out

    class Layer:
        """A layer's cache filled with random keys and values for the sequences' full lengths."""

        def __init__(self, attn, seq_lens, table, num_blocks, h, kvh, d, bs):
            self.k_all = [torch.rand(l, kvh, d, device=dev, dtype=torch.bfloat16) * 2 - 1 for l in seq_lens]
            self.v_all = [torch.rand(l, kvh, d, device=dev, dtype=torch.bfloat16) * 2 - 1 for l in seq_lens]
            self.kc = torch.zeros(num_blocks, bs, kvh, d, device=dev, dtype=torch.bfloat16)
            self.vc = torch.zeros_like(self.kc)
            slots = torch.cat([table[s, torch.arange(l) // bs].long() * bs + torch.arange(l) % bs
                               for s, l in enumerate(seq_lens)])
            write = attn.plan(self.kc, self.vc, prefix(seq_lens), seq_lens, table, slots)
            attn.write_kv_cache(torch.cat(self.k_all), torch.cat(self.v_all), self.kc, self.vc, write)

    def batch(seq_lens, bs, spare=3):
        blocks_per = [math.ceil(l / bs) for l in seq_lens]
        num_blocks = sum(blocks_per) + spare
        perm = torch.randperm(num_blocks)
        table = torch.zeros(len(seq_lens), max(blocks_per), dtype=torch.int32)
        used = 0
        for s, n in enumerate(blocks_per):
            table[s, :n] = perm[used:used + n]
            used += n
        return table, num_blocks

    def case(name, seq_lens, new_tokens, h=32, kvh=8, d=128, bs=16, stream=None, layers=1):
        table, num_blocks = batch(seq_lens, bs)
        qsl = prefix(new_tokens)
        attn = attnsel.PagedAttention(h, d, kvh, device="cuda")
        stream = stream or torch.cuda.current_stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # everything below runs on torch's current stream
            group = [Layer(attn, seq_lens, table, num_blocks, h, kvh, d, bs) for _ in range(layers)]
            step = attn.plan(group[0].kc, group[0].vc, qsl, seq_lens, table)
            for i, layer in enumerate(group):
                q = torch.rand(qsl[-1], h, d, device=dev, dtype=torch.bfloat16) * 2 - 1
                out = torch.full_like(q, float("nan"))
                attn.forward(q, layer.kc, layer.vc, step, out)
                expected = reference(q, layer.k_all, layer.v_all, seq_lens, new_tokens, qsl, h, kvh, d)
                torch.cuda.synchronize()
                record(name + (f", layer {i}" if layers > 1 else ""), out, expected)
        return attn, step, group, table

    case("decode 8 x 1000, default stream", [1000 + 7 * i for i in range(8)], [1] * 8)
    case("mixed prefill + decode, default stream", [333, 64, 1025], [333, 1, 17])
    case("decode 4 x 2048, side stream", [2048] * 4, [1] * 4, stream=torch.cuda.Stream())
    attn, step, group, table = case("decode 2 x 1500, one plan for 3 layers", [1500, 1200], [1, 1], layers=3)

    # The next step: the same plan updated to shorter lengths, every layer again.
    h, kvh, d = 32, 8, 128
    lens = [1400, 1111]
    attn.update(step, [0, 1, 2], lens, table)
    for i, layer in enumerate(group):
        q = torch.rand(2, h, d, device=dev, dtype=torch.bfloat16) * 2 - 1
        out = attn.forward(q, layer.kc, layer.vc, step)
        record(f"updated plan 2 x (1400, 1111), layer {i}", out,
               reference(q, layer.k_all, layer.v_all, lens, [1, 1], [0, 1, 2], h, kvh, d))

    # A decode step captured in a CUDA graph once and replayed with new lengths.
    table, num_blocks = batch([3000, 2500], 16)
    graph_layers = [Layer(attn, [3000, 2500], table, num_blocks, h, kvh, d, 16) for _ in range(2)]
    plan = attn.plan(graph_layers[0].kc, graph_layers[0].vc, [0, 1, 2], [2000, 1800], table[:, :125],
                     graph_capturable=True, max_blocks_per_seq=table.shape[1])
    qs = [torch.rand(2, h, d, device=dev, dtype=torch.bfloat16) * 2 - 1 for _ in graph_layers]
    outs = [torch.empty_like(q) for q in qs]
    for layer, q, out in zip(graph_layers, qs, outs):  # warm-up: exports made, lazy loading done
        attn.forward(q, layer.kc, layer.vc, plan, out)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for layer, q, out in zip(graph_layers, qs, outs):
            attn.forward(q, layer.kc, layer.vc, plan, out)
    for lens in ([2000, 1800], [3000, 2500], [17, 2222]):
        attn.update(plan, [0, 1, 2], lens, table)
        for q in qs:
            q.copy_(torch.rand_like(q) * 2 - 1)
        for out in outs:
            out.fill_(float("nan"))
        graph.replay()
        for i, (layer, q, out) in enumerate(zip(graph_layers, qs, outs)):
            record(f"graph replay {lens}, layer {i}", out,
                   reference(q, layer.k_all, layer.v_all, lens, [1, 1], [0, 1, 2], h, kvh, d))

    # Host cost per layer call on a short decode (1 x 16 tokens, 8 heads x 128), where the kernel
    # is brief and the host's share shows.
    small = attnsel.PagedAttention(8, 128, 8, device="cuda")
    kc = torch.rand(2, 16, 8, 128, device=dev, dtype=torch.bfloat16)
    vc = torch.rand_like(kc)
    q = torch.rand(1, 8, 128, device=dev, dtype=torch.bfloat16)
    out = torch.empty_like(q)
    small_step = small.plan(kc, vc, [0, 1], [16], [[1]])
    keep = [exported(t, n) for t, n in ((q, "query"), (kc, "key_cache"), (vc, "value_cache"), (out, "output"))]
    execute = L.lib.attnsel_kernel_execute
    c_args = (small._handle, small_step._handle) + tuple(e.pointer for e in keep) + (
        None, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))

    def direct():
        if execute(*c_args):
            raise RuntimeError(L.last_error())

    best = measure(lambda: small.forward(q, kc, vc, small_step, out), direct, args.calls, args.rounds,
                   torch.cuda.synchronize)
    overhead = best["forward"] - best["direct"]
    results["per_call_us"] = {"python_forward": best["forward"], "c_execute": best["direct"],
                              "python_overhead": overhead}
    print(f"host time per layer call (1 x 16, 8 x 128): forward {best['forward']:.1f} µs, C execute alone "
          f"{best['direct']:.1f} µs, Python overhead {overhead:.1f} µs (target <= 10)")
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

#!/usr/bin/env python3
"""The MLA decode beside FlashMLA, on the shapes of attnsel_mla_cuda_bench, in one run.

FlashMLA (deepseek-ai/FlashMLA) is built here from its sources as a PyTorch extension, its
sm90 dense decode, scheduler and combine only (csrc/sm90/decode/dense, csrc/smxx/decode), with
the CUTLASS headers it names; nothing of it is kept. Both sides are timed the same way: CUDA
events around one decode step (main kernel and combine; the scheduling metadata made once),
median of the repetitions, L2 flushed before each. Bytes and FLOPs are counted as FlashMLA's
benchmark counts them:
    FLOPs = 2 * N * s_q * sum(L) * (576 + 512)
    bytes = sum(L) * 576 * 2 + b * s_q * N * (576 + 512) * 2

    python3 scripts/mla_anchors.py --ours OURS.json --flashmla FLASHMLA_DIR --cutlass CUTLASS_INCLUDE
        [--build-dir DIR] [--out FILE.json] [--reps N]

OURS.json is attnsel_mla_cuda_bench --json's output. Prints the side-by-side table and the
targets each row is held to.
"""
import argparse
import json
import math
import os
import pathlib
import statistics
import sys
import time

import torch

BINDING = r"""
#include "api/dense_decode.h"
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("dense_decode_fwd", &dense_attn_decode_interface); }
"""


def build_flashmla(src: pathlib.Path, cutlass: pathlib.Path, build_dir: pathlib.Path):
    from torch.utils.cpp_extension import load
    build_dir.mkdir(parents=True, exist_ok=True)
    binding = build_dir / "flashmla_dense_binding.cpp"
    binding.write_text(BINDING)
    csrc = src / "csrc"
    sources = [str(binding), str(csrc / "sm90/decode/dense/instantiations/bf16.cu"),
               str(csrc / "smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.cu"),
               str(csrc / "smxx/decode/combine/combine.cu")]
    flags = ["-O3", "-std=c++20", "-DNDEBUG", "-D_USE_MATH_DEFINES", "-DFLASH_MLA_DISABLE_FP16",
             "-Wno-deprecated-declarations", "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
             "-U__CUDA_NO_HALF2_OPERATORS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__", "--expt-relaxed-constexpr",
             "--expt-extended-lambda", "--use_fast_math", "-gencode", "arch=compute_90a,code=sm_90a",
             "--threads", "4"]
    # CUDA 13 keeps libcu++ (cuda/std/...) under include/cccl, where CUTLASS looks for it.
    cuda_home = pathlib.Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
    includes = [str(csrc), str(csrc / "sm90"), str(csrc / "kerutils/include"), str(cutlass),
                str(cuda_home / "include/cccl")]
    started = time.time()
    mod = load(name="flashmla_dense_anchor", sources=sources, extra_cflags=["-O3", "-std=c++20",
               "-DFLASH_MLA_DISABLE_FP16"], extra_cuda_cflags=flags, extra_include_paths=includes,
               build_directory=str(build_dir), verbose=False)
    print(f"FlashMLA dense decode built in {time.time() - started:.0f} s", flush=True)
    return mod


def time_call(fn, reps):
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        flush.zero_()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e-3)
    return statistics.median(times)


def counts(b, L, h, sq):
    sum_l = b * L
    return 2.0 * h * sq * sum_l * (576 + 512), sum_l * 576 * 2 + b * sq * h * (576 + 512) * 2


def flashmla_shape(mod, b, L, h, sq, block, reps):
    torch.manual_seed(0)
    nb = (L + block - 1) // block
    q = torch.randn(b, sq, h, 576, dtype=torch.bfloat16, device="cuda").clamp(-3, 3)
    cache = (torch.rand(b * nb + 1, block, 1, 576, device="cuda") * 2 - 1).to(torch.bfloat16)
    table = (torch.randperm(b * nb, device="cuda", dtype=torch.int32) + 1).view(b, nb)
    seqlens = torch.full((b,), L, dtype=torch.int32, device="cuda")
    scale = 0.1352337789
    out, lse, meta, splits = mod.dense_decode_fwd(q, cache, 512, seqlens, table, scale, True, None, None)

    def step():
        mod.dense_decode_fwd(q, cache, 512, seqlens, table, scale, True, meta, splits)

    # Check it on one row before timing it.
    ref_keys = cache[table[0].long()].reshape(-1, 576)[:L].float()
    s = (q[0, sq - 1].float() @ ref_keys.T) * scale
    ref = torch.softmax(s, dim=-1) @ ref_keys[:, :512]
    err = (out[0, sq - 1].float() - ref).abs().max().item()
    return time_call(step, reps), err


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--flashmla", required=True, type=pathlib.Path)
    ap.add_argument("--cutlass", required=True, type=pathlib.Path)
    ap.add_argument("--build-dir", type=pathlib.Path, default=pathlib.Path("/tmp/flashmla-anchor-build"))
    ap.add_argument("--out")
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    ours = json.load(open(args.ours))
    try:
        mod = build_flashmla(args.flashmla, args.cutlass, args.build_dir)
    except Exception as e:  # the table still shows attnsel's rows
        print(f"FlashMLA could not be built: {e}", file=sys.stderr)
        mod = None
    rows = []
    for r in ours["results"]:
        b, L, h, sq, blk = r["batch"], r["seq_len"], r["heads"], r["query_len"], r["block_size"]
        flops, nbytes = counts(b, L, h, sq)
        row = {"name": r["name"], "ours_s": r["seconds"], "ours_tbs": r["tb_per_s"], "ours_tflops": r["tflop_per_s"]}
        if mod is not None and blk == 64:
            t, err = flashmla_shape(mod, b, L, h, sq, blk, args.reps)
            row.update(flashmla_s=t, flashmla_tbs=nbytes / t * 1e-12, flashmla_tflops=flops / t * 1e-12,
                       flashmla_err=err)
        rows.append(row)
    print(f"\nread bandwidth (same run, attnsel's probe): {ours['read_gb_per_s'] * 1e-3:.2f} TB/s")
    print("FLOPs = 2*N*s_q*sum(L)*(576+512); bytes = sum(L)*576*2 + b*s_q*N*(576+512)*2; "
          "each time = decode + combine, median, L2 flushed\n")
    print(f"| shape | attnsel us | TB/s | TFLOP/s | FlashMLA us | TB/s | TFLOP/s | FlashMLA time / ours |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        fm = (f"{r['flashmla_s'] * 1e6:.1f} | {r['flashmla_tbs']:.2f} | {r['flashmla_tflops']:.0f} | "
              f"{r['flashmla_s'] / r['ours_s']:.2f}") if "flashmla_s" in r else "- | - | - | -"
        print(f"| {r['name']} | {r['ours_s'] * 1e6:.1f} | {r['ours_tbs']:.2f} | {r['ours_tflops']:.0f} | {fm} |")
    if args.out:
        json.dump(rows, open(args.out, "w"), indent=2)


if __name__ == "__main__":
    main()

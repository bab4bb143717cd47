#!/usr/bin/python3
"""The error the Hopper prefill's two fp8-cache products make against the double-precision
attention, modelled in numpy (no GPU): the e4m3 products (queries quantised per row so that
their largest magnitude is 448, S in fp32, online softmax over 128-key tiles with a row maximum
kept until a tile's exceeds it by more than 2^3, P = 2^5·exp2(s − m) rounded to e4m3, l from the
unrounded P) and the f16 products (queries exact, P rounded to f16).
The kernels' own errors are what the GPU tests measure (ATTNSEL_PRINT_ERRORS=1); this model
predicts them and compares with FlashAttention-3's published fp8 setup.

    /usr/bin/python3 scripts/fp8_prefill_error_model.py tests   # the GPU tests' inputs
    /usr/bin/python3 scripts/fp8_prefill_error_model.py fa3     # FA3's: N(0,1) with 0.1 % N(0,10) outliers
"""
import sys

import numpy as np

rng = np.random.default_rng(1)

def e4m3(x):
    x = np.asarray(x, dtype=np.float64)
    a = np.abs(x)
    e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    e = np.maximum(e, -6)
    q = np.exp2(e - 3)
    r = np.round(a / q) * q  # half to even
    r = np.minimum(r, 448.0)
    return np.sign(x) * r

def bf16(x):
    x = np.asarray(x, dtype=np.float32)
    b = x.view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32).astype(np.float64)

def f16(x): return np.asarray(x, np.float32).astype(np.float16).astype(np.float64)

def attend(q, k, v, scale, causal, ctx=0):
    s = q @ k.T * scale
    if causal:
        nq, nk = s.shape
        mask = np.arange(nk)[None, :] > (ctx + np.arange(nq))[:, None]
        s = np.where(mask, -np.inf, s)
    s = s - s.max(1, keepdims=True)
    p = np.exp(s)
    return (p @ v) / p.sum(1, keepdims=True)

def tiled_attention(q, k, v, scale, causal, ctx, tile, round_p, prob_log2=0, lazy_log2=0):
    # online softmax over key tiles as the kernel runs it: S in f32 (exact products), P =
    # 2^prob_log2 exp2(s - m) rounded by round_p for the P.V product, l from the unrounded P;
    # with lazy_log2 > 0 a row keeps its maximum until a tile's exceeds it by more than that
    nq, nk = q.shape[0], k.shape[0]
    m = np.full((nq, 1), -np.inf); l = np.zeros((nq, 1)); o = np.zeros((nq, v.shape[1]))
    log2e = 1.4426950408889634
    for t0 in range(0, nk, tile):
        s = (q @ k[t0:t0+tile].T) * scale * log2e
        if causal:
            mask = np.arange(t0, min(t0+tile, nk))[None, :] > (ctx + np.arange(nq))[:, None]
            s = np.where(mask, -np.inf, s)
        mn = np.maximum(m, s.max(1, keepdims=True))
        if lazy_log2 > 0:  # the kernel's vote is per warp (16 rows); per row is the worst case
            mn = np.where(mn > m + lazy_log2, mn, m)
        ref = np.where(np.isinf(mn), 0, mn)
        corr = np.exp2(np.where(np.isinf(m), -np.inf, m - ref))
        p = np.exp2(s - ref + prob_log2)
        l = l * corr + p.sum(1, keepdims=True)
        o = o * corr + round_p(p) @ v[t0:t0+tile]
        m = mn
    return o / l

def e4m3_products(q, k, v, scale, causal, ctx=0, tile=128, prob_log2=5, per_row=True, lazy_log2=3):
    # q per row (or per tensor) to e4m3 (amax -> 448), its scale undone on S; P offset by 2^5
    # against a maximum up to 2^3 stale, and rounded to e4m3
    amax = np.abs(q).max(1, keepdims=True) if per_row else np.abs(q).max() * np.ones((q.shape[0], 1))
    sc = np.where(amax > 0, 448.0 / amax, 1.0)
    return tiled_attention(e4m3(q * sc) / sc, k, v, scale, causal, ctx, tile, e4m3, prob_log2, lazy_log2)

def f16_products(q, k, v, scale, causal, ctx=0, tile=128):
    # the widened path: q exact in f16 (scaled), P rounded to f16
    return tiled_attention(q, k, v, scale, causal, ctx, tile, f16)

def rel_l2(a, b): return np.sqrt(((a - b) ** 2).sum() / (b ** 2).sum())


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "tests"
    if mode not in ("tests", "fa3"):
        sys.exit("usage: fp8_prefill_error_model.py [tests|fa3]")

    if mode == "tests":
        # the GPU tests' inputs: queries uniform in [-2, 2] (bf16), keys and values uniform [-1, 1] stored as
        # e4m3 of x / scale (k_scale 0.05, v_scale 0.7), causal prefill, scale 1/sqrt(d)
        for d in (64, 96, 128):
            for (nk, nq) in ((131, 131), (389, 257), (1031, 517), (4096, 4096)):
                errs = {}
                for out in ("bf16", "f16"):
                    eq, ef, rf = [], [], []
                    for h in range(2):
                        q = bf16(rng.uniform(-2, 2, (nq, d))) if out == "bf16" else f16(rng.uniform(-2, 2, (nq, d)))
                        k = e4m3(rng.uniform(-1, 1, (nk, d)) / 0.05) * 0.05
                        v = e4m3(rng.uniform(-1, 1, (nk, d)) / 0.7) * 0.7
                        sc = 1 / np.sqrt(d); ctx = nk - nq
                        ref = attend(q, k, v, sc, True, ctx)
                        rnd = bf16 if out == "bf16" else f16
                        eq.append((e4m3_products(q, k / 0.05, v / 0.7, sc * 0.05, True, ctx) * 0.7, ref))
                        ef.append((f16_products(q, k / 0.05, v / 0.7, sc * 0.05, True, ctx) * 0.7, ref))
                        rf.append(ref)
                    rnd = bf16 if out == "bf16" else f16
                    R = np.concatenate([r for _, r in eq])
                    errs[out] = (rel_l2(rnd(np.concatenate([a for a, _ in eq])), R), rel_l2(rnd(np.concatenate([a for a, _ in ef])), R))
                print(f"d={d} kv={nk} q={nq}: e4m3 products rel_l2 bf16 out {errs['bf16'][0]:.3g} f16 out {errs['f16'][0]:.3g}; f16 products bf16 {errs['bf16'][1]:.3g} f16 {errs['f16'][1]:.3g}", flush=True)
    elif mode == "fa3":
        # FlashAttention-3's fp8 accuracy setup (paper, section 4.3): Q, K, V ~ N(0, 1) with 0.1 % of
        # entries N(0, 10); RMSE of the output against an fp64 attention of the unquantised inputs.
        d, n = 128, 4096
        for trial in range(1):
            def gen():
                x = rng.standard_normal((n, d))
                msk = rng.random((n, d)) < 0.001
                x[msk] = rng.standard_normal(msk.sum()) * 10
                return x
            q, k, v = gen(), gen(), gen()
            sc = 1 / np.sqrt(d)
            exact = attend(q, k, v, sc, False)
            ks = np.abs(k).max() / 448; vs = np.abs(v).max() / 448  # per-tensor cache scales
            k8, v8 = e4m3(k / ks), e4m3(v / vs)
            deq = attend(q, k8 * ks, v8 * vs, sc, False)
            ours = e4m3_products(bf16(q), k8, v8, sc * ks, False) * vs
            ours_t = e4m3_products(bf16(q), k8, v8, sc * ks, False, per_row=False) * vs
            f16p = f16_products(bf16(q), k8, v8, sc * ks, False) * vs
            rmse = lambda a, b: np.sqrt(((a - b) ** 2).mean())
            print(f"FA3 setup d={d} n={n}: RMSE vs exact: e4m3 products (Q per row) {rmse(bf16(ours), exact):.3g}, "
                  f"(Q per tensor) {rmse(bf16(ours_t), exact):.3g}, f16 products {rmse(bf16(f16p), exact):.3g}, "
                  f"cache quantisation alone {rmse(deq, exact):.3g}; against the dequantised cache: e4m3 {rmse(bf16(ours), deq):.3g} "
                  f"rel_l2 {rel_l2(bf16(ours), deq):.3g}, f16 {rmse(bf16(f16p), deq):.3g} rel_l2 {rel_l2(bf16(f16p), deq):.3g}")


if __name__ == "__main__":
    main()

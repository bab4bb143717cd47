"""The MLA kernel (CPU_MLA) from Python on numpy arrays, against the un-absorbed MLA computed here in
double precision: a mixed step (decode requests first, then a prefill with cached context read in
several chunks), the absorbed decode kernel alone with its log-sum-exp, concat_and_cache_mla (padding
slots, kv_c and k_pe as slices of one tensor), plans reused and updated, an fp8 cache with a scale
far from 1, and bad input refused by name before anything is written."""
import math

import numpy as np
import pytest

import attnsel

DL, DR, DN, DV, BS = 512, 64, 128, 128, 16
LATENT = DL + DR


def e4m3_to_float(bytes_):
    """float8_e4m3fn bytes as floats (sign, 4 exponent bits of bias 7, 3 mantissa bits; 0x7F is NaN)."""
    b = bytes_.astype(np.int64)
    sign = np.where(b & 0x80, -1.0, 1.0)
    exp = (b >> 3) & 0xF
    man = (b & 0x7).astype(np.float64)
    value = np.where(exp == 0, man / 8.0 * 2.0 ** -6, (1.0 + man / 8.0) * 2.0 ** (exp - 7))
    value = np.where((b & 0x7F) == 0x7F, np.nan, value)
    return sign * value


class Layer:
    """A layer's weights and a batch over a paged latent cache with a shuffled block table; every
    position of every request has its latent (rows of `latents`, in request order)."""

    def __init__(self, rng, heads, seq_lens, query_lens, num_blocks=None, kv_cache_dtype="auto", k_scale=1.0):
        self.heads, self.seq_lens, self.query_lens = heads, list(seq_lens), list(query_lens)
        self.scale = 1.0 / math.sqrt(DN + DR) * 1.37
        w = rng.uniform(-1, 1, (heads, DN + DV, DL))
        w[:, DN:] *= 0.1  # key rows ~ U(-1, 1), value rows ~ U(-0.1, 0.1): logits and values O(1)
        self.w = w.reshape(heads * (DN + DV), DL).astype(np.float32)
        blocks_per_seq = [math.ceil(length / BS) for length in seq_lens]
        self.num_blocks = num_blocks or sum(blocks_per_seq) + 3
        ids = rng.permutation(self.num_blocks)
        self.table = np.full((len(seq_lens), max(blocks_per_seq)), 0, np.int32)
        used = 0
        for s, n in enumerate(blocks_per_seq):
            self.table[s, :n] = ids[used:used + n]
            used += n
        self.latents = rng.uniform(-0.1, 0.1, (sum(seq_lens), LATENT)).astype(np.float32)
        self.starts = np.concatenate([[0], np.cumsum(seq_lens)]).astype(np.int64)
        self.fp8 = kv_cache_dtype.startswith("fp8")
        self.cache = (np.zeros if self.fp8 else np.full)((self.num_blocks, BS, LATENT),
                                                         *(() if self.fp8 else (np.nan,)),
                                                         dtype=np.uint8 if self.fp8 else np.float32)
        self.mla = attnsel.MLAAttention(heads, self.scale, kv_b_proj=self.w, kv_cache_dtype=kv_cache_dtype,
                                        k_scale=k_scale)
        self.k_scale = k_scale
        self.qsl = np.concatenate([[0], np.cumsum(query_lens)]).astype(np.int32)
        self.q = rng.uniform(-0.1, 0.1, (int(self.qsl[-1]), heads, DN + DR)).astype(np.float32)

    def slot(self, seq, pos):
        return int(self.table[seq, pos // BS]) * BS + pos % BS

    def all_slots(self):
        return np.array([self.slot(s, p) for s, n in enumerate(self.seq_lens) for p in range(n)], np.int64)

    def write_everything(self):
        """Every position written through a plan whose new tokens are all of them."""
        plan = self.mla.plan(self.cache, self.starts.astype(np.int32), self.seq_lens, self.table, self.all_slots())
        self.mla.concat_and_cache_mla(self.latents[:, :DL], self.latents[:, DL:], self.cache, plan)

    def new_rows(self):
        """The step's new tokens' latents: the last query_lens[s] positions of each request."""
        return np.concatenate([self.latents[self.starts[s + 1] - q:self.starts[s + 1]]
                               for s, q in enumerate(self.query_lens)])

    def cached(self, seq, pos):
        """A position's latent as the kernel reads it from the cache (fp8 dequantised)."""
        row = self.cache.reshape(-1, LATENT)[self.slot(seq, pos)]
        return e4m3_to_float(row) * self.k_scale if self.fp8 else row.astype(np.float64)

    def reference(self, decode_query_len=1):
        """The un-absorbed MLA of every query token: decode requests read every position from the
        cache, a prefill's new tokens come unquantised from the step's inputs."""
        out = np.zeros((int(self.qsl[-1]), self.heads, DV))
        w = self.w.astype(np.float64).reshape(self.heads, DN + DV, DL)
        decoding = True
        for s, (length, q) in enumerate(zip(self.seq_lens, self.query_lens)):
            decoding = decoding and q <= decode_query_len
            cached = length if decoding else length - q
            c = np.stack([self.cached(s, p) if p < cached else self.latents[self.starts[s] + p].astype(np.float64)
                          for p in range(length)])
            for n in range(self.heads):
                keys = np.concatenate([c[:, :DL] @ w[n, :DN].T, c[:, DL:]], axis=1)
                values = c[:, :DL] @ w[n, DN:].T
                for j in range(q):
                    visible = length - q + j + 1
                    logits = self.scale * (keys[:visible] @ self.q[self.qsl[s] + j, n].astype(np.float64))
                    p = np.exp(logits - logits.max())
                    out[self.qsl[s] + j, n] = (p / p.sum()) @ values[:visible]
        return out


def test_a_mixed_step_matches_the_unabsorbed_reference():
    rng = np.random.default_rng(3)
    # Two decode requests, then a prefill of 7 new tokens over 53 cached ones (read in 16-row chunks).
    layer = Layer(rng, heads=3, seq_lens=[37, 5, 60], query_lens=[1, 1, 7])
    layer.write_everything()
    step = layer.mla.plan(layer.cache, layer.qsl, layer.seq_lens, layer.table, context_chunk_tokens=16)
    summary = step.summary
    assert (summary.num_decodes, summary.num_decode_tokens, summary.num_prefills, summary.num_prefill_tokens) == \
        (2, 2, 1, 7)
    assert summary.context_chunks == 4  # ceil(53 / 16)
    new = layer.new_rows()
    output = np.full((int(layer.qsl[-1]) + 2, 3, DV), np.nan, np.float32)  # two rows past the batch
    assert layer.mla.forward(layer.q, new[:, :DL], new[:, DL:], layer.cache, step, output) is output
    np.testing.assert_allclose(output[:9], layer.reference(), atol=1e-6, rtol=1e-5)
    assert np.isnan(output[9:]).all()  # rows past the batch are not written
    assert layer.mla.kernel_info.device == "cpu" and layer.mla.max_decode_query_len >= 1
    assert layer.mla.forward(layer.q, new[:, :DL], new[:, DL:], layer.cache, step).shape == (9, 3, DV)


def test_decode_latent_and_its_log_sum_exp():
    rng = np.random.default_rng(5)
    layer = Layer(rng, heads=2, seq_lens=[19, 40], query_lens=[2, 2])
    layer.write_everything()
    step = layer.mla.plan(layer.cache, layer.qsl, layer.seq_lens, layer.table, decode_query_len=2, lse=True)
    q_latent = rng.uniform(-2, 2, (4, 2, LATENT)).astype(np.float32)
    lse = np.full((4, 2), np.nan, np.float32)
    out = layer.mla.decode_latent(q_latent, layer.cache, step, lse=lse)
    for s, length in enumerate(layer.seq_lens):
        c = np.stack([layer.cached(s, p) for p in range(length)])
        for j in range(2):
            t = 2 * s + j
            visible = length - 2 + j + 1  # the first of two query tokens does not see the second
            for n in range(2):
                logits = layer.scale * (c[:visible] @ q_latent[t, n].astype(np.float64))
                m = logits.max()
                p = np.exp(logits - m)
                np.testing.assert_allclose(out[t, n], (p / p.sum()) @ c[:visible, :DL], atol=1e-6, rtol=1e-5)
                assert abs(lse[t, n] - (m + math.log(p.sum()))) < 1e-4


def test_concat_and_cache_mla_writes_only_the_listed_slots():
    rng = np.random.default_rng(7)
    layer = Layer(rng, heads=1, seq_lens=[20], query_lens=[4])
    rows = rng.uniform(-1, 1, (5, LATENT)).astype(np.float32)  # one spare row past the slot mapping
    slots = np.array([layer.slot(0, 16), -1, layer.slot(0, 18), layer.slot(0, 19)], np.int64)
    step = layer.mla.plan(layer.cache, [0, 4], [20], layer.table, slots)
    before = layer.cache.copy()
    layer.mla.concat_and_cache_mla(rows[:, :DL], rows[:, DL:], layer.cache, step)
    flat, old = layer.cache.reshape(-1, LATENT), before.reshape(-1, LATENT)
    for token, slot in enumerate(slots):
        if slot >= 0:
            np.testing.assert_array_equal(flat[slot], rows[token])  # latent first, rope last
    changed = sorted(set(np.nonzero(~np.isnan(flat).all(axis=1) & np.isnan(old).all(axis=1))[0].tolist()))
    assert changed == sorted(int(s) for s in slots if s >= 0)  # the padding token wrote nothing


def test_update_reuses_a_plan_for_the_next_step():
    rng = np.random.default_rng(11)
    layer = Layer(rng, heads=2, seq_lens=[30, 12], query_lens=[1, 1])
    layer.write_everything()
    step = layer.mla.plan(layer.cache, layer.qsl, [29, 11], layer.table)
    assert layer.mla.update(step, layer.qsl, layer.seq_lens, layer.table) is step
    out = layer.mla.forward(layer.q, np.zeros((2, DL), np.float32), np.zeros((2, DR), np.float32), layer.cache, step)
    np.testing.assert_allclose(out, layer.reference(), atol=1e-6, rtol=1e-5)
    with pytest.raises(ValueError, match="block"):
        layer.mla.update(step, layer.qsl, layer.seq_lens, [[1, 2], [layer.num_blocks, 0]])


def test_an_fp8_cache_with_a_scale_far_from_one():
    rng = np.random.default_rng(13)
    layer = Layer(rng, heads=2, seq_lens=[33, 21], query_lens=[1, 5], kv_cache_dtype="fp8", k_scale=0.0005)
    layer.write_everything()
    stored = e4m3_to_float(layer.cache.reshape(-1, LATENT)[layer.all_slots()]) * 0.0005
    np.testing.assert_allclose(stored, layer.latents, rtol=2 ** -4, atol=2 ** -9 * 0.0005)  # e4m3(x / k_scale)
    step = layer.mla.plan(layer.cache, layer.qsl, layer.seq_lens, layer.table)
    new = layer.new_rows()
    out = layer.mla.forward(layer.q, new[:, :DL], new[:, DL:], layer.cache, step)
    np.testing.assert_allclose(out, layer.reference(), atol=1e-6, rtol=1e-5)  # against the dequantised cache


def test_a_selection_names_the_backend():
    selection = attnsel.select(platform="cpu", head_size=LATENT, dtype="float32", use_mla=True)
    assert selection.backend == "CPU_MLA"
    mla = attnsel.MLAAttention(2, backend=selection, kv_b_proj=np.zeros((2 * (DN + DV), DL), np.float32))
    assert mla.backend == "CPU_MLA" and math.isclose(mla.scale, 1 / math.sqrt(DN + DR), rel_tol=1e-7)


@pytest.fixture
def small():
    rng = np.random.default_rng(17)
    layer = Layer(rng, heads=2, seq_lens=[20], query_lens=[1])
    layer.write_everything()
    return layer, layer.mla.plan(layer.cache, layer.qsl, layer.seq_lens, layer.table)


def test_bad_layer_arguments_name_the_argument():
    w = np.zeros((2 * (DN + DV), DL), np.float32)
    with pytest.raises(TypeError, match="num_heads must be an integer, got float 2.5"):
        attnsel.MLAAttention(2.5, kv_b_proj=w)
    with pytest.raises(OverflowError, match="num_heads=1099511627776 does not fit"):
        attnsel.MLAAttention(2 ** 40, kv_b_proj=w)
    with pytest.raises(TypeError, match="k_scale must be a number"):
        attnsel.MLAAttention(2, kv_b_proj=w, kv_cache_dtype="fp8", k_scale="0.5")
    with pytest.raises(ValueError, match="kv_cache_dtype contains a NUL character"):
        attnsel.MLAAttention(2, kv_b_proj=w, kv_cache_dtype="fp8\0")
    for scale in (0.0, -0.1, float("nan")):
        with pytest.raises(ValueError, match="scale = .*the softmax scale must be a positive finite number"):
            attnsel.MLAAttention(2, scale, kv_b_proj=w)
    with pytest.raises(ValueError, match="kv_cache_dtype 'fp9' is not a cache dtype; valid values are: .*fp8_e4m3"):
        attnsel.MLAAttention(2, kv_b_proj=w, kv_cache_dtype="fp9")
    for k_scale in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="k_scale"):
            attnsel.MLAAttention(2, kv_b_proj=w, kv_cache_dtype="fp8", k_scale=k_scale)
    with pytest.raises(ValueError, match="num_heads = 129"):
        attnsel.MLAAttention(129)
    with pytest.raises(ValueError, match="kv_b_proj must be"):
        attnsel.MLAAttention(3, kv_b_proj=w)  # rows of 2 heads
    with pytest.raises(ValueError, match="kv_cache_dtype 'fp8_e5m2' is not supported by the MLA kernels"):
        attnsel.MLAAttention(2, kv_b_proj=w, kv_cache_dtype="fp8_e5m2")
    with pytest.raises(NotImplementedError):
        attnsel.MLAAttention(2, kv_b_proj=w, backend="TRITON_MLA")
    with pytest.raises(TypeError, match="backend must be"):
        attnsel.MLAAttention(2, kv_b_proj=w, backend=3)


def test_a_slot_outside_the_cache_is_refused_before_anything_is_written(small):
    layer, _ = small
    before = layer.cache.copy()
    outside = layer.num_blocks * BS
    with pytest.raises(ValueError, match="slot"):
        layer.mla.plan(layer.cache, [0, 1], [20], layer.table, [outside])
    with pytest.raises(OverflowError, match="slot_mapping"):
        layer.mla.plan(layer.cache, [0, 1], [20], layer.table, [2 ** 63])
    np.testing.assert_array_equal(np.isnan(layer.cache), np.isnan(before))
    np.testing.assert_array_equal(np.nan_to_num(layer.cache), np.nan_to_num(before))


def test_bad_step_tensors_name_the_argument(small):
    layer, step = small
    kv_c, k_pe = np.zeros((1, DL), np.float32), np.zeros((1, DR), np.float32)
    aliasing = np.lib.stride_tricks.as_strided(np.zeros(DV, np.float32), (1, 2, DV), (0, 0, 4))
    with pytest.raises(ValueError, match="output is written, but its strides make elements share memory"):
        layer.mla.forward(layer.q, kv_c, k_pe, layer.cache, step, aliasing)
    lse = np.full((1, 2), np.nan, np.float32)
    latent_out = np.full((1, 2, DL), np.nan, np.float32)
    q_latent = np.zeros((1, 2, LATENT), np.float32)
    with_lse = layer.mla.plan(layer.cache, layer.qsl, layer.seq_lens, layer.table, lse=True)
    heads_alias = np.lib.stride_tricks.as_strided(latent_out, (1, 2, DL), (2 * DL * 4, 0, 4))
    with pytest.raises(ValueError, match="out is written, but its strides make elements share memory"):
        layer.mla.decode_latent(q_latent, layer.cache, with_lse, heads_alias, lse)
    rows_alias = np.lib.stride_tricks.as_strided(lse, (2, 2), (0, 4))
    with pytest.raises(ValueError, match="lse is written, but its strides make elements share memory"):
        layer.mla.decode_latent(q_latent, layer.cache, with_lse, latent_out, rows_alias)
    assert np.isnan(latent_out).all() and np.isnan(lse).all()
    writing = layer.mla.plan(layer.cache, layer.qsl, layer.seq_lens, layer.table, [layer.slot(0, 19)])
    overlapping = np.lib.stride_tricks.as_strided(layer.cache, layer.cache.shape,
                                                  (BS * LATENT * 4, DL * 4, 4))  # token rows overlap
    with pytest.raises(ValueError, match="cache rows overlap"):
        layer.mla.concat_and_cache_mla(kv_c, k_pe, overlapping, writing)
    with pytest.raises(ValueError, match="q must be"):
        layer.mla.forward(layer.q[:, :, :64], kv_c, k_pe, layer.cache, step)
    with pytest.raises(ValueError, match="output .* overlaps q"):
        layer.mla.forward(layer.q, kv_c, k_pe, layer.cache, step, layer.q[:, :, :DV])
    with pytest.raises(ValueError, match="no slot_mapping"):
        layer.mla.concat_and_cache_mla(kv_c, k_pe, layer.cache, step)
    with pytest.raises(ValueError, match="MlaPlanOptions::lse"):
        layer.mla.decode_latent(np.zeros((1, 2, LATENT), np.float32), layer.cache, step,
                                lse=np.zeros((1, 2), np.float32))
    standard = attnsel.PagedAttention(2, 32, 1)
    cache = np.zeros((2, 16, 1, 32), np.float32)
    with pytest.raises(TypeError, match="plan must be a MLAStepPlan"):
        layer.mla.forward(layer.q, kv_c, k_pe, layer.cache, standard.plan(cache, cache, [0, 1], [3], [[1]]))
    decode_only = attnsel.MLAAttention(2, layer.scale, dtype="float32")
    with pytest.raises(ValueError, match="kv_b_proj"):
        decode_only.forward(layer.q, kv_c, k_pe, layer.cache, step)

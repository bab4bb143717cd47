"""The CPU kernel on numpy arrays and torch tensors, against PyTorch's scaled_dot_product_attention
on the same data (torch's own formula where this torch predates SDPA), and bad input."""
import math

import numpy as np
import pytest

import attnsel

torch = pytest.importorskip("torch")


def torch_attention(q, k, v, causal_offset, scale):
    """q [Hq, Lq, D], k/v [Hq, Lk, D]; query i sits at key position causal_offset + i."""
    lq, lk = q.shape[1], k.shape[1]
    mask = torch.arange(lk)[None, :] <= (torch.arange(lq)[:, None] + causal_offset)
    sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
    if sdpa is not None:
        return sdpa(q, k, v, attn_mask=mask, scale=scale)
    logits = (q @ k.transpose(-1, -2)) * scale
    return torch.softmax(logits.masked_fill(~mask, float("-inf")), dim=-1) @ v


def make_step(rng, seq_lens, new_tokens, num_kv_heads, head_size, block_size, num_blocks):
    """A batch: block tables over shuffled blocks, slots for the new tokens and every key/value."""
    blocks = rng.permutation(num_blocks)
    max_blocks = max(math.ceil(s / block_size) for s in seq_lens)
    table, used = np.zeros((len(seq_lens), max_blocks), dtype=np.int32), 0
    for s, length in enumerate(seq_lens):
        n = math.ceil(length / block_size)
        table[s, :n] = blocks[used:used + n]
        used += n
    qsl = np.concatenate([[0], np.cumsum(new_tokens)]).astype(np.int32)
    all_slots = [np.array([table[s, p // block_size] * block_size + p % block_size for p in range(length)])
                 for s, length in enumerate(seq_lens)]
    return table, qsl, all_slots


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_cpu_kernel_matches_torch_attention(framework):
    rng = np.random.default_rng(7)
    num_heads, num_kv_heads, head_size, block_size, num_blocks = 6, 2, 80, 16, 23
    seq_lens, new_tokens = [37, 5, 61], [37, 1, 3]  # a prefill, a decode, a chunk
    table, qsl, all_slots = make_step(rng, seq_lens, new_tokens, num_kv_heads, head_size, block_size, num_blocks)
    total_keys = sum(seq_lens)
    keys = rng.uniform(-1, 1, (total_keys, num_kv_heads, head_size)).astype(np.float32)
    values = rng.uniform(-1, 1, (total_keys, num_kv_heads, head_size)).astype(np.float32)
    query = rng.uniform(-1, 1, (qsl[-1], num_heads, head_size)).astype(np.float32)
    slots = np.concatenate(all_slots).astype(np.int64)
    key_cache = np.zeros((num_blocks, block_size, num_kv_heads, head_size), np.float32)
    value_cache = np.zeros_like(key_cache)
    output = np.full_like(query, np.nan)
    if framework == "torch":
        keys, values, query, key_cache, value_cache, output = (
            torch.from_numpy(a) for a in (keys, values, query, key_cache, value_cache, output))

    attn = attnsel.PagedAttention(num_heads=num_heads, head_size=head_size, num_kv_heads=num_kv_heads)
    # Write every token of every sequence (one plan whose "new tokens" are all of them) ...
    write_plan = attn.plan(np.concatenate([[0], np.cumsum(seq_lens)]), seq_lens, table, slots)
    attn.write_kv_cache(keys, values, key_cache, value_cache, write_plan)
    # ... then attend with the step's queries.
    step = attn.plan(qsl, seq_lens, table)
    assert attn.forward(query, key_cache, value_cache, step, output) is output

    out = torch.as_tensor(np.asarray(output))
    k_all, v_all, q_all = (torch.as_tensor(np.asarray(a)) for a in (keys, values, query))
    start = 0
    for s, (length, new) in enumerate(zip(seq_lens, new_tokens)):
        k = k_all[start:start + length].repeat_interleave(num_heads // num_kv_heads, dim=1).transpose(0, 1)
        v = v_all[start:start + length].repeat_interleave(num_heads // num_kv_heads, dim=1).transpose(0, 1)
        q = q_all[qsl[s]:qsl[s + 1]].transpose(0, 1)
        expected = torch_attention(q, k, v, length - new, 1.0 / math.sqrt(head_size)).transpose(0, 1)
        torch.testing.assert_close(out[qsl[s]:qsl[s + 1]], expected, atol=2e-5, rtol=1e-4)
        start += length
    assert not torch.isnan(out).any()


def test_bf16_torch_tensors_and_one_plan_for_many_layers():
    torch.manual_seed(3)
    h, kvh, d, bs = 4, 4, 64, 16
    attn = attnsel.PagedAttention(h, d, kvh)
    table = [[2, 0]]
    step = attn.plan([0, 1], [20], table)
    write = attn.plan([0, 20], [20], table, slot_mapping=list(range(32, 48)) + list(range(0, 4)))
    for layer in range(3):
        kc = torch.zeros(3, bs, kvh, d, dtype=torch.bfloat16)
        vc = torch.zeros_like(kc)
        k = torch.rand(20, kvh, d, dtype=torch.bfloat16) * 2 - 1
        v = torch.rand(20, kvh, d, dtype=torch.bfloat16) * 2 - 1
        q = torch.rand(1, h, d, dtype=torch.bfloat16) * 2 - 1
        attn.write_kv_cache(k, v, kc, vc, write)
        out = attn.forward(q, kc, vc, step)
        expected = torch_attention(q.float().transpose(0, 1), k.float().transpose(0, 1), v.float().transpose(0, 1),
                                   19, 1.0 / math.sqrt(d)).transpose(0, 1)
        torch.testing.assert_close(out.float(), expected, atol=2e-2, rtol=2e-2)


@pytest.fixture
def small():
    attn = attnsel.PagedAttention(2, 32, 1)
    cache = np.zeros((2, 16, 1, 32), np.float32)
    return attn, cache, attn.plan([0, 1], [3], [[1]])


def test_wrong_dtype_raises(small):
    attn, cache, step = small
    with pytest.raises(ValueError, match="unsupported DLPack dtype"):
        attn.forward(np.zeros((1, 2, 32), np.float64), cache, cache.copy(), step, np.zeros((1, 2, 32), np.float64))
    with pytest.raises(ValueError, match="dtype"):
        attn.forward(np.zeros((1, 2, 32), np.int32), cache, cache.copy(), step, np.zeros((1, 2, 32), np.int32))


def test_non_tensor_and_readonly_inputs_raise(small):
    attn, cache, step = small
    with pytest.raises(TypeError, match="query must be a tensor that supports DLPack"):
        attn.forward([[0.0]], cache, cache, step, np.zeros((1, 2, 32), np.float32))
    readonly = np.zeros((1, 2, 32), np.float32)
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="query cannot be shared through DLPack"):
        attn.forward(readonly, cache, cache, step, np.zeros((1, 2, 32), np.float32))


def test_non_contiguous_head_dimension_raises(small):
    attn, cache, step = small
    q = np.zeros((1, 2, 64), np.float32)[:, :, ::2]
    with pytest.raises(ValueError, match="stride"):
        attn.forward(q, cache, cache.copy(), step, np.zeros((1, 2, 32), np.float32))


def test_bad_batch_raises(small):
    attn, cache, _ = small
    with pytest.raises(ValueError, match="query_start_loc has 3 entries; 1 sequences need 2"):
        attn.plan([0, 1, 2], [3], [[1]])
    step = attn.plan([0, 1], [33], [[1]])  # 33 tokens cannot fit one block of 16
    with pytest.raises(ValueError, match="seq_lens\\[0\\] = 33 is longer than its blocks hold"):
        attn.forward(np.zeros((1, 2, 32), np.float32), cache, cache.copy(), step, np.zeros((1, 2, 32), np.float32))
    with pytest.raises(ValueError, match="no slot_mapping"):
        attn.write_kv_cache(np.zeros((1, 1, 32), np.float32), np.zeros((1, 1, 32), np.float32), cache, cache.copy(),
                            attn.plan([0, 1], [3], [[1]]))


def test_a_plan_for_other_head_counts_is_refused(small):
    attn, cache, _ = small
    other = attnsel.PagedAttention(4, 32, 1)
    with pytest.raises(ValueError, match="this step plan was built for layers with num_heads=4"):
        attn.forward(np.zeros((1, 2, 32), np.float32), cache, cache.copy(), other.plan([0, 1], [3], [[1]]),
                     np.zeros((1, 2, 32), np.float32))


def test_cuda_tensors_on_a_cpu_kernel_raise(small):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    attn, cache, step = small
    q = torch.zeros(1, 2, 32, device="cuda")
    with pytest.raises(ValueError, match="host memory"):
        attn.forward(q, torch.as_tensor(cache).cuda(), torch.as_tensor(cache).cuda(), step, q.clone())


def test_flash_attn_without_cuda_raises_not_implemented():
    if attnsel.AttentionBackendEnum.FLASH_ATTN.get_class().has_kernel():
        pytest.skip("this host runs FLASH_ATTN's kernels")
    with pytest.raises(NotImplementedError, match="FLASH_ATTN's CUDA kernels cannot run here"):
        attnsel.PagedAttention(8, 128, 8, device="cuda")


def test_bad_layer_parameters_raise():
    with pytest.raises(ValueError):
        attnsel.PagedAttention(6, 64, 4)  # 6 query heads over 4 KV heads
    with pytest.raises(ValueError, match="unknown device"):
        attnsel.PagedAttention(2, 32, device="tpu")
    with pytest.raises(ValueError, match="Unknown attention backend"):
        attnsel.PagedAttention(2, 32, backend="NOPE")

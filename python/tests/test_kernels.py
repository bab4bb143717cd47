"""The CPU kernel on numpy arrays and torch tensors, against PyTorch's scaled_dot_product_attention
on the same data (torch's own formula where this torch predates SDPA): step plans reused across
layers and updated for the next step, the log-sum-exp, kernel info, exports kept across calls,
and bad input."""
import math

import numpy as np
import pytest

import attnsel

torch = pytest.importorskip("torch")


def causal_mask(lq, lk, causal_offset):
    return torch.arange(lk)[None, :] <= (torch.arange(lq)[:, None] + causal_offset)


def torch_attention(q, k, v, causal_offset, scale):
    """q [Hq, Lq, D], k/v [Hq, Lk, D]; query i sits at key position causal_offset + i."""
    mask = causal_mask(q.shape[1], k.shape[1], causal_offset)
    sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
    if sdpa is not None:
        return sdpa(q, k, v, attn_mask=mask, scale=scale)
    logits = (q @ k.transpose(-1, -2)) * scale
    return torch.softmax(logits.masked_fill(~mask, float("-inf")), dim=-1) @ v


def torch_lse(q, k, causal_offset, scale):
    """The natural log of each row's softmax denominator: [Lq, Hq]."""
    logits = (q.double() @ k.double().transpose(-1, -2)) * scale
    logits = logits.masked_fill(~causal_mask(q.shape[1], k.shape[1], causal_offset), float("-inf"))
    return torch.logsumexp(logits, dim=-1).transpose(0, 1).float()


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
    write_plan = attn.plan(key_cache, value_cache, np.concatenate([[0], np.cumsum(seq_lens)]), seq_lens, table, slots)
    attn.write_kv_cache(keys, values, key_cache, value_cache, write_plan)
    # ... then attend with the step's queries, writing the log-sum-exp too.
    step = attn.plan(key_cache, value_cache, qsl, seq_lens, table, lse=True)
    lse = np.full((qsl[-1], num_heads), np.nan, np.float32)
    if framework == "torch":
        lse = torch.from_numpy(lse)
    assert attn.forward(query, key_cache, value_cache, step, output, lse=lse) is output

    out = torch.as_tensor(np.asarray(output))
    k_all, v_all, q_all = (torch.as_tensor(np.asarray(a)) for a in (keys, values, query))
    start = 0
    for s, (length, new) in enumerate(zip(seq_lens, new_tokens)):
        k = k_all[start:start + length].repeat_interleave(num_heads // num_kv_heads, dim=1).transpose(0, 1)
        v = v_all[start:start + length].repeat_interleave(num_heads // num_kv_heads, dim=1).transpose(0, 1)
        q = q_all[qsl[s]:qsl[s + 1]].transpose(0, 1)
        expected = torch_attention(q, k, v, length - new, 1.0 / math.sqrt(head_size)).transpose(0, 1)
        torch.testing.assert_close(out[qsl[s]:qsl[s + 1]], expected, atol=2e-5, rtol=1e-4)
        torch.testing.assert_close(torch.as_tensor(np.asarray(lse))[qsl[s]:qsl[s + 1]],
                                   torch_lse(q, k, length - new, 1.0 / math.sqrt(head_size)), atol=1e-4, rtol=1e-5)
        start += length
    assert not torch.isnan(out).any()


def test_bf16_torch_tensors_and_one_plan_for_many_layers():
    torch.manual_seed(3)
    h, kvh, d, bs = 4, 4, 64, 16
    attn = attnsel.PagedAttention(h, d, kvh)
    table = [[2, 0]]
    caches = [(torch.zeros(3, bs, kvh, d, dtype=torch.bfloat16), torch.zeros(3, bs, kvh, d, dtype=torch.bfloat16))
              for _ in range(3)]
    # One plan per step for every layer of the group, built from the first layer's cache.
    step = attn.plan(*caches[0], [0, 1], [20], table)
    write = attn.plan(*caches[0], [0, 20], [20], table, slot_mapping=list(range(32, 48)) + list(range(0, 4)))
    assert step.num_tokens == 1 and write.num_tokens == 20 and step.workspace_bytes > 0
    assert not step.fp8_queries  # the CPU kernel multiplies the queries as given
    for kc, vc in caches:
        k = torch.rand(20, kvh, d, dtype=torch.bfloat16) * 2 - 1
        v = torch.rand(20, kvh, d, dtype=torch.bfloat16) * 2 - 1
        q = torch.rand(1, h, d, dtype=torch.bfloat16) * 2 - 1
        attn.write_kv_cache(k, v, kc, vc, write)
        out = attn.forward(q, kc, vc, step)
        expected = torch_attention(q.float().transpose(0, 1), k.float().transpose(0, 1), v.float().transpose(0, 1),
                                   19, 1.0 / math.sqrt(d)).transpose(0, 1)
        torch.testing.assert_close(out.float(), expected, atol=2e-2, rtol=2e-2)


def test_a_plan_is_shared_by_the_layers_of_a_group():
    """Another layer's PagedAttention with the same shape but its own scale and soft cap runs on
    the first layer's plan, with its own parameters."""
    rng = np.random.default_rng(11)
    h, kvh, d, bs = 4, 2, 32, 16
    first = attnsel.PagedAttention(h, d, kvh)
    second = attnsel.PagedAttention(h, d, kvh, scale=0.05)
    key_cache = rng.uniform(-1, 1, (2, bs, kvh, d)).astype(np.float32)
    value_cache = rng.uniform(-1, 1, (2, bs, kvh, d)).astype(np.float32)
    step = first.plan(key_cache, value_cache, [0, 1], [9], [[1]])
    q = rng.uniform(-1, 1, (1, h, d)).astype(np.float32)
    k = torch.from_numpy(key_cache[1, :9]).repeat_interleave(h // kvh, dim=1).transpose(0, 1)
    v = torch.from_numpy(value_cache[1, :9]).repeat_interleave(h // kvh, dim=1).transpose(0, 1)
    for layer, scale in ((first, 1 / math.sqrt(d)), (second, 0.05)):
        out = layer.forward(q, key_cache, value_cache, step)
        expected = torch_attention(torch.from_numpy(q).transpose(0, 1), k, v, 8, scale).transpose(0, 1)
        torch.testing.assert_close(torch.from_numpy(out), expected, atol=2e-5, rtol=1e-4)


def test_update_replans_the_next_step_in_place():
    rng = np.random.default_rng(5)
    h, kvh, d, bs = 2, 1, 32, 16
    attn = attnsel.PagedAttention(h, d, kvh)
    key_cache = rng.uniform(-1, 1, (4, bs, kvh, d)).astype(np.float32)
    value_cache = rng.uniform(-1, 1, (4, bs, kvh, d)).astype(np.float32)
    step = attn.plan(key_cache, value_cache, [0, 1], [17], [[3, 0]], lse=True)
    q = rng.uniform(-1, 1, (2, h, d)).astype(np.float32)
    keys = np.concatenate([key_cache[3], key_cache[0], key_cache[2]])
    values = np.concatenate([value_cache[3], value_cache[0], value_cache[2]])

    def expected(length, rows):
        k = torch.from_numpy(keys[:length]).repeat_interleave(h // kvh, dim=1).transpose(0, 1)
        v = torch.from_numpy(values[:length]).repeat_interleave(h // kvh, dim=1).transpose(0, 1)
        qs = torch.from_numpy(q[:rows]).transpose(0, 1)
        return (torch_attention(qs, k, v, length - rows, 1 / math.sqrt(d)).transpose(0, 1),
                torch_lse(qs, k, length - rows, 1 / math.sqrt(d)))

    for length, rows, table in ((17, 1, [[3, 0]]), (40, 1, [[3, 0, 2]]), (33, 2, [[3, 0, 2]])):
        assert attn.update(step, [0, rows], [length], table) is step and step.num_tokens == rows
        out, lse = np.full((rows, h, d), np.nan, np.float32), np.full((rows, h), np.nan, np.float32)
        attn.forward(q[:rows], key_cache, value_cache, step, out, lse=lse)
        want_out, want_lse = expected(length, rows)
        torch.testing.assert_close(torch.from_numpy(out), want_out, atol=2e-5, rtol=1e-4)
        torch.testing.assert_close(torch.from_numpy(lse), want_lse, atol=1e-4, rtol=1e-5)
    with pytest.raises(ValueError, match="block"):
        attn.update(step, [0, 1], [17], [[3, 7]])  # block 7 is outside the 4-block cache


def test_kernel_info():
    cpu = attnsel.kernel_info("CPU_ATTN", "float32")
    assert cpu.available and cpu.device == "cpu" and cpu.graph_support == "never" and cpu.lse_output and cpu.isa
    assert cpu.lse_prefill
    flash = attnsel.kernel_info(attnsel.AttentionBackendEnum.FLASH_ATTN, torch.bfloat16)
    assert flash.device == "cuda" and flash.graph_support == "uniform_batch" and flash.preferred_layout == "LBNHC"
    assert flash.lse_output and not flash.lse_prefill  # its log-sum-exp covers decode batches only
    assert attnsel.kernel_info("FLASHINFER").available is False
    attn = attnsel.PagedAttention(2, 32)
    assert attn.kernel_info.device == "cpu" and attn.device_type == "cpu" and attn.kernel_info.lse_output
    with pytest.raises(ValueError, match="unknown dtype 'float64'"):
        attnsel.kernel_info("CPU_ATTN", "float64")


def test_exports_follow_tensors_changed_in_place():
    """A tensor's DLTensor is kept across calls; a tensor whose shape or strides changed in place
    is exported again, not read through the old view."""
    attn = attnsel.PagedAttention(2, 32, 1)
    cache = np.zeros((2, 16, 1, 32), np.float32)
    step = attn.plan(cache, cache.copy(), [0, 1], [3], [[1]])
    value_cache = cache.copy()
    q = torch.rand(1, 2, 32)
    out = torch.empty(2, 2, 32)
    attn.forward(q, cache, value_cache, step, out)
    out.resize_(1, 2, 16)  # now too narrow for the plan: refused, not written past its end
    with pytest.raises(ValueError, match="output is f32\\[1, 2, 16\\]"):
        attn.forward(q, cache, value_cache, step, out)
    value_cache.shape = (2, 16, 32, 1)
    with pytest.raises(ValueError, match="differs from the plan's cache geometry"):
        attn.forward(q, cache, value_cache, step, torch.empty(1, 2, 32))


@pytest.fixture
def small():
    attn = attnsel.PagedAttention(2, 32, 1)
    cache = np.zeros((2, 16, 1, 32), np.float32)
    return attn, cache, attn.plan(cache, cache, [0, 1], [3], [[1]])


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
        attn.plan(cache, cache, [0, 1, 2], [3], [[1]])
    with pytest.raises(ValueError, match="seq_lens\\[0\\] = 33 is longer than its blocks hold"):
        attn.plan(cache, cache, [0, 1], [33], [[1]])  # 33 tokens cannot fit one block of 16
    with pytest.raises(ValueError, match="no slot_mapping"):
        attn.write_kv_cache(np.zeros((1, 1, 32), np.float32), np.zeros((1, 1, 32), np.float32), cache, cache.copy(),
                            attn.plan(cache, cache, [0, 1], [3], [[1]]))


def test_bad_plan_options_raise(small):
    attn, cache, _ = small
    with pytest.raises(ValueError, match="cannot be captured in a CUDA graph"):
        attn.plan(cache, cache, [0, 1], [3], [[1]], graph_capturable=True)
    with pytest.raises(ValueError, match="unknown activation dtype 'int8'"):
        attn.plan(cache, cache, [0, 1], [3], [[1]], dtype="int8")
    with pytest.raises(ValueError, match="the cache's dtype .* is not an activation dtype; give dtype="):
        attn.plan(np.zeros((2, 16, 1, 32), np.uint8), np.zeros((2, 16, 1, 32), np.uint8), [0, 1], [3], [[1]])
    step = attn.plan(cache, cache, [0, 1], [3], [[1]])
    with pytest.raises(ValueError, match="lse = true"):
        attn.forward(np.zeros((1, 2, 32), np.float32), cache, cache, step, lse=np.zeros((1, 2), np.float32))


def test_a_plan_for_another_group_or_geometry_is_refused(small):
    attn, cache, step = small
    other = attnsel.PagedAttention(4, 32, 1)
    q = np.zeros((1, 2, 32), np.float32)
    with pytest.raises(ValueError, match="is not in the plan's group \\(heads 4/1"):
        attn.forward(q, cache, cache.copy(), other.plan(cache, cache, [0, 1], [3], [[1]]), np.zeros_like(q))
    bigger = np.zeros((3, 16, 1, 32), np.float32)
    with pytest.raises(ValueError, match="key_cache f32\\[3, 16, 1, 32\\].*differs from the plan's cache geometry"):
        attn.forward(q, bigger, bigger.copy(), step, np.zeros_like(q))
    with pytest.raises(ValueError, match="query dtype bf16 differs from the plan's dtype f32"):
        q16 = torch.zeros(1, 2, 32, dtype=torch.bfloat16)
        attn.forward(q16, cache, cache, step, torch.zeros_like(q16))
    with pytest.raises(ValueError, match="the plan's batch needs at least \\[2, 2, 32\\]"):
        attn.forward(q, cache, cache, attn.plan(cache, cache, [0, 1, 2], [3, 3], [[1], [1]]), np.zeros_like(q))


def test_cuda_tensors_on_a_cpu_kernel_raise(small):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    attn, cache, step = small
    q = torch.zeros(1, 2, 32, device="cuda")
    cuda_cache = torch.as_tensor(cache).cuda()
    with pytest.raises(ValueError, match="host memory"):
        attn.plan(cuda_cache, cuda_cache, [0, 1], [3], [[1]])
    with pytest.raises(ValueError, match="query is on cuda:0 but the plan was built for cpu:0"):
        attn.forward(q, cache, cache, step, q.clone())


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


def test_forward_appends_the_new_keys_and_values_in_one_call():
    """forward(..., key=, value=) equals write_kv_cache then forward, byte for byte, on the caches
    and the output; a padding slot (-1) is not written; new keys of another shape are refused by
    name; key without value is refused."""
    rng = np.random.default_rng(17)
    h, kvh, d, bs, nb = 4, 2, 32, 16, 9
    seq_lens, new_tokens = [37, 5, 61], [1, 3, 1]  # decode, a speculative chunk, decode
    table, qsl, all_slots = make_step(rng, seq_lens, new_tokens, kvh, d, bs, nb)
    slots = np.concatenate([s[length - new:] for s, length, new in zip(all_slots, seq_lens, new_tokens)])
    slots[2] = -1  # a padding token
    key_cache = rng.uniform(-1, 1, (nb, bs, kvh, d)).astype(np.float32)
    value_cache = rng.uniform(-1, 1, (nb, bs, kvh, d)).astype(np.float32)
    k = rng.uniform(-1, 1, (qsl[-1], kvh, d)).astype(np.float32)
    v = rng.uniform(-1, 1, (qsl[-1], kvh, d)).astype(np.float32)
    q = rng.uniform(-1, 1, (qsl[-1], h, d)).astype(np.float32)
    attn = attnsel.PagedAttention(h, d, kvh)
    kc_a, vc_a, kc_b, vc_b = key_cache.copy(), value_cache.copy(), key_cache.copy(), value_cache.copy()
    step = attn.plan(kc_a, vc_a, qsl, seq_lens, table, slots)
    attn.write_kv_cache(k, v, kc_a, vc_a, step)
    out_a = attn.forward(q, kc_a, vc_a, step)
    out_b = attn.forward(q, kc_b, vc_b, step, key=k, value=v)
    assert np.array_equal(kc_a, kc_b) and np.array_equal(vc_a, vc_b)
    assert np.array_equal(out_a, out_b) and not np.isnan(out_b).any()
    written = slots[slots >= 0]
    assert not np.array_equal(kc_b.reshape(-1, kvh, d)[written], key_cache.reshape(-1, kvh, d)[written])
    pad_slot = all_slots[1][seq_lens[1] - new_tokens[1] + 1]  # the padding token's own position: untouched
    assert np.array_equal(kc_b.reshape(-1, kvh, d)[pad_slot], key_cache.reshape(-1, kvh, d)[pad_slot])
    with pytest.raises(ValueError, match="new_kv.key"):
        attn.forward(q, kc_b, vc_b, step, key=k[:, :1], value=v)
    with pytest.raises(ValueError, match="both key and value"):
        attn.forward(q, kc_b, vc_b, step, key=k)

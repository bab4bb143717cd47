"""Values that C would read with a changed meaning are refused where they cross from Python:
integers beyond the C type wrap no more (OverflowError), fractions are not truncated
(TypeError), strings are not cut at a NUL (ValueError), and wrong-typed arguments raise
TypeError naming the argument, at every door of the package."""
import os

import numpy as np
import pytest

import attnsel

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "models")
LLAMA = os.path.join(EXAMPLES, "llama.json")


@pytest.mark.parametrize("kwargs, error, match", [
    ({"head_size": 2**32 + 72}, OverflowError, "head_size=4294967368 does not fit a 32-bit signed integer"),
    ({"head_size": 72.5}, TypeError, "head_size must be an integer, got float"),
    ({"head_size": True}, TypeError, "head_size must be an integer, got a bool"),
    ({"block_size": 2**32 + 16}, OverflowError, "block_size=4294967312"),
    ({"block_size": 16.5}, TypeError, "block_size must be an integer"),
    ({"block_size": 16.0}, TypeError, "block_size must be an integer"),
    ({"num_heads": 2**31}, OverflowError, "num_heads"),
    ({"platform": "cuda:9.0\0junk"}, ValueError, "platform contains a NUL character at position 8"),
    ({"attention_backend": "FLASH_ATTN\0x"}, ValueError, "attention_backend contains a NUL"),
    ({"facts": ["flash_attn_version=3\0"]}, ValueError, "facts\\[0\\] contains a NUL"),
    ({"attention_config": 42}, TypeError, "attention_config must be a JSON string, a dict or an AttentionConfig"),
    ({"backend_per_kind": ["FLASH_ATTN"]}, TypeError, "backend_per_kind must be a dict, got list"),
])
def test_select_refuses_changed_meaning(kwargs, error, match):
    args = {"platform": "cuda:9.0", "head_size": 128, **kwargs}
    with pytest.raises(error, match=match):
        attnsel.select(**args)


def test_select_still_takes_numpy_integers():
    assert attnsel.select(platform="cuda:9.0", head_size=np.int64(72)).backend == "FLASH_ATTN"


@pytest.mark.parametrize("kwargs, error, match", [
    ({"tensor_parallel_size": 2**32 + 1}, OverflowError, "tensor_parallel_size=4294967297"),
    ({"tensor_parallel_size": 2.0}, TypeError, "tensor_parallel_size must be an integer"),
    ({"decode_context_parallel_size": 2**31}, OverflowError, "decode_context_parallel_size"),
    ({"block_size": 16.5}, TypeError, "block_size must be an integer"),
    ({"model": LLAMA + "\0.bak"}, ValueError, "model contains a NUL character"),
    ({"platform": "cuda:9.0\0"}, ValueError, "platform contains a NUL"),
    ({"attention_config": 42}, TypeError, "attention_config must be"),
])
def test_plan_refuses_changed_meaning(kwargs, error, match):
    args = {"model": LLAMA, "platform": "cuda:9.0", **kwargs}
    with pytest.raises(error, match=match):
        attnsel.plan(**args)


def test_validate_configuration_refuses_a_wrapped_head_size():
    cls = attnsel.AttentionBackendEnum.FLASH_ATTN.get_class()
    with pytest.raises(OverflowError, match="head_size"):
        cls.validate_configuration(2**32 + 64, "bfloat16", device_capability=(9, 0))


@pytest.fixture
def small():
    attn = attnsel.PagedAttention(2, 32, 1)
    cache = np.random.default_rng(3).uniform(-1, 1, (2, 16, 1, 32)).astype(np.float32)
    return attn, cache


@pytest.mark.parametrize("kwargs, error, match", [
    ({"num_heads": 2**32 + 2}, OverflowError, "num_heads"),
    ({"head_size": 32.5}, TypeError, "head_size must be an integer"),
    ({"sliding_window": 2**32}, OverflowError, "sliding_window=4294967296"),
])
def test_paged_attention_refuses_changed_meaning(kwargs, error, match):
    args = {"num_heads": 2, "head_size": 32, **kwargs}
    with pytest.raises(error, match=match):
        attnsel.PagedAttention(**args)


@pytest.mark.parametrize("seq_lens, error, match", [
    ([5.7], TypeError, "seq_lens\\[0\\] must be an integer, got float"),
    ([2**32 + 3], OverflowError, "seq_lens\\[0\\]=4294967299 does not fit"),
    (np.array([3.0]), TypeError, "seq_lens must hold integers, got dtype float64"),
    (np.array([2**40], dtype=np.int64), OverflowError, "seq_lens holds 1099511627776"),
])
def test_batch_arrays_refuse_changed_meaning(small, seq_lens, error, match):
    attn, cache = small
    with pytest.raises(error, match=match):
        attn.plan(cache, cache, [0, 1], seq_lens, [[1]])


def test_batch_tensors_refuse_changed_meaning(small):
    torch = pytest.importorskip("torch")
    attn, cache = small
    with pytest.raises(OverflowError, match="seq_lens holds 4294967299"):
        attn.plan(cache, cache, [0, 1], torch.tensor([2**32 + 3], dtype=torch.int64), [[1]])
    with pytest.raises(TypeError, match="seq_lens must hold integers"):
        attn.plan(cache, cache, [0, 1], torch.tensor([3.5]), [[1]])
    with pytest.raises(OverflowError, match="slot_mapping"):
        attn.plan(cache, cache, [0, 1], [3], [[1]], [2**64 + 1])


def test_forward_calls_refuse_a_missing_plan(small):
    attn, cache = small
    q = np.ones((1, 2, 32), np.float32)
    with pytest.raises(TypeError, match="plan must be a StepPlan, got NoneType"):
        attn.forward(q, cache, cache.copy(), None)
    with pytest.raises(TypeError, match="plan must be a StepPlan"):
        attn.update(None, [0, 1], [3], [[1]])
    with pytest.raises(TypeError, match="plan must be a StepPlan"):
        attn.write_kv_cache(q[:, :1], q[:, :1], cache, cache.copy(), "plan")


def test_outputs_that_share_memory_are_refused(small):
    attn, cache = small
    step = attn.plan(cache, cache, [0, 1], [3], [[1]])
    q = np.ones((1, 2, 32), np.float32)
    # Both heads of the output on the same memory (stride 0), as torch.expand makes it.
    output = np.lib.stride_tricks.as_strided(np.zeros(32, np.float32), shape=(1, 2, 32), strides=(0, 0, 4))
    with pytest.raises(ValueError, match="output is written, but its strides make elements share memory"):
        attn.forward(q, cache, cache.copy(), step, output)


def test_random_values_are_taken_exactly_or_refused():
    """A fuzzer over the Python-to-C conversion: integers at and past every C boundary,
    fractions, bools, strings with NULs and wrong types, through select(). Each is refused
    with one of the package's argument errors, or taken with exactly its meaning."""
    rng = np.random.default_rng(20261205)
    edges = [0, 1, -1, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**32, 2**32 + 64, 2**63, 2**64 + 128, 64]
    pool = edges + [16.0, 64.5, True, None, "64", b"64", [64], np.int32(64), np.int64(2**40), np.float64(64)]
    texts = ["cuda:9.0", "cuda:9.0\0", "\0", "cpu", "cuda:9.0\0cpu", "x" * 300, "cuda:9.\u00e9"]
    for _ in range(400):
        head_size = pool[rng.integers(len(pool))]
        block_size = pool[rng.integers(len(pool))]
        platform = texts[rng.integers(len(texts))]
        try:
            s = attnsel.select(platform=platform, head_size=head_size, block_size=block_size)
        except (TypeError, ValueError, OverflowError, NotImplementedError):
            continue
        # Taken: only integers that fit, and with their meaning unchanged.
        assert not isinstance(head_size, (bool, float, str, bytes, list)) and not isinstance(block_size, (bool, float))
        assert "\0" not in platform
        assert s.config.head_size == int(head_size)
        assert s.config.block_size == (None if block_size is None else int(block_size))

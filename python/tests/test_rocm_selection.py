"""vLLM's ROCm selection tests (tests/kernels/attention/test_rocm_attention_selector.py), ported
to the simulated ROCm platform; the AITER switches are runtime facts."""
import pytest

from attnsel import (AttentionBackendEnum, AttentionConfig, CacheConfig, VllmConfig, get_attn_backend,
                     set_current_vllm_config, use_platform)

ROCM = "rocm:gfx942"


def _with(backend=None, block_size=None):
    return set_current_vllm_config(VllmConfig(
        attention_config=AttentionConfig(backend=AttentionBackendEnum[backend] if backend else None),
        cache_config=CacheConfig(block_size=block_size)))


def test_explicit_triton_mla():
    with _with("TRITON_MLA", 16), use_platform(ROCM):
        assert get_attn_backend(576, "bfloat16", "auto", use_mla=True).get_name() == "TRITON_MLA"


def test_automatic_mla_is_triton_mla():
    with _with(None, 16), use_platform(ROCM):
        assert get_attn_backend(576, "bfloat16", "auto", use_mla=True).get_name() == "TRITON_MLA"


def test_explicit_aiter_mla_with_block_size_1():
    with _with("ROCM_AITER_MLA", 1), use_platform(ROCM):
        assert get_attn_backend(576, "bfloat16", "auto", use_mla=True).get_name() == "ROCM_AITER_MLA"


def test_automatic_mla_with_aiter_enabled_is_aiter_mla():
    with _with(None, 1), use_platform(ROCM):
        backend = get_attn_backend(576, "bfloat16", "auto", use_mla=True,
                                   facts=["rocm.use_aiter=true", "rocm.use_aiter_mla=true"])
        assert backend.get_name() == "ROCM_AITER_MLA"


def test_triton_mla_rejects_block_size_1():
    with _with("TRITON_MLA", 1), use_platform(ROCM), pytest.raises(ValueError, match="TRITON_MLA"):
        get_attn_backend(576, "bfloat16", "auto", use_mla=True)

"""Code written against vLLM's selector runs unchanged: get_attn_backend's positional order,
get_mamba_attn_backend and its errors, AttentionConfig's validators."""
import pytest

from attnsel import (AttentionBackendEnum, AttentionConfig, CacheConfig, KVCacheSpecKind, MambaAttentionBackendEnum,
                     VllmConfig, get_attn_backend, get_mamba_attn_backend, register_backend, select,
                     set_current_vllm_config, use_platform)


def test_get_attn_backend_takes_vllms_positional_order():
    # (head_size, dtype, kv_cache_dtype, use_mla, has_sink, use_sparse, use_mm_prefix,
    #  use_per_head_quant_scales, attn_type, num_heads, has_sliding_window)
    with use_platform("cuda:9.0"):
        assert get_attn_backend(576, "bfloat16", None, True).is_mla()
        assert get_attn_backend(576, "bfloat16", None, True, False, True).is_sparse()
        assert get_attn_backend(64, "float16", None, False, True).get_name() == "FLASH_ATTN"
        sliding = get_attn_backend(128, "bfloat16", None, False, False, False, False, False, None, None, True)
        assert sliding.selection.config.has_sliding_window
        with pytest.raises(TypeError):
            get_attn_backend(64, "float16")  # kv_cache_dtype has no default in vLLM


def test_the_block_size_comes_from_the_cache_config():
    with use_platform("cpu"):
        with set_current_vllm_config(VllmConfig(cache_config=CacheConfig(block_size=48))):
            backend = get_attn_backend(128, "bfloat16", None)
        assert backend.selection.config.block_size == 48
        # CpuPlatform.check_and_update_config's warning for a block size the user gave.
        assert backend.selection.warnings == [
            "CPU backend prefers block_size is multiples of 32, otherwise the performance is not optimized."]
        default = get_attn_backend(128, "bfloat16", None).selection
        assert default.config.block_size is None and default.warnings == []


def test_attention_config_turns_names_into_members_when_built():
    config = AttentionConfig(backend="flash_attn", backend_per_kind={"sliding_window": "triton_attn",
                                                                      "full_attention": AttentionBackendEnum.FLASHINFER})
    assert config.backend is AttentionBackendEnum.FLASH_ATTN
    assert config.backend_per_kind == {"sliding_window": AttentionBackendEnum.TRITON_ATTN,
                                       "full_attention": AttentionBackendEnum.FLASHINFER}
    assert AttentionConfig(backend="AUTO").backend is None
    msa = AttentionConfig(backend="cutlass_msa")
    assert msa.backend is None and msa.minimax_m3_msa_decode_backend == "cutlass"


def test_attention_config_refuses_unknown_kinds_and_backends():
    kinds = ", ".join(sorted(k.value for k in KVCacheSpecKind))
    with pytest.raises(ValueError) as error:
        AttentionConfig(backend_per_kind={"sliding": "TRITON_ATTN"})
    assert str(error.value) == f"Unknown KV cache group kind 'sliding' in backend_per_kind. Valid kinds are: {kinds}."
    # The library's validator says the same.
    with pytest.raises(ValueError) as library:
        select("cuda:9.0", backend_per_kind={"sliding": "TRITON_ATTN"})
    assert str(library.value) == str(error.value)
    with pytest.raises(ValueError, match="^Unknown attention backend: 'AUTO'"):
        AttentionConfig(backend_per_kind={"sliding_window": "auto"})  # "auto" is not special here
    with pytest.raises(ValueError, match="^Unknown attention backend: 'NO_SUCH'"):
        AttentionConfig(backend="no_such")


@pytest.mark.parametrize("kind", list(KVCacheSpecKind))
def test_every_kind_is_one_the_library_accepts(kind):
    select("cuda:9.0", backend_per_kind={kind.value: "FLASH_ATTN"})


def test_get_mamba_attn_backend():
    backend = get_mamba_attn_backend(MambaAttentionBackendEnum.MAMBA2)
    assert backend.get_name() == "MAMBA2_ATTN" and backend.is_ssm()
    with set_current_vllm_config(VllmConfig(batch_invariant=True)):
        with pytest.raises(RuntimeError) as error:
            get_mamba_attn_backend(MambaAttentionBackendEnum.MAMBA2)
    assert str(error.value) == "VLLM batch_invariant mode is not supported for MAMBA2_ATTN."
    with pytest.raises(ValueError) as unregistered:
        get_mamba_attn_backend(MambaAttentionBackendEnum.CUSTOM)
    assert str(unregistered.value) == ("Backend CUSTOM must be registered before use. "
                                       "Use register_backend(Backend.CUSTOM, 'your.module.YourClass')")
    with pytest.raises(AssertionError):
        get_mamba_attn_backend(AttentionBackendEnum.FLASH_ATTN)


class PythonMambaBackend:
    @staticmethod
    def get_name():
        return "PY_MAMBA"

    @staticmethod
    def supports_batch_invariance():
        return False


def test_get_mamba_attn_backend_of_a_python_class():
    register_backend(MambaAttentionBackendEnum.CUSTOM, f"{__name__}.PythonMambaBackend", is_mamba=True)
    assert get_mamba_attn_backend(MambaAttentionBackendEnum.CUSTOM) is PythonMambaBackend
    with set_current_vllm_config(VllmConfig(batch_invariant=True)):
        with pytest.raises(RuntimeError, match=r"^VLLM batch_invariant mode is not supported for PY_MAMBA\.$"):
            get_mamba_attn_backend(MambaAttentionBackendEnum.CUSTOM)

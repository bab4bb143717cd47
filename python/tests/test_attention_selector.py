"""vLLM's tests/kernels/attention/test_attention_selector.py, ported: the platform that vLLM's
tests patch in is chosen with use_platform(...) (a simulated one, so every case runs here)."""
import pytest

from attnsel import (AttentionBackendEnum, AttentionConfig, CacheConfig, ParallelConfig, VllmConfig,
                     get_attn_backend, set_current_vllm_config, use_platform)

CUDA = "cuda:9.0"
ROCM = "rocm:gfx942"

DEVICE_MLA_BACKENDS = {"cuda": ["TRITON_MLA", "FLASHMLA", "FLASHINFER_MLA", "FLASH_ATTN_MLA", "CUTLASS_MLA"],
                       "hip": ["TRITON_MLA", "ROCM_AITER_MLA"], "cpu": []}
DEVICE_REGULAR_ATTN_BACKENDS = {"cuda": ["FLASHINFER", "FLASH_ATTN"], "hip": ["ROCM_ATTN"], "cpu": ["CPU_ATTN"]}


def generate_params():
    params = []
    for device in ["cuda", "hip", "cpu"]:
        for use_mla in [True, False]:
            names = DEVICE_MLA_BACKENDS[device] if use_mla else DEVICE_REGULAR_ATTN_BACKENDS[device]
            for name in names:
                block_sizes = [128] if name == "CUTLASS_MLA" else ([16, 64] if device == "cuda" else [16, 1]) \
                    if use_mla else [16]
                for block_size in block_sizes:
                    for use_dcp in ([False, True] if device != "cpu" else [False]):
                        params.append(pytest.param(device, name, use_mla, block_size, use_dcp,
                                                   id=f"{device}_{name}_mla_{str(use_mla)[0]}_blks{block_size}_dcp{use_dcp}"))
    return params


def _config(name, block_size, use_dcp):
    return VllmConfig(attention_config=AttentionConfig(backend=AttentionBackendEnum[name]),
                      cache_config=CacheConfig(block_size=block_size),
                      parallel_config=ParallelConfig(tensor_parallel_size=2 if use_dcp else 1,
                                                     decode_context_parallel_size=2 if use_dcp else 1))


@pytest.mark.parametrize("device, name, use_mla, block_size, use_dcp", generate_params())
def test_backend_selection(device, name, use_mla, block_size, use_dcp):
    with set_current_vllm_config(_config(name, block_size, use_dcp)):
        if device == "cpu":
            with use_platform("cpu"):
                assert get_attn_backend(16, "float16", None).get_name() == "CPU_ATTN"
        elif device == "hip":
            with use_platform(ROCM):
                if use_mla:
                    if name == "TRITON_MLA" and block_size == 1:
                        with pytest.raises(ValueError):
                            get_attn_backend(576, "float16", None, use_mla=use_mla)
                    elif name == "ROCM_AITER_MLA" and block_size != 1:
                        pytest.skip("ROCM_AITER_MLA needs block size 1")
                    else:
                        assert get_attn_backend(576, "float16", None, use_mla=use_mla).get_name() == name
                elif use_dcp:
                    with pytest.raises(ValueError, match="DCP not supported"):
                        get_attn_backend(32, "float16", None, use_mla=use_mla)
                else:
                    assert get_attn_backend(32, "float16", None, use_mla=use_mla).get_name() == "ROCM_ATTN"
        else:
            # CUTLASS_MLA and FLASHINFER_MLA are Blackwell backends: the SM 10.0 platform.
            platform = "cuda:10.0" if name in ("CUTLASS_MLA", "FLASHINFER_MLA") else CUDA
            with use_platform(platform):
                if use_mla:
                    if name == "FLASHINFER_MLA" and block_size not in (32, 64):
                        pytest.skip("FlashInfer MLA only supports block_size 32 or 64")
                    if name == "FLASHMLA" and block_size != 64:
                        pytest.skip("FlashMLA only supports block_size 64")
                    assert get_attn_backend(576, "float16", None, use_mla=use_mla).get_name() == name
                elif name == "FLASHINFER":
                    assert get_attn_backend(64, "float16", None).get_name() == "FLASHINFER"
                else:
                    assert get_attn_backend(32, "float16", None).get_name() == "FLASH_ATTN"


@pytest.mark.parametrize("backend_name", ["FLASH_ATTN", "FLASHINFER", "TRITON_MLA", "CUTLASS_MLA", "FLASHMLA",
                                          "FLASHINFER_MLA", "FLASH_ATTN_MLA", "FLASHMLA_SPARSE",
                                          "FLASHINFER_MLA_SPARSE"])
def test_supported_backend_preserves_dcp_eligibility(backend_name):
    backend_cls = AttentionBackendEnum[backend_name].get_class()
    kwargs = dict(head_size=576 if backend_cls.is_mla() else 128, dtype="bfloat16", kv_cache_dtype="auto",
                  block_size=64, use_mla=backend_cls.is_mla(), use_sparse=backend_cls.is_sparse(),
                  device_capability=(9, 0))
    invalid_without_dcp = backend_cls.validate_configuration(**kwargs)
    assert backend_cls.validate_configuration(use_dcp=True, **kwargs) == invalid_without_dcp


@pytest.mark.parametrize("platform, expected", [("cpu", "CPU_ATTN"), (CUDA, "FLEX_ATTENTION")])
def test_fp32_fallback(platform, expected):
    with set_current_vllm_config(VllmConfig()), use_platform(platform):
        assert get_attn_backend(16, "float32", None).get_name() == expected


def test_fp32_fallback_rocm_has_no_backend_for_head_16():
    with set_current_vllm_config(VllmConfig()), use_platform(ROCM), \
            pytest.raises(ValueError, match="No valid attention backend"):
        get_attn_backend(16, "float32", None)


def test_invalid_backend():
    with pytest.raises(ValueError, match="Unknown attention backend: 'INVALID'. Valid options are:"):
        AttentionConfig(backend=AttentionBackendEnum["INVALID"])


@pytest.mark.parametrize("auto_value", ["auto", "AUTO", "Auto"])
def test_auto_backend_string(auto_value):
    assert AttentionConfig(backend=auto_value).backend is None


def test_auto_backend_selection_behavior():
    auto_config, none_config = AttentionConfig(backend="auto"), AttentionConfig(backend=None)
    assert auto_config.backend is None and none_config.backend is None
    with set_current_vllm_config(VllmConfig(attention_config=auto_config)), use_platform("cpu"):
        backend_auto = get_attn_backend(16, "float16", None)
    with set_current_vllm_config(VllmConfig(attention_config=none_config)), use_platform("cpu"):
        backend_none = get_attn_backend(16, "float16", None)
    assert backend_auto.get_name() == backend_none.get_name()


@pytest.mark.parametrize("backend_name, flash_attn_version, should_succeed",
                         [("FLASH_ATTN", 3, True), ("FLASH_ATTN", 2, False), ("FLASHINFER", None, False),
                          ("FLEX_ATTENTION", None, False)])
def test_per_head_quant_scales_backend_selection(backend_name, flash_attn_version, should_succeed):
    config = VllmConfig(attention_config=AttentionConfig(backend=AttentionBackendEnum[backend_name],
                                                         flash_attn_version=flash_attn_version),
                        cache_config=CacheConfig(block_size=64))
    with set_current_vllm_config(config), use_platform(CUDA):
        if should_succeed:
            backend = get_attn_backend(head_size=128, dtype="float16", kv_cache_dtype="fp8",
                                       use_per_head_quant_scales=True)
            assert backend.get_name() == backend_name
        else:
            with pytest.raises(ValueError) as exc_info:
                get_attn_backend(head_size=128, dtype="float16", kv_cache_dtype="fp8", use_per_head_quant_scales=True)
            assert backend_name in str(exc_info.value)


@pytest.mark.parametrize("backend_name", ["FLASH_ATTN", "FLASHINFER"])
@pytest.mark.parametrize("use_non_causal", [True, False])
def test_non_causal_backend_selection(backend_name, use_non_causal):
    config = VllmConfig(attention_config=AttentionConfig(backend=AttentionBackendEnum[backend_name],
                                                         use_non_causal=use_non_causal),
                        cache_config=CacheConfig(block_size=16))
    with set_current_vllm_config(config), use_platform(CUDA):
        assert get_attn_backend(head_size=128, dtype="float16", kv_cache_dtype=None).get_name() == backend_name


def test_non_causal_autoselect_backend():
    config = VllmConfig(attention_config=AttentionConfig(backend=None, use_non_causal=True),
                        cache_config=CacheConfig(block_size=16))
    with set_current_vllm_config(config), use_platform(CUDA):
        backend = get_attn_backend(head_size=128, dtype="float16", kv_cache_dtype=None)
    # The chosen backend passed the non-causal check; every rejected one names it.
    assert backend.selection.config.use_non_causal
    assert backend.validate_configuration(head_size=128, dtype="float16", device_capability=(9, 0),
                                          use_non_causal=True) == []


@pytest.mark.parametrize("kv_cache_dtype", ["fp8_e5m2", "fp8_ds_mla", "fp8_inc", "nvfp4", "fp8_per_token_head",
                                            "int8_per_token_head"])
def test_flash_attn_rejects_unhandled_kv_cache_dtypes(kv_cache_dtype):
    reasons = AttentionBackendEnum.FLASH_ATTN.get_class().validate_configuration(
        head_size=128, dtype="bfloat16", kv_cache_dtype=kv_cache_dtype, device_capability=(9, 0))
    assert "kv_cache_dtype not supported" in reasons


@pytest.mark.parametrize("kv_cache_dtype", ["fp8", "fp8_e4m3"])
def test_flash_attn_accepts_handled_fp8_variants(kv_cache_dtype):
    reasons = AttentionBackendEnum.FLASH_ATTN.get_class().validate_configuration(
        head_size=128, dtype="bfloat16", kv_cache_dtype=kv_cache_dtype, device_capability=(9, 0))
    assert "kv_cache_dtype not supported" not in reasons

"""One road for engine settings: the same settings give the same answer through
get_attn_backend (vLLM's configuration objects), select (the selector's switches) and plan
(vLLM's engine options). Each case changes a runtime fact, not only a selector field."""
import pytest

from attnsel import (AttentionConfig, VllmConfig, get_attn_backend, plan, select,
                     set_current_vllm_config, use_platform)


@pytest.mark.parametrize("platform, vllm_config, switches, options, expected", [
    # VLLM_BATCH_INVARIANT demotes FA4 to FA2, which has no fp8 cache on Blackwell.
    ("cuda:10.0", VllmConfig(batch_invariant=True), {"use_batch_invariant": True}, {"batch_invariant": True},
     "TRITON_ATTN"),
    ("cuda:10.0", VllmConfig(), {}, {}, "FLASHINFER"),
    # AttentionConfig.flash_attn_version=2: FA2 has no fp8 cache on Hopper.
    ("cuda:9.0", VllmConfig(attention_config=AttentionConfig(flash_attn_version=2)),
     {"attention_config": {"flash_attn_version": 2}}, {"attention_config": {"flash_attn_version": 2}}, "FLASHINFER"),
    # A KV connector: ROCM_ATTN refuses it.
    ("rocm:gfx942", VllmConfig(kv_transfer_instance=True), {"use_kv_connector": True},
     {"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"}}, "ROCM_AITER_UNIFIED_ATTN"),
])
def test_engine_settings_answer_the_same_through_every_function(platform, vllm_config, switches, options, expected):
    with use_platform(platform), set_current_vllm_config(vllm_config):
        assert get_attn_backend(128, "bfloat16", "fp8").get_name() == expected
    assert select(platform, 128, "bfloat16", "fp8", **switches).backend == expected
    assert plan(None, platform, kv_cache_dtype="fp8", **options).groups[0].backend == expected

"""vLLM's platform messages through the Python package: the CPU's block-size warning and ROCm's
routing of a layer with a TurboQuant cache."""
from attnsel import select

CPU_BLOCK_SIZE_WARNING = "CPU backend prefers block_size is multiples of 32, otherwise the performance is not optimized."


def test_cpu_warns_of_a_block_size_that_is_not_a_multiple_of_32():
    assert select("cpu", block_size=16).warnings == [CPU_BLOCK_SIZE_WARNING]
    assert select("cpu", block_size=64).warnings == []
    assert select("cpu").warnings == []  # the platform's own 128


def test_rocm_turboquant_layer():
    explicit = select("rocm:gfx942", kv_cache_dtype="turboquant_k8v4", attention_backend="TURBOQUANT")
    assert explicit.backend == "TURBOQUANT" and explicit.requested == "TURBOQUANT"
    replaced = select("rocm:gfx942", kv_cache_dtype="turboquant_k8v4", attention_backend="ROCM_ATTN")
    assert replaced.backend == "TURBOQUANT"
    assert [c.backend for c in replaced.candidates if not c.valid][:1] == ["ROCM_ATTN"]

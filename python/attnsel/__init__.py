"""attnsel from Python: which attention backend vLLM would choose, why, and its kernels.

    >>> import attnsel
    >>> attnsel.select(platform="cuda:9.0", head_size=72).backend
    'FLASH_ATTN'

Names follow vLLM's (AttentionBackendEnum, register_backend, AttentionSelectorConfig,
get_attn_backend). Everything runs in libattnsel through its C API (ctypes, no compiled
extension): set ATTNSEL_LIBRARY to use a particular libattnsel.so."""
from ._errors import InternalError, SelectionFailed, SelectionNotImplemented
from ._library import library_path
from ._library import lib as _lib
from .config import (AttentionConfig, CacheConfig, KVCacheSpecKind, ParallelConfig, VllmConfig,
                     get_current_platform, get_current_vllm_config, set_current_vllm_config, use_platform)
from .kernels import KernelInfo, PagedAttention, StepPlan, kernel_info
from .mla import MLAAttention, MLAStepPlan, MLAStepSummary
from .plan import BackendInfo, Plan, PlanError, PlanGroup, list_backends, plan
from .registry import (AttentionBackendEnum, BackendClass, BackendMember, MambaAttentionBackendEnum, load_plugin,
                       loaded_plugins, register_backend)
from .selection import (AttentionSelectorConfig, Candidate, Selection, get_attn_backend, get_mamba_attn_backend,
                        list_facts, select)

__version__ = _lib.attnsel_version().decode()
c_api_version = (_lib.attnsel_c_api_version() >> 16, _lib.attnsel_c_api_version() & 0xFFFF)

__all__ = [
    "AttentionBackendEnum", "AttentionConfig", "AttentionSelectorConfig", "BackendClass", "BackendInfo",
    "BackendMember", "CacheConfig", "Candidate", "InternalError", "KVCacheSpecKind", "KernelInfo", "MLAAttention",
    "MLAStepPlan", "MLAStepSummary", "MambaAttentionBackendEnum", "PagedAttention", "ParallelConfig", "Plan",
    "PlanError", "PlanGroup", "Selection", "SelectionFailed", "SelectionNotImplemented", "StepPlan", "VllmConfig",
    "get_attn_backend", "get_current_platform", "get_current_vllm_config", "get_mamba_attn_backend", "kernel_info",
    "library_path", "list_backends", "list_facts", "load_plugin", "loaded_plugins", "plan", "register_backend",
    "select", "set_current_vllm_config", "use_platform",
]

"""vLLM's configuration objects that selection reads (AttentionConfig, CacheConfig,
ParallelConfig, VllmConfig), the current configuration and the current platform.

vLLM reads them from a global (set_current_vllm_config) and from current_platform; here both
are context managers, so that vLLM's selector tests port with small changes:

    with set_current_vllm_config(VllmConfig(cache_config=CacheConfig(block_size=16))), \\
         use_platform("cuda:9.0"):
        get_attn_backend(64, "float16", None).get_name()
"""
import contextlib
import dataclasses
import json
import threading
from typing import Dict, Optional

from .registry import AttentionBackendEnum, BackendMember


def _backend_name(backend):
    if backend is None:
        return None
    if isinstance(backend, BackendMember):
        return backend.name
    text = str(backend)
    if text.lower() == "auto":
        return None
    return AttentionBackendEnum[text.upper()].name  # vLLM upper-cases before lookup


@dataclasses.dataclass
class AttentionConfig:
    """vLLM's AttentionConfig: `backend` accepts a member, its name in any case, "auto" or None."""
    backend: Optional[object] = None
    backend_per_kind: Dict[str, object] = dataclasses.field(default_factory=dict)
    use_non_causal: bool = False
    flash_attn_version: Optional[int] = None
    use_trtllm_attention: Optional[bool] = None

    def __post_init__(self):
        name = _backend_name(self.backend)
        self.backend = None if name is None else AttentionBackendEnum[name]

    def to_json(self):
        """The --attention-config JSON the C API reads (backend travels separately)."""
        out = {"use_non_causal": self.use_non_causal}
        if self.backend_per_kind:
            out["backend_per_kind"] = {k: _backend_name(v) or str(v) for k, v in self.backend_per_kind.items()}
        if self.flash_attn_version is not None:
            out["flash_attn_version"] = self.flash_attn_version
        if self.use_trtllm_attention is not None:
            out["use_trtllm_attention"] = self.use_trtllm_attention
        return json.dumps(out)


@dataclasses.dataclass
class CacheConfig:
    """vLLM's CacheConfig. A block size given here is user-specified (the selector sees it)."""
    block_size: Optional[int] = None
    cache_dtype: str = "auto"


@dataclasses.dataclass
class ParallelConfig:
    tensor_parallel_size: int = 1
    decode_context_parallel_size: int = 1
    prefill_context_parallel_size: int = 1


@dataclasses.dataclass
class VllmConfig:
    attention_config: AttentionConfig = dataclasses.field(default_factory=AttentionConfig)
    cache_config: CacheConfig = dataclasses.field(default_factory=CacheConfig)
    parallel_config: ParallelConfig = dataclasses.field(default_factory=ParallelConfig)
    batch_invariant: bool = False      # VLLM_BATCH_INVARIANT
    kv_transfer_instance: bool = False


_state = threading.local()


def get_current_vllm_config() -> VllmConfig:
    return getattr(_state, "config", None) or VllmConfig()


def get_current_platform() -> Optional[str]:
    """The platform spec in use ("cuda:9.0", ...), or None for this host."""
    return getattr(_state, "platform", None)


@contextlib.contextmanager
def set_current_vllm_config(config: VllmConfig):
    previous = getattr(_state, "config", None)
    _state.config = config
    try:
        yield config
    finally:
        _state.config = previous


@contextlib.contextmanager
def use_platform(spec: Optional[str]):
    """Selections inside use this platform: "cuda:9.0", "rocm:gfx942", "xpu", "cpu", "other:NAME",
    or None for this host (vLLM's `patch("vllm.platforms.current_platform", ...)`)."""
    previous = getattr(_state, "platform", None)
    _state.platform = spec
    try:
        yield spec
    finally:
        _state.platform = previous

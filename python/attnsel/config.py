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
import enum
import json
import threading
from typing import Dict, Optional

from .registry import AttentionBackendEnum, BackendMember


class KVCacheSpecKind(str, enum.Enum):
    """vLLM's KVCacheSpecKind (vllm/v1/kv_cache_interface.py): the KV-cache group kinds, whose
    values are the keys AttentionConfig.backend_per_kind accepts."""
    FULL_ATTENTION = "full_attention"
    MLA_ATTENTION = "mla_attention"
    SLIDING_WINDOW = "sliding_window"
    SLIDING_WINDOW_MLA = "sliding_window_mla"
    MAMBA = "mamba"
    CHUNKED_LOCAL_ATTENTION = "chunked_local_attention"
    SINK_FULL_ATTENTION = "sink_full_attention"
    ENCODER_ONLY_ATTENTION = "encoder_only_attention"
    CROSS_ATTENTION = "cross_attention"
    UNKNOWN = "unknown"


def _validate_backend(value):
    """vLLM's validate_backend_before: "auto" (any case) is None, another string a member by its
    name in any case; anything else is kept."""
    if isinstance(value, str):
        if value.lower() == "auto":
            return None
        return AttentionBackendEnum[value.upper()]
    return value


def _validate_backend_per_kind(value):
    """vLLM's validate_backend_per_kind_before: every key a KVCacheSpecKind value; string values
    become members as `backend` does ("auto" is not special here). A non-dict is kept."""
    if not isinstance(value, dict):
        return value
    valid_kinds = {kind.value for kind in KVCacheSpecKind}
    parsed = {}
    for kind, backend in value.items():
        if kind not in valid_kinds:
            raise ValueError(f"Unknown KV cache group kind '{kind}' in backend_per_kind. "
                             f"Valid kinds are: {', '.join(sorted(valid_kinds))}.")
        if isinstance(backend, str):
            backend = AttentionBackendEnum[backend.upper()]
        parsed[kind] = backend
    return parsed


@dataclasses.dataclass
class AttentionConfig:
    """vLLM's AttentionConfig. `backend` and the values of `backend_per_kind` are members once
    it is built: a member, its name in any case, or (for `backend`) "auto" or None."""
    backend: Optional[object] = None
    backend_per_kind: Dict[str, object] = dataclasses.field(default_factory=dict)
    use_non_causal: bool = False
    flash_attn_version: Optional[int] = None
    use_trtllm_attention: Optional[bool] = None
    minimax_m3_msa_decode_backend: str = "triton"

    def __post_init__(self):
        self.backend = _validate_backend(self.backend)
        self.backend_per_kind = _validate_backend_per_kind(self.backend_per_kind)
        # vLLM's MSA alias rule: the MiniMax-M3 MSA names pick the decode kernel, not a backend.
        if self.backend is not None and self.backend.name in ("CUTLASS_MSA", "TRITON_MSA"):
            self.minimax_m3_msa_decode_backend = "cutlass" if self.backend.name == "CUTLASS_MSA" else "triton"
            self.backend = None

    def to_json(self):
        """The --attention-config JSON the C API reads (backend travels separately)."""
        out = {"use_non_causal": self.use_non_causal}
        if self.backend_per_kind:
            out["backend_per_kind"] = {k: getattr(v, "name", v) for k, v in self.backend_per_kind.items()}
        if self.flash_attn_version is not None:
            out["flash_attn_version"] = self.flash_attn_version
        if self.use_trtllm_attention is not None:
            out["use_trtllm_attention"] = self.use_trtllm_attention
        out["minimax_m3_msa_decode_backend"] = self.minimax_m3_msa_decode_backend
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

"""Selection: attnsel.select (one layer, explained) and vLLM's get_attn_backend."""
import collections
import ctypes
import dataclasses
from typing import List, Optional

from . import _library as L
from ._convert import config_json
from ._errors import selection_error
from .config import get_current_platform, get_current_vllm_config
from ._request import _SWITCHES, _request, dtype_name  # noqa: F401 (re-exported)
from .registry import BackendClass, BackendMember, MambaAttentionBackendEnum, _member_by_name


def _config_defaults():
    """The defaults of AttentionSelectorConfig's fields after vLLM's four required ones."""
    required = ("head_size", "dtype", "kv_cache_dtype", "block_size")
    assert L.CONFIG_FIELDS[:len(required)] == required, L.CONFIG_FIELDS
    return ["decoder" if name == "attn_type" else False for name in L.CONFIG_FIELDS[len(required):]]


class AttentionSelectorConfig(collections.namedtuple("AttentionSelectorConfig", L.CONFIG_FIELDS,
                                                     defaults=_config_defaults())):
    """vLLM's AttentionSelectorConfig: the key of a selection, with vLLM's field names in vLLM's
    order (head_size, dtype, kv_cache_dtype, block_size, the flags, attn_type), attnsel's own
    flags last. The fields come from the library's table of selector flags."""
    __slots__ = ()


@dataclasses.dataclass(frozen=True)
class Candidate:
    backend: str
    priority: int
    valid: bool
    reasons: List[str]


@dataclasses.dataclass(frozen=True)
class Selection:
    """One selection, explained: the chosen backend and every candidate with its reasons."""
    backend: str
    class_name: str
    priority: Optional[int]
    platform: str
    mode: str
    config: AttentionSelectorConfig
    num_heads: Optional[int]
    requested: Optional[str]
    candidates: List[Candidate]
    warnings: List[str]

    def get_class(self):
        return _member_by_name(L.ENUM_ATTENTION, self.backend).get_class()


def _candidates(items):
    return [Candidate(c["backend"], c["priority"], c["valid"], list(c["reasons"])) for c in items]


def _parse_selection(j) -> Selection:
    return Selection(backend=j["backend"], class_name=j["class"], priority=j["priority"], platform=j["platform"],
                     mode=j["mode"], config=AttentionSelectorConfig(**j["config"]), num_heads=j["num_heads"],
                     requested=j["requested"], candidates=_candidates(j["candidates"]), warnings=list(j["warnings"]))


def select(platform: Optional[str] = None, head_size: int = 128, dtype="bfloat16", kv_cache_dtype=None,
           block_size=None, *, mode=None, facts=(), attention_backend=None, attention_config=None,
           backend_per_kind=None, attn_type="decoder", num_heads=None, run_cache_dtype=None,
           **switches) -> Selection:
    """What would vLLM choose for this layer on `platform` ("cuda:9.0", "rocm:gfx942", "xpu",
    "cpu", "other:NAME"; None = this host, in runnable mode), and why not the others.

    `switches` are the selector's boolean fields (use_mla=True, has_sink=True, use_dcp=True,
    ...). A failed selection raises ValueError or NotImplementedError with vLLM's message;
    the exception's `candidates` lists every candidate with its reasons."""
    attention_config = config_json(attention_config, "attention_config")
    request, keep = _request(platform=platform, mode=mode, facts=facts, attention_backend=attention_backend,
                             attention_config=attention_config, backend_per_kind=backend_per_kind,
                             head_size=head_size, dtype=dtype, kv_cache_dtype=kv_cache_dtype,
                             block_size=block_size, attn_type=attn_type, num_heads=num_heads,
                             run_cache_dtype=run_cache_dtype, **switches)
    j, message = L.call_json_report(L.lib.attnsel_select_json, ctypes.byref(request))
    if message is not None:
        raise selection_error(j.get("error_type"), message, _candidates(j.get("candidates", [])))
    return _parse_selection(j)


def get_attn_backend(head_size: int, dtype, kv_cache_dtype: Optional[str], use_mla: bool = False,
                     has_sink: bool = False, use_sparse: bool = False, use_mm_prefix: bool = False,
                     use_per_head_quant_scales: bool = False, attn_type=None, num_heads: Optional[int] = None,
                     has_sliding_window: bool = False, *, platform: Optional[str] = None, **facts_and_mode):
    """vLLM's get_attn_backend, with its arguments in vLLM's order: the backend class chosen for
    a layer, reading the current configuration (set_current_vllm_config) and platform
    (use_platform; `platform` overrides). As in vLLM, the block size is the cache config's,
    seen only when it was given. Returns a BackendClass (get_name(), full_cls_name(), ...)."""
    vllm_config = get_current_vllm_config()
    ac, cc, pc = vllm_config.attention_config, vllm_config.cache_config, vllm_config.parallel_config
    sel = select(platform=platform if platform is not None else get_current_platform(), head_size=head_size,
                 dtype=dtype, kv_cache_dtype=kv_cache_dtype, block_size=cc.block_size,
                 attention_backend=ac.backend.name if ac.backend is not None else None,
                 attention_config=ac.to_json(), attn_type=attn_type or "decoder", num_heads=num_heads,
                 run_cache_dtype=cc.cache_dtype if cc.cache_dtype != "auto" else None,
                 use_mla=use_mla, has_sink=has_sink, use_sparse=use_sparse, use_mm_prefix=use_mm_prefix,
                 use_per_head_quant_scales=use_per_head_quant_scales, has_sliding_window=has_sliding_window,
                 use_batch_invariant=vllm_config.batch_invariant, use_kv_connector=vllm_config.kv_transfer_instance,
                 use_dcp=pc.decode_context_parallel_size > 1, use_pcp=pc.prefill_context_parallel_size > 1,
                 **facts_and_mode)
    cls = sel.get_class()
    return cls if not isinstance(cls, BackendClass) else _with_selection(cls, sel)


def get_mamba_attn_backend(mamba_type):
    """vLLM's get_mamba_attn_backend: the class of a MambaAttentionBackendEnum member, reading
    the current configuration's batch invariance (VLLM_BATCH_INVARIANT). ValueError for an
    unregistered CUSTOM ("Backend CUSTOM must be registered before use. ..."), RuntimeError
    "VLLM batch_invariant mode is not supported for <NAME>." when batch invariance is on and
    the class does not support it."""
    assert mamba_type and isinstance(mamba_type, BackendMember) and mamba_type._enum is MambaAttentionBackendEnum
    batch_invariant = get_current_vllm_config().batch_invariant
    try:
        info = L.call_json(L.lib.attnsel_get_mamba_attn_backend, L.encode(mamba_type.name), int(batch_invariant))
    except ImportError:
        # A Python class (vLLM's resolve_obj_by_qualname), checked here as vLLM checks it.
        cls = mamba_type.get_class()
        if batch_invariant and not cls.supports_batch_invariance():
            raise RuntimeError(f"VLLM batch_invariant mode is not supported for {cls.get_name()}.") from None
        return cls
    info["member"] = mamba_type.name
    return BackendClass(info)


def _with_selection(cls, sel):
    cls.selection = sel
    return cls


def list_facts(platform: Optional[str] = None, mode=None, facts=()) -> list:
    """Every runtime fact with its value on `platform`: [{"name", "type", "value", "default",
    "overridden", "doc"}]."""
    request, keep = _request(platform=platform, mode=mode, facts=facts)
    return L.call_json(L.lib.attnsel_list_facts, ctypes.byref(request))["facts"]

"""The C API's selection request built from Python arguments, shared by selection and the
registry's validate_configuration (it imports nothing else of the package)."""
import ctypes
from typing import Optional

from . import _library as L
from ._convert import c_int, mapping

_SWITCHES = tuple(L.SELECTOR_FLAGS)  # the selector's boolean fields, as the library's table names them


def dtype_name(dtype) -> Optional[str]:
    """"bfloat16" for torch.bfloat16, numpy.float16, "float16", ..."""
    if dtype is None:
        return None
    text = str(dtype)
    for prefix in ("torch.", "<class 'numpy.", "numpy."):
        if text.startswith(prefix):
            text = text[len(prefix):]
    text = text.rstrip("'>")
    return {"half": "float16", "float": "float32", "bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}.get(
        text, text)



def _request(platform=None, mode=None, facts=(), attention_backend=None, attention_config=None,
             backend_per_kind=None, head_size=128, dtype="bfloat16", kv_cache_dtype=None, block_size=None,
             attn_type="decoder", num_heads=None, run_cache_dtype=None, **switches):
    """An attnsel_select_request, and the objects its pointers refer to (keep them alive)."""
    unknown = set(switches) - set(_SWITCHES)
    if unknown:
        raise TypeError(f"unknown selector field(s) {sorted(unknown)}; valid: {', '.join(_SWITCHES)}")
    r = L.SelectRequest()
    L.lib.attnsel_select_request_init(ctypes.byref(r))
    keep = []

    def text(value, name):
        encoded = L.encode(value, name)
        keep.append(encoded)
        return encoded

    r.platform = text(platform, "platform")
    r.mode = text(mode, "mode")
    fact_items = [f"{k}={v}" for k, v in facts.items()] if isinstance(facts, dict) else list(facts)
    array, r.num_facts = L.string_array(fact_items, "facts")
    keep.append(array)
    r.facts = array
    attention_backend = getattr(attention_backend, "name", attention_backend)  # a BackendMember or its name
    r.attention_backend = text(attention_backend, "attention_backend")
    r.attention_config = text(attention_config, "attention_config")
    per_kind = [f"{k}={getattr(v, 'name', v)}" for k, v in mapping(backend_per_kind, "backend_per_kind")]
    array, r.num_backend_per_kind = L.string_array(per_kind, "backend_per_kind")
    keep.append(array)
    r.backend_per_kind = array
    if head_size is None or c_int(head_size, "head_size") <= 0:
        raise ValueError(f"head_size must be a positive integer, got {head_size}")
    r.head_size = c_int(head_size, "head_size")
    r.dtype = text(dtype_name(dtype) or "bfloat16", "dtype")
    r.kv_cache_dtype = text(kv_cache_dtype, "kv_cache_dtype")
    if block_size is not None and c_int(block_size, "block_size") <= 0:
        raise ValueError(f"block_size must be a positive integer, got {block_size}")
    r.block_size = c_int(block_size or 0, "block_size")
    r.attn_type = text(getattr(attn_type, "value", attn_type) or "decoder", "attn_type")
    r.num_heads = c_int(num_heads or 0, "num_heads")
    r.run_cache_dtype = text(run_cache_dtype, "run_cache_dtype")
    for name, value in switches.items():
        L.check(L.lib.attnsel_select_request_set_flag(ctypes.byref(r), L.encode(name), 1 if value else 0))
    return r, keep

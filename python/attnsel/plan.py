"""Whole-model plans (`attnsel plan`) and the backend listing (`attnsel list`)."""
import ctypes
import dataclasses
import json
import os
from typing import Any, Dict, List, Optional

from . import _library as L
from ._convert import c_int, config_json
from ._errors import selection_error
from .selection import AttentionSelectorConfig, Candidate, _candidates


@dataclasses.dataclass(frozen=True)
class PlanGroup:
    """Layers that share a backend and a KV-cache spec."""
    layers: str
    layer_indices: List[int]
    kind: str
    mixer: str
    attn_type: Optional[str]
    backend: Optional[str]
    class_name: Optional[str]
    config: Optional[AttentionSelectorConfig]
    candidates: List[Candidate]
    warnings: List[str]
    has_kv_cache: bool
    num_kv_heads: Optional[int]
    head_size: Optional[int]
    block_size: Optional[int]
    kernel_block_size: Optional[int]
    kv_bytes_per_token_per_layer: Optional[int]
    error: Optional[str]
    raw: Dict[str, Any] = dataclasses.field(repr=False, compare=False)


@dataclasses.dataclass(frozen=True)
class Plan:
    """What vLLM would do for every layer of a model: backends, block size, KV-cache layout."""
    model: Dict[str, Any]
    platform: str
    mode: str
    dtype: str
    kv_cache_dtype: str
    groups: List[PlanGroup]
    block_size: Optional[int]
    layout: Optional[str]
    kv_bytes_per_token: Optional[int]
    warnings: List[str]
    raw: Dict[str, Any] = dataclasses.field(repr=False, compare=False)


class PlanError(ValueError):
    """The plan fails as vLLM would at start-up; `partial_plan` holds what could be decided."""

    def __init__(self, message, partial_plan=None):
        super().__init__(message)
        self.partial_plan = partial_plan


def _group(g) -> PlanGroup:
    return PlanGroup(layers=g["layers"], layer_indices=list(g["layer_indices"]), kind=g["kind"], mixer=g["mixer"],
                     attn_type=g["attn_type"], backend=g["backend"], class_name=g["class"],
                     config=AttentionSelectorConfig(**g["config"]) if g["config"] else None,
                     candidates=_candidates(g["candidates"]), warnings=list(g["warnings"]),
                     has_kv_cache=g["has_kv_cache"], num_kv_heads=g["num_kv_heads"], head_size=g["head_size"],
                     block_size=g["block_size"], kernel_block_size=g["kernel_block_size"],
                     kv_bytes_per_token_per_layer=g["kv_bytes_per_token_per_layer"], error=g["error"], raw=g)


def _plan(j) -> Plan:
    return Plan(model=j["model"], platform=j["platform"], mode=j["mode"], dtype=j["dtype"],
                kv_cache_dtype=j["kv_cache_dtype"], groups=[_group(g) for g in j["groups"]],
                block_size=j["block_size"]["value"] if j["block_size"] else None,
                layout=j["layout"]["value"] if j["layout"] else None, kv_bytes_per_token=j["kv_bytes_per_token"],
                warnings=list(j["warnings"]), raw=j)


def plan(model=None, platform: Optional[str] = None, *, mode=None, facts=(), attention_backend=None,
         attention_config=None, kv_cache_dtype=None, block_size=None, dtype=None, tensor_parallel_size=1,
         decode_context_parallel_size=1, prefill_context_parallel_size=1, kv_transfer_config=None,
         kv_cache_layout=None, batch_invariant=False) -> Plan:
    """The plan of every layer of `model` (a config.json path or folder, its text, a dict, or None
    for a Llama-3-8B-like model) with vLLM's engine options."""
    r = L.PlanRequest()
    L.lib.attnsel_plan_request_init(ctypes.byref(r))
    keep = []

    def text(value, name):
        if isinstance(value, dict):
            value = json.dumps(value)
        encoded = L.encode(value, name)
        keep.append(encoded)
        return encoded

    if isinstance(model, dict):
        r.model_json = text(json.dumps(model), "model")
    elif isinstance(model, (str, os.PathLike)) and str(model).lstrip().startswith("{"):
        r.model_json = text(str(model), "model")
    elif model is not None:
        r.model_path = text(os.fspath(model), "model")
    r.platform = text(platform, "platform")
    r.mode = text(mode, "mode")
    fact_items = [f"{k}={v}" for k, v in facts.items()] if isinstance(facts, dict) else list(facts)
    array, r.num_facts = L.string_array(fact_items, "facts")
    keep.append(array)
    r.facts = array
    r.attention_backend = text(getattr(attention_backend, "name", attention_backend), "attention_backend")
    attention_config = config_json(attention_config, "attention_config")
    r.attention_config = text(attention_config, "attention_config")
    r.kv_cache_dtype = text(kv_cache_dtype, "kv_cache_dtype")
    r.block_size = c_int(block_size or 0, "block_size")
    r.dtype = text(None if dtype is None else str(dtype).replace("torch.", ""), "dtype")
    r.tensor_parallel_size = c_int(tensor_parallel_size, "tensor_parallel_size")
    r.decode_context_parallel_size = c_int(decode_context_parallel_size, "decode_context_parallel_size")
    r.prefill_context_parallel_size = c_int(prefill_context_parallel_size, "prefill_context_parallel_size")
    r.kv_transfer_config = text(kv_transfer_config, "kv_transfer_config")
    r.kv_cache_layout = text(kv_cache_layout, "kv_cache_layout")
    r.batch_invariant = 1 if batch_invariant else 0
    j, message = L.call_json_report(L.lib.attnsel_plan_json, ctypes.byref(r))
    if message is not None:
        partial = _plan(j["plan"]) if j.get("plan") else None
        if j.get("error_type") == "ValueError":
            raise PlanError(message, partial)
        raise selection_error(j.get("error_type"), message, [])
    return _plan(j)


@dataclasses.dataclass(frozen=True)
class BackendInfo:
    """One enum member with its class and capabilities on a platform (`attnsel list`)."""
    enum: str
    name: str
    class_name: Optional[str]
    overridden: bool
    error: Optional[str]
    has_kernel: bool
    capabilities: Optional[Dict[str, Any]]


def list_backends(platform: Optional[str] = None, mode=None) -> List[BackendInfo]:
    """Every member of both enums (dynamic ones included) with its capabilities on `platform`
    (None = this host)."""
    j = L.call_json(L.lib.attnsel_list_backends, L.encode(platform), L.encode(mode))
    return [BackendInfo(enum=b["enum"], name=b["name"], class_name=b["class"], overridden=b["overridden"],
                        error=b["error"], has_kernel=b["has_kernel"], capabilities=b["capabilities"])
            for b in j["backends"]]

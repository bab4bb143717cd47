"""Finds libattnsel.so, declares the C API's signatures (include/attnsel/attnsel.h) and maps
its status codes to Python's exceptions."""
import ctypes
import json
import os
import pathlib

from ._convert import c_text
from ._errors import error_for_status

C_API_MAJOR = 2
C_API_MINOR = 3  # the selector flags by name (attnsel_select_request_set_flag) came with 2.3


def version_problem(path, version):
    """Why the library at `path`, of C API `version` (major << 16 | minor), cannot serve this
    package, or None: another major version, or an older minor one that lacks functions."""
    major, minor = version >> 16, version & 0xFFFF
    if major != C_API_MAJOR or minor < C_API_MINOR:
        return (f"{path} implements attnsel's C API {major}.{minor}; this package needs "
                f"{C_API_MAJOR}.{C_API_MINOR} or a later {C_API_MAJOR}.x")
    return None

c_char_p = ctypes.c_char_p
c_int32 = ctypes.c_int32
c_uint32 = ctypes.c_uint32
c_uint8 = ctypes.c_uint8
c_void_p = ctypes.c_void_p
c_float = ctypes.c_float
status_t = ctypes.c_int32


class SelectRequest(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("platform", c_char_p),
        ("mode", c_char_p),
        ("facts", ctypes.POINTER(c_char_p)),
        ("num_facts", c_uint32),
        ("attention_backend", c_char_p),
        ("attention_config", c_char_p),
        ("backend_per_kind", ctypes.POINTER(c_char_p)),
        ("num_backend_per_kind", c_uint32),
        ("head_size", c_int32),
        ("dtype", c_char_p),
        ("kv_cache_dtype", c_char_p),
        ("block_size", c_int32),
        ("attn_type", c_char_p),
        ("num_heads", c_int32),
        ("run_cache_dtype", c_char_p),
    ] + [(name, c_uint8) for name in (  # C API 2.2's flag fields; later flags are set by name
        "use_mla", "has_sink", "use_sparse", "use_mm_prefix", "use_per_head_quant_scales",
        "has_sliding_window", "use_non_causal", "use_batch_invariant", "use_kv_connector", "use_pcp",
        "use_dcp", "use_adaptive_verification", "use_rswa")] + [
        ("flags", ctypes.c_uint64),
    ]


class Candidate(ctypes.Structure):
    _fields_ = [
        ("backend", c_char_p),
        ("priority", c_int32),
        ("valid", c_uint8),
        ("num_reasons", c_uint32),
        ("reasons", ctypes.POINTER(c_char_p)),
    ]


class PlanRequest(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("platform", c_char_p),
        ("mode", c_char_p),
        ("facts", ctypes.POINTER(c_char_p)),
        ("num_facts", c_uint32),
        ("model_path", c_char_p),
        ("model_json", c_char_p),
        ("attention_backend", c_char_p),
        ("attention_config", c_char_p),
        ("kv_cache_dtype", c_char_p),
        ("block_size", c_int32),
        ("dtype", c_char_p),
        ("tensor_parallel_size", c_int32),
        ("decode_context_parallel_size", c_int32),
        ("prefill_context_parallel_size", c_int32),
        ("kv_transfer_config", c_char_p),
        ("kv_cache_layout", c_char_p),
        ("batch_invariant", c_uint8),
    ]


class LayerParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("num_heads", c_int32),
        ("num_kv_heads", c_int32),
        ("head_size", c_int32),
        ("scale", c_float),
        ("sliding_window", c_int32),
        ("logits_soft_cap", c_float),
        ("alibi_slopes", ctypes.POINTER(c_float)),
        ("num_alibi_slopes", c_uint32),
        ("sinks", ctypes.POINTER(c_float)),
        ("num_sinks", c_uint32),
        ("attn_type", c_char_p),
        ("causal", c_uint8),
        ("kv_cache_dtype", c_char_p),
        ("k_scale", c_float),
        ("v_scale", c_float),
        ("k_scales", ctypes.POINTER(c_float)),
        ("num_k_scales", c_uint32),
        ("v_scales", ctypes.POINTER(c_float)),
        ("num_v_scales", c_uint32),
        ("batch_invariant", c_uint8),
    ]


class Batch(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("num_seqs", c_int32),
        ("query_start_loc", ctypes.POINTER(c_int32)),
        ("seq_lens", ctypes.POINTER(c_int32)),
        ("block_table", ctypes.POINTER(c_int32)),
        ("max_blocks_per_seq", c_int32),
        ("slot_mapping", ctypes.POINTER(ctypes.c_int64)),
    ]


class PlanOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("graph_capturable", c_uint8),
        ("max_blocks_per_seq", c_int32),
        ("lse", c_uint8),
        ("early_cache_reads", c_uint8),
    ]


class KernelInfo(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("available", c_uint8),
        ("device_type", c_int32),
        ("isa", c_char_p),
        ("graph_support", c_int32),
        ("graph_support_name", c_char_p),
        ("preferred_layout", c_char_p),
        ("lse_output", c_uint8),
        ("lse_prefill", c_uint8),
    ]


class MlaLayerParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("num_heads", c_int32),
        ("kv_lora_rank", c_int32),
        ("qk_rope_head_dim", c_int32),
        ("qk_nope_head_dim", c_int32),
        ("v_head_dim", c_int32),
        ("scale", c_float),
        ("dtype", c_char_p),
        ("kv_cache_dtype", c_char_p),
        ("k_scale", c_float),
        ("batch_invariant", c_uint8),
        ("kv_b_proj", c_void_p),
    ]


class MlaPlanOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("graph_capturable", c_uint8),
        ("max_blocks_per_seq", c_int32),
        ("decode_query_len", c_int32),
        ("lse", c_uint8),
        ("context_chunk_tokens", ctypes.c_int64),
    ]


class MlaStepSummary(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("num_decodes", c_int32),
        ("num_decode_tokens", c_int32),
        ("num_prefills", c_int32),
        ("num_prefill_tokens", c_int32),
        ("context_chunks", c_int32),
    ]


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    """dlpack.h's DLTensor (the same layout in every DLPack version)."""
    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


# name: (restype, argtypes). Every function of include/attnsel/attnsel.h.
_P = ctypes.POINTER
_SIGNATURES = {
    "attnsel_last_error": (c_char_p, []),
    "attnsel_status_name": (c_char_p, [status_t]),
    "attnsel_c_api_version": (c_uint32, []),
    "attnsel_version": (c_char_p, []),
    "attnsel_free_string": (None, [c_void_p]),
    "attnsel_select_request_init": (None, [_P(SelectRequest)]),
    "attnsel_select_request_set_flag": (status_t, [_P(SelectRequest), c_char_p, ctypes.c_int]),
    "attnsel_list_selector_flags": (status_t, [_P(c_void_p)]),
    "attnsel_select": (status_t, [_P(SelectRequest), _P(c_void_p)]),
    "attnsel_selection_destroy": (None, [c_void_p]),
    "attnsel_selection_backend": (c_char_p, [c_void_p]),
    "attnsel_selection_class": (c_char_p, [c_void_p]),
    "attnsel_selection_priority": (c_int32, [c_void_p]),
    "attnsel_selection_num_candidates": (c_uint32, [c_void_p]),
    "attnsel_selection_candidate": (status_t, [c_void_p, c_uint32, _P(Candidate)]),
    "attnsel_selection_num_warnings": (c_uint32, [c_void_p]),
    "attnsel_selection_warning": (c_char_p, [c_void_p, c_uint32]),
    "attnsel_selection_json": (c_char_p, [c_void_p]),
    "attnsel_select_json": (status_t, [_P(SelectRequest), _P(c_void_p)]),
    "attnsel_check_backend": (status_t, [_P(SelectRequest), c_char_p, _P(c_void_p)]),
    "attnsel_list_facts": (status_t, [_P(SelectRequest), _P(c_void_p)]),
    "attnsel_plan_request_init": (None, [_P(PlanRequest)]),
    "attnsel_plan_json": (status_t, [_P(PlanRequest), _P(c_void_p)]),
    "attnsel_enum_members": (status_t, [c_uint32, _P(c_void_p)]),
    "attnsel_list_backends": (status_t, [c_char_p, c_char_p, _P(c_void_p)]),
    "attnsel_member_check": (status_t, [c_uint32, c_char_p]),
    "attnsel_member_get_path": (status_t, [c_uint32, c_char_p, ctypes.c_int, _P(c_void_p)]),
    "attnsel_member_get_class": (status_t, [c_uint32, c_char_p, _P(c_void_p)]),
    "attnsel_member_is_overridden": (status_t, [c_uint32, c_char_p, _P(ctypes.c_int)]),
    "attnsel_member_clear_override": (status_t, [c_uint32, c_char_p]),
    "attnsel_register_backend": (status_t, [c_uint32, c_char_p, c_char_p]),
    "attnsel_register_member": (status_t, [c_uint32, c_char_p, c_char_p]),
    "attnsel_get_mamba_attn_backend": (status_t, [c_char_p, ctypes.c_int, _P(c_void_p)]),
    "attnsel_load_plugin": (status_t, [c_char_p, _P(c_void_p)]),
    "attnsel_loaded_plugins": (status_t, [_P(c_void_p)]),
    "attnsel_layer_params_init": (None, [_P(LayerParams)]),
    "attnsel_batch_init": (None, [_P(Batch)]),
    "attnsel_plan_options_init": (None, [_P(PlanOptions)]),
    "attnsel_kernel_info_init": (None, [_P(KernelInfo)]),
    "attnsel_kernel_create": (status_t, [c_char_p, _P(LayerParams), _P(c_void_p)]),
    "attnsel_kernel_destroy": (None, [c_void_p]),
    "attnsel_kernel_get_info": (status_t, [c_void_p, _P(KernelInfo)]),
    "attnsel_backend_get_kernel_info": (status_t, [c_char_p, c_char_p, c_char_p, _P(KernelInfo)]),
    "attnsel_kernel_plan": (status_t, [c_void_p, _P(Batch), c_void_p, c_void_p, DLDataType, _P(PlanOptions), c_void_p,
                                       _P(c_void_p)]),
    "attnsel_kernel_update_plan": (status_t, [c_void_p, c_void_p, _P(Batch), c_void_p]),
    "attnsel_step_plan_destroy": (None, [c_void_p]),
    "attnsel_step_plan_workspace_bytes": (ctypes.c_uint64, [c_void_p]),
    "attnsel_step_plan_fp8_queries": (ctypes.c_int, [c_void_p]),
    "attnsel_kernel_write_kv_cache": (status_t, [c_void_p] * 7),
    "attnsel_kernel_execute": (status_t, [c_void_p] * 8),
    "attnsel_kernel_execute_append": (status_t, [c_void_p] * 10),
    "attnsel_mla_layer_params_init": (None, [_P(MlaLayerParams)]),
    "attnsel_mla_plan_options_init": (None, [_P(MlaPlanOptions)]),
    "attnsel_mla_step_summary_init": (None, [_P(MlaStepSummary)]),
    "attnsel_mla_kernel_create": (status_t, [c_char_p, _P(MlaLayerParams), _P(c_void_p)]),
    "attnsel_mla_kernel_destroy": (None, [c_void_p]),
    "attnsel_mla_kernel_get_info": (status_t, [c_void_p, _P(KernelInfo)]),
    "attnsel_mla_kernel_limits": (status_t, [c_void_p, _P(c_int32), _P(c_int32)]),
    "attnsel_mla_kernel_plan": (status_t, [c_void_p, _P(Batch), c_void_p, _P(MlaPlanOptions), c_void_p,
                                           _P(c_void_p)]),
    "attnsel_mla_kernel_update_plan": (status_t, [c_void_p, c_void_p, _P(Batch), c_void_p]),
    "attnsel_mla_step_plan_summary": (status_t, [c_void_p, _P(MlaStepSummary)]),
    "attnsel_mla_kernel_write_cache": (status_t, [c_void_p] * 6),
    "attnsel_mla_kernel_execute": (status_t, [c_void_p] * 8),
    "attnsel_mla_kernel_decode_latent": (status_t, [c_void_p] * 7),
}

ENUM_ATTENTION = 0
ENUM_MAMBA = 1
DL_CPU = 1
DL_CUDA = 2
GRAPH_SUPPORT_NAMES = ("never", "uniform_single_token_decode", "uniform_batch", "always")


def _candidates():
    """Where libattnsel.so may be, most specific first."""
    env = os.environ.get("ATTNSEL_LIBRARY")
    if env:
        yield env
        return
    here = pathlib.Path(__file__).resolve().parent
    try:
        from . import _install_location  # written by `cmake --install`
        yield _install_location.LIBRARY
    except ImportError:
        pass
    for name in sorted(here.glob("_lib/libattnsel.so*")):  # bundled by setup.py
        yield str(name)
    yield "libattnsel.so.0"  # the system's library path
    yield "libattnsel.so"


def _load():
    tried = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path}: {e}")
            continue
        if not hasattr(lib, "attnsel_c_api_version"):
            tried.append(f"{path}: not attnsel's library (no attnsel_c_api_version)")
            continue
        lib.attnsel_c_api_version.restype = ctypes.c_uint32
        lib.attnsel_c_api_version.argtypes = []
        # Checked before the functions are bound: an older library lacks some of them.
        problem = version_problem(path, lib.attnsel_c_api_version())
        if problem:
            raise ImportError(problem)
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype = restype
            fn.argtypes = argtypes
        return lib, path
    raise ImportError("cannot load libattnsel.so; set ATTNSEL_LIBRARY to its path. Tried:\n  " + "\n  ".join(tried))


lib, library_path = _load()


def last_error():
    return lib.attnsel_last_error().decode("utf-8", "replace")


def check(status):
    """Raises the exception for a failed status with the library's message."""
    if status != 0:
        raise error_for_status(status, last_error())


def take_string(pointer):
    """The text of a returned string, which is then released."""
    if not pointer.value:
        return None
    try:
        return ctypes.string_at(pointer.value).decode("utf-8", "replace")
    finally:
        lib.attnsel_free_string(pointer)


def call_json(fn, *args):
    """Calls a function whose last argument is a `char**` JSON result; returns it parsed."""
    out = c_void_p()
    check(fn(*args, ctypes.byref(out)))
    return json.loads(take_string(out))


def call_json_report(fn, *args):
    """Calls a function whose last argument is a `char**` JSON report, which it writes on
    failure too (the candidates and their reasons, a partial plan). Returns (report, None) on
    success and (report, message) on failure; a failure without a report raises as check()."""
    out = c_void_p()
    status = fn(*args, ctypes.byref(out))
    text = take_string(out)
    if status == 0:
        return json.loads(text), None
    message = last_error()
    if text is None:
        check(status)
    return json.loads(text), message


def encode(text, name="a string argument"):
    return c_text(text, name)


def string_array(items, name="a list of strings"):
    items = [encode(item, f"{name}[{i}]") for i, item in enumerate(items)]
    return (c_char_p * len(items))(*items) if items else None, len(items)


# The selector flags, from the library's table of checks: the keyword arguments of select()
# and validate_configuration(), and with CONFIG_FIELDS the fields of AttentionSelectorConfig.
_flag_list = call_json(lib.attnsel_list_selector_flags)
SELECTOR_FLAGS = {flag["name"]: flag for flag in _flag_list["flags"]}  # in the table's order
CONFIG_FIELDS = tuple(_flag_list["config_fields"])  # vLLM's order, attnsel's own flags last

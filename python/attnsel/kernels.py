"""attnsel's attention kernels on any tensor that speaks DLPack (numpy arrays, PyTorch tensors on
the CPU or CUDA), without copies, in the shape of an inference engine's step:

    attn = attnsel.PagedAttention(num_heads=32, head_size=128, num_kv_heads=8)   # CPU_ATTN
    step = attn.plan(key_caches[0], value_caches[0], query_start_loc, seq_lens, block_table,
                     slot_mapping)                                                # once per step
    for l, layer in enumerate(layers):                                            # every layer
        attn.write_kv_cache(key, value, key_caches[l], value_caches[l], step)
        attn.forward(query, key_caches[l], value_caches[l], step, output)
        # or both in one call (FlashAttention's flash_attn_with_kvcache(k=, v=)):
        # attn.forward(query, key_caches[l], value_caches[l], step, output, key=key, value=value)
    attn.update(step, query_start_loc, seq_lens, block_table, slot_mapping)       # the next step

A plan serves every layer of a KV-cache group: the layers with the same heads, head size,
window and causality and the same cache geometry (shape, strides, dtype). The plan checks the
batch, splits the work and uploads the batch description once; forward and write_kv_cache only
check the layer's tensors against it and launch.

Shapes: query/output [num_tokens, num_heads, head_size]; key/value [num_tokens, num_kv_heads,
head_size]; caches [num_blocks, block_size, num_kv_heads, head_size] (strides give the layout);
lse [num_tokens, num_heads] float32. The batch arrays may be lists, numpy arrays or tensors
(copied into the plan). On CUDA the kernels run on PyTorch's current stream for torch tensors
(or on the `stream` given: a cudaStream_t as an int, or a torch.cuda.Stream)."""
import ctypes
import dataclasses
import math
from typing import Optional, Sequence

from . import _library as L
from ._convert import c_int, c_int_list, check_int_array, instance
from ._dlpack import exported, is_torch

# DLPack's (code, bits) of the activation dtypes the kernels take.
_ACTIVATION_DTYPES = {"float32": (2, 32), "float16": (2, 16), "bfloat16": (4, 16)}
_DTYPE_ALIASES = {"float": "float32", "fp32": "float32", "half": "float16", "fp16": "float16", "bf16": "bfloat16"}


@dataclasses.dataclass(frozen=True)
class KernelInfo:
    """What a backend's kernel needs and offers (the kernel interface's KernelInfo)."""
    available: bool
    device: str                     # "cpu" or "cuda": where its tensors live
    isa: str                        # e.g. "AVX3+BF16", "CUDA sm_90a"
    graph_support: str              # vLLM's AttentionCGSupport: never, uniform_single_token_decode, uniform_batch, always
    preferred_layout: Optional[str]  # vLLM's KVCacheLayout name its loads are tuned for, or None
    lse_output: bool                # forward can write the log-sum-exp
    lse_prefill: bool               # ...of every batch (False: decode batches only)


def _kernel_info(info):
    return KernelInfo(available=bool(info.available), device="cuda" if info.device_type == L.DL_CUDA else "cpu",
                      isa=(info.isa or b"").decode(), graph_support=info.graph_support_name.decode(),
                      preferred_layout=info.preferred_layout.decode() if info.preferred_layout else None,
                      lse_output=bool(info.lse_output), lse_prefill=bool(info.lse_prefill))


def kernel_info(backend, dtype="bfloat16", kv_cache_dtype="auto") -> KernelInfo:
    """The kernel of `backend` (a member or its name) for activations of `dtype`, asked before any
    is made: available here or not, its device, ISA, graph support, layout and lse support."""
    info = L.KernelInfo()
    L.lib.attnsel_kernel_info_init(ctypes.byref(info))
    L.check(L.lib.attnsel_backend_get_kernel_info(L.encode(getattr(backend, "name", backend)),
                                                  L.encode(_dtype_name(dtype)), L.encode(kv_cache_dtype),
                                                  ctypes.byref(info)))
    return _kernel_info(info)


def _dtype_name(dtype):
    """"bfloat16" for "bfloat16", "bf16", torch.bfloat16, numpy.float32 ..., or None."""
    if dtype is None:
        return None
    if isinstance(dtype, str):
        text = dtype
    else:  # numpy.dtype("float32").name, numpy.float32.__name__, str(torch.bfloat16)
        text = getattr(dtype, "name", None) or getattr(dtype, "__name__", None) or str(dtype)
    text = text.replace("torch.", "")
    return _DTYPE_ALIASES.get(text, text)


def _dl_dtype(dtype, cache):
    """The plan's activation dtype as a DLDataType: `dtype` when given, else the cache's (a cache
    of the model's dtype, kv_cache_dtype "auto")."""
    if dtype is None:
        t = cache.tensor.dtype
        if (t.code, t.bits) not in _ACTIVATION_DTYPES.values() or t.lanes != 1:
            raise ValueError(f"the cache's dtype (DLPack code {t.code}, {t.bits} bits) is not an activation dtype; "
                             f"give dtype= (one of: {', '.join(_ACTIVATION_DTYPES)})")
        return L.DLDataType(t.code, t.bits, 1)
    name = _dtype_name(dtype)
    if name not in _ACTIVATION_DTYPES:
        raise ValueError(f"unknown activation dtype '{dtype}'; valid values are: {', '.join(_ACTIVATION_DTYPES)}")
    code, bits = _ACTIVATION_DTYPES[name]
    return L.DLDataType(code, bits, 1)


def _host_array(values, ctype, name):
    """A C array of `ctype` over `values` (list, numpy array or tensor), and what keeps it alive."""
    if values is None:
        return None, None
    if is_torch(values):
        import torch
        dtype = torch.int32 if ctype is ctypes.c_int32 else torch.int64
        check_int_array(values, name, ctype, not values.is_floating_point() and not values.is_complex())
        host = values.detach().to(device="cpu", dtype=dtype).contiguous()
        return ctypes.cast(host.data_ptr(), ctypes.POINTER(ctype)), host
    if hasattr(values, "__array_interface__"):
        import numpy
        values = numpy.asarray(values)
        check_int_array(values, name, ctype, values.dtype.kind in "iu")
        host = numpy.ascontiguousarray(values, dtype=numpy.int32 if ctype is ctypes.c_int32 else numpy.int64)
        return host.ctypes.data_as(ctypes.POINTER(ctype)), host
    try:
        rows = list(values)
    except TypeError:
        raise TypeError(f"{name} must be a sequence of integers, a numpy array or a tensor") from None
    flat = c_int_list(rows, name, ctype)
    array = (ctype * len(flat))(*flat)
    return ctypes.cast(array, ctypes.POINTER(ctype)), array


def _shape(values):
    shape = getattr(values, "shape", None)
    if shape is not None:
        return tuple(int(s) for s in shape)
    if values and isinstance(values[0], (list, tuple)):
        return (len(values), len(values[0]))
    return (len(values),)


def _batch(query_start_loc, seq_lens, block_table, slot_mapping):
    """An attnsel_batch over host copies of the arrays, the number of tokens, and what keeps the
    copies alive for the call."""
    b = L.Batch()
    L.lib.attnsel_batch_init(ctypes.byref(b))
    qsl, keep_qsl = _host_array(query_start_loc, ctypes.c_int32, "query_start_loc")
    lens, keep_lens = _host_array(seq_lens, ctypes.c_int32, "seq_lens")
    table, keep_table = _host_array(block_table, ctypes.c_int32, "block_table")
    slots, keep_slots = _host_array(slot_mapping, ctypes.c_int64, "slot_mapping")
    num_seqs = _shape(seq_lens)[0]
    qsl_len = _shape(query_start_loc)[0]
    if qsl_len != num_seqs + 1:
        raise ValueError(f"query_start_loc has {qsl_len} entries; {num_seqs} sequences need {num_seqs + 1}")
    table_shape = _shape(block_table)
    if len(table_shape) != 2 or table_shape[0] != num_seqs:
        raise ValueError(f"block_table must be [num_seqs, max_blocks_per_seq] = [{num_seqs}, ...], got "
                         f"shape {list(table_shape)}")
    num_tokens = int(keep_qsl[num_seqs])
    if slot_mapping is not None and _shape(slot_mapping)[0] < num_tokens:
        raise ValueError(f"slot_mapping has {_shape(slot_mapping)[0]} entries; the step has {num_tokens} tokens")
    b.num_seqs = num_seqs
    b.query_start_loc, b.seq_lens, b.block_table, b.slot_mapping = qsl, lens, table, slots
    b.max_blocks_per_seq = table_shape[1]
    return b, num_tokens, (keep_qsl, keep_lens, keep_table, keep_slots)


def _floats(values):
    if values is None:
        return None, 0, None
    flat = [float(v) for v in (values.tolist() if hasattr(values, "tolist") else values)]
    array = (ctypes.c_float * len(flat))(*flat)
    return ctypes.cast(array, ctypes.POINTER(ctypes.c_float)), len(flat), array


def _raw_stream(stream):
    """A cudaStream_t (as a c_void_p) from an int, a torch.cuda.Stream or anything with .cuda_stream."""
    return ctypes.c_void_p(stream if isinstance(stream, int) else getattr(stream, "cuda_stream", stream))


_torch_current_stream = None


def _torch_stream(device_index):
    """PyTorch's current stream on a device, as a c_void_p (the raw accessor where this torch
    has one: a Stream object costs microseconds)."""
    global _torch_current_stream
    if _torch_current_stream is None:
        import torch
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        _torch_current_stream = raw if raw is not None else lambda i: torch.cuda.current_stream(i).cuda_stream
    return ctypes.c_void_p(_torch_current_stream(device_index))


class StepPlan:
    """One step's plan for a KV-cache group: the checked batch, its work split and workspace.
    Every layer of the group executes against it; PagedAttention.update rewrites it for the next
    step."""

    def __init__(self, handle, num_tokens, lse, graph_capturable, device_type, device_id, torch):
        self._handle = handle
        self._torch = torch
        self.num_tokens = num_tokens
        self.lse = lse
        self.graph_capturable = graph_capturable
        self._device_type, self._device_id = device_type, device_id

    @property
    def workspace_bytes(self) -> int:
        """Bytes of memory the plan owns (batch description and workspace)."""
        return int(L.lib.attnsel_step_plan_workspace_bytes(self._handle))

    @property
    def fp8_queries(self) -> bool:
        """True when some outputs multiply fp8 (e4m3) queries and probabilities (FLASH_ATTN's
        Hopper prefill on an fp8 cache, as FlashAttention-3 with a quantised query): their error
        is an fp8 query's, not only the cache's."""
        return bool(L.lib.attnsel_step_plan_fp8_queries(self._handle))

    def __del__(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle and L is not None and L.lib is not None:
            L.lib.attnsel_step_plan_destroy(handle)


class PagedAttention:
    """One attention layer's kernel over a paged KV cache (vLLM's AttentionImpl).

    `backend` is an enum member's name with a kernel in this build ("CPU_ATTN", "FLASH_ATTN",
    a plugin's); by default CPU_ATTN for device="cpu" and FLASH_ATTN for device="cuda"."""

    def __init__(self, num_heads: int, head_size: int, num_kv_heads: Optional[int] = None,
                 scale: Optional[float] = None, *, backend: Optional[str] = None, device: str = "cpu",
                 sliding_window: Optional[int] = None, logits_soft_cap: float = 0.0,
                 alibi_slopes: Optional[Sequence[float]] = None, sinks: Optional[Sequence[float]] = None,
                 attn_type: str = "decoder", causal: bool = True, kv_cache_dtype: str = "auto",
                 k_scale: float = 1.0, v_scale: float = 1.0, k_scales=None, v_scales=None,
                 batch_invariant: bool = False):
        self._handle = None
        if backend is None:
            if str(device).startswith("cuda"):
                backend = "FLASH_ATTN"
            elif str(device) == "cpu":
                backend = "CPU_ATTN"
            else:
                raise ValueError(f"unknown device '{device}'; valid values are: cpu, cuda")
        self.backend = getattr(backend, "name", backend)
        self.num_heads = c_int(num_heads, "num_heads")
        self.num_kv_heads = c_int(num_kv_heads if num_kv_heads is not None else num_heads, "num_kv_heads")
        self.head_size = c_int(head_size, "head_size")
        p = L.LayerParams()
        L.lib.attnsel_layer_params_init(ctypes.byref(p))
        p.num_heads, p.num_kv_heads, p.head_size = self.num_heads, self.num_kv_heads, self.head_size
        p.scale = float(scale) if scale is not None else 1.0 / math.sqrt(self.head_size) if self.head_size > 0 else 0.0
        p.sliding_window = c_int(sliding_window or 0, "sliding_window")
        p.logits_soft_cap = float(logits_soft_cap)
        keep = []
        for field, values in (("alibi_slopes", alibi_slopes), ("sinks", sinks), ("k_scales", k_scales),
                              ("v_scales", v_scales)):
            pointer, count, array = _floats(values)
            keep.append(array)
            setattr(p, field, pointer)
            setattr(p, "num_" + field, count)
        attn_type_text = L.encode(getattr(attn_type, "value", attn_type))
        cache_dtype_text = L.encode(kv_cache_dtype)
        p.attn_type, p.kv_cache_dtype = attn_type_text, cache_dtype_text
        p.causal = 1 if causal else 0
        p.k_scale, p.v_scale = float(k_scale), float(v_scale)
        p.batch_invariant = 1 if batch_invariant else 0
        handle = ctypes.c_void_p()
        L.check(L.lib.attnsel_kernel_create(L.encode(self.backend), ctypes.byref(p), ctypes.byref(handle)))
        self._handle = handle
        info = L.KernelInfo()
        L.lib.attnsel_kernel_info_init(ctypes.byref(info))
        L.check(L.lib.attnsel_kernel_get_info(handle, ctypes.byref(info)))
        self.kernel_info = _kernel_info(info)
        self.device_type = self.kernel_info.device
        self._cuda = self.device_type == "cuda"
        # The per-layer calls, looked up once.
        self._execute = L.lib.attnsel_kernel_execute
        self._write = L.lib.attnsel_kernel_write_kv_cache
        self._execute_append = L.lib.attnsel_kernel_execute_append

    def __del__(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle and L is not None and L.lib is not None:
            L.lib.attnsel_kernel_destroy(handle)

    def _plan_stream(self, stream, cache, cache_entry):
        if not self._cuda:
            return None
        if stream is not None:
            return _raw_stream(stream)
        if is_torch(cache) and cache_entry.device_type == L.DL_CUDA:
            return _torch_stream(cache_entry.device_id)
        return None

    def plan(self, key_cache, value_cache, query_start_loc, seq_lens, block_table, slot_mapping=None, *,
             dtype=None, stream=None, graph_capturable: bool = False, max_blocks_per_seq: int = 0,
             lse: bool = False, early_cache_reads: bool = False) -> StepPlan:
        """The step's plan for this layer's KV-cache group. key_cache/value_cache: any layer's
        cache of the group (their geometry; the data is not read). query_start_loc: [num_seqs + 1];
        seq_lens: [num_seqs]; block_table: [num_seqs, max_blocks_per_seq]; slot_mapping:
        [num_tokens] (needed by write_kv_cache). dtype: of query and output (default: the
        cache's, for caches of the model's dtype). graph_capturable: build for CUDA-graph capture
        (max_blocks_per_seq: the block-table rows the plan holds); lse: let forward write the
        log-sum-exp; early_cache_reads: forward with key=/value= may read the positions before
        the new tokens while the kernel ahead is still running (only when nothing running then
        writes them, e.g. the layers of one step)."""
        b, num_tokens, keep = _batch(query_start_loc, seq_lens, block_table, slot_mapping)
        kc = exported(key_cache, "key_cache")
        vc = exported(value_cache, "value_cache")
        o = L.PlanOptions()
        L.lib.attnsel_plan_options_init(ctypes.byref(o))
        o.graph_capturable, o.max_blocks_per_seq, o.lse = bool(graph_capturable), c_int(max_blocks_per_seq, "max_blocks_per_seq"), bool(lse)
        o.early_cache_reads = bool(early_cache_reads)
        handle = ctypes.c_void_p()
        L.check(L.lib.attnsel_kernel_plan(self._handle, ctypes.byref(b), kc.pointer, vc.pointer, _dl_dtype(dtype, kc),
                                          ctypes.byref(o), self._plan_stream(stream, key_cache, kc),
                                          ctypes.byref(handle)))
        del keep
        return StepPlan(handle, num_tokens, bool(lse), bool(graph_capturable), kc.device_type, kc.device_id,
                        is_torch(key_cache))

    def update(self, plan: StepPlan, query_start_loc, seq_lens, block_table, slot_mapping=None, *,
               stream=None) -> StepPlan:
        """Rewrites `plan` for the next step's batch in place, reusing its buffers. A
        graph-capturable plan keeps its pointers and launch shapes: the batch must have the shape
        it was built for (same sequences and query lengths). Returns the plan."""
        instance(plan, StepPlan, "plan")
        b, num_tokens, keep = _batch(query_start_loc, seq_lens, block_table, slot_mapping)
        if not self._cuda:
            raw = None
        elif stream is not None:
            raw = _raw_stream(stream)
        elif plan._torch and plan._device_type == L.DL_CUDA:
            raw = _torch_stream(plan._device_id)  # the plan was built from torch tensors
        else:
            raw = None
        L.check(L.lib.attnsel_kernel_update_plan(self._handle, plan._handle, ctypes.byref(b), raw))
        del keep
        plan.num_tokens = num_tokens
        return plan

    def _stream(self, stream, tensor, entry):
        if stream is not None:
            return _raw_stream(stream)
        if entry.device_type == L.DL_CUDA and is_torch(tensor):
            return _torch_stream(entry.device_id)
        return None

    def write_kv_cache(self, key, value, key_cache, value_cache, plan: StepPlan, stream=None) -> None:
        """Writes the step's new keys and values at the plan's slot mapping."""
        instance(plan, StepPlan, "plan")
        k = exported(key, "key")
        v = exported(value, "value")
        kc = exported(key_cache, "key_cache")
        vc = exported(value_cache, "value_cache")
        status = self._write(self._handle, plan._handle, k.pointer, v.pointer, kc.pointer, vc.pointer,
                             self._stream(stream, key, k) if self._cuda else None)
        if status:
            L.check(status)

    def forward(self, query, key_cache, value_cache, plan: StepPlan, output=None, stream=None, lse=None, *,
                key=None, value=None):
        """Attention of the step's queries against the cache; writes and returns `output`
        (allocated like `query` when not given). `lse`: a float32 [num_tokens, num_heads] tensor
        that receives each row's log-sum-exp (the plan must be built with lse=True). `key` and
        `value` ([num_tokens, num_kv_heads, head_size], both or neither): the step's new keys and
        values, written to the plan's slot mapping and attended over in the same call, as
        write_kv_cache then forward (one launch for decode batches on CUDA)."""
        instance(plan, StepPlan, "plan")
        if (key is None) != (value is None):
            raise ValueError("forward: give both key and value (the step's new keys and values), or neither")
        if output is None:
            output = _empty_like(query)
        q = exported(query, "query")
        kc = exported(key_cache, "key_cache")
        vc = exported(value_cache, "value_cache")
        o = exported(output, "output")
        lse_entry = exported(lse, "lse") if lse is not None else None
        lse_pointer = lse_entry.pointer if lse_entry is not None else None
        raw = self._stream(stream, query, q) if self._cuda else None
        if key is None:
            status = self._execute(self._handle, plan._handle, q.pointer, kc.pointer, vc.pointer, o.pointer,
                                   lse_pointer, raw)
        else:
            k = exported(key, "key")
            v = exported(value, "value")
            status = self._execute_append(self._handle, plan._handle, q.pointer, k.pointer, v.pointer, kc.pointer,
                                          vc.pointer, o.pointer, lse_pointer, raw)
        if status:
            L.check(status)
        return output


def _empty_like(tensor):
    if is_torch(tensor):
        import torch
        return torch.empty_like(tensor, memory_format=torch.contiguous_format)
    if hasattr(tensor, "__array_interface__"):
        import numpy
        return numpy.empty_like(tensor, order="C")
    raise TypeError(f"output is required for a {type(tensor).__name__} query")

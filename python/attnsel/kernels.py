"""attnsel's attention kernels on any tensor that speaks DLPack (numpy arrays, PyTorch tensors on
the CPU or CUDA), without copies.

    attn = attnsel.PagedAttention(num_heads=32, head_size=128, num_kv_heads=8)   # CPU_ATTN
    step = attn.plan(query_start_loc, seq_lens, block_table, slot_mapping)       # once per step
    for layer in layers:                                                          # every layer
        attn.write_kv_cache(key, value, key_cache, value_cache, step)
        attn.forward(query, key_cache, value_cache, step, output)

Shapes: query/output [num_tokens, num_heads, head_size]; key/value [num_tokens, num_kv_heads,
head_size]; caches [num_blocks, block_size, num_kv_heads, head_size] (strides give the layout).
The batch arrays may be lists, numpy arrays or tensors (copied into the plan). On CUDA the
kernels run on PyTorch's current stream (or the `stream` given: a cudaStream_t as an int)."""
import ctypes
import math
from typing import Optional, Sequence

from . import _library as L

_PyCapsule_GetPointer = ctypes.pythonapi.PyCapsule_GetPointer
_PyCapsule_GetPointer.restype = ctypes.c_void_p
_PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_DLTENSOR = b"dltensor"


def _dlpack(tensor, name):
    """(capsule, DLTensor pointer): the capsule owns the tensor's export and must outlive the call."""
    export = getattr(tensor, "__dlpack__", None)
    if export is None:
        raise TypeError(f"{name} must be a tensor that supports DLPack (__dlpack__), e.g. a numpy array or a "
                        f"torch.Tensor; got {type(tensor).__name__}")
    try:
        capsule = export()
    except (BufferError, RuntimeError, TypeError) as e:
        raise ValueError(f"{name} cannot be shared through DLPack: {e}") from e
    # A DLManagedTensor starts with its DLTensor, so the capsule's pointer is the tensor's.
    return capsule, _PyCapsule_GetPointer(capsule, _DLTENSOR)


def _is_torch(tensor):
    return type(tensor).__module__.startswith("torch")


def _host_array(values, ctype, name):
    """A C array of `ctype` over `values` (list, numpy array or tensor), and what keeps it alive."""
    if values is None:
        return None, None
    if _is_torch(values):
        import torch
        dtype = torch.int32 if ctype is ctypes.c_int32 else torch.int64
        host = values.detach().to(device="cpu", dtype=dtype).contiguous()
        return ctypes.cast(host.data_ptr(), ctypes.POINTER(ctype)), host
    if hasattr(values, "__array_interface__"):
        import numpy
        host = numpy.ascontiguousarray(values, dtype=numpy.int32 if ctype is ctypes.c_int32 else numpy.int64)
        return host.ctypes.data_as(ctypes.POINTER(ctype)), host
    try:
        flat = [int(v) for row in values for v in (row if isinstance(row, (list, tuple)) else [row])]
    except TypeError as e:
        raise TypeError(f"{name} must be a sequence of integers, a numpy array or a tensor") from e
    array = (ctype * len(flat))(*flat)
    return ctypes.cast(array, ctypes.POINTER(ctype)), array


def _shape(values):
    shape = getattr(values, "shape", None)
    if shape is not None:
        return tuple(int(s) for s in shape)
    if values and isinstance(values[0], (list, tuple)):
        return (len(values), len(values[0]))
    return (len(values),)


def _floats(values, name):
    if values is None:
        return None, 0, None
    flat = [float(v) for v in (values.tolist() if hasattr(values, "tolist") else values)]
    array = (ctypes.c_float * len(flat))(*flat)
    return ctypes.cast(array, ctypes.POINTER(ctypes.c_float)), len(flat), array


class StepPlan:
    """One step's batch, checked and copied: every layer of the step executes against it."""

    def __init__(self, handle, num_tokens):
        self._handle = handle
        self.num_tokens = num_tokens

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
        self.num_heads = int(num_heads)
        self.num_kv_heads = int(num_kv_heads if num_kv_heads is not None else num_heads)
        self.head_size = int(head_size)
        p = L.LayerParams()
        L.lib.attnsel_layer_params_init(ctypes.byref(p))
        p.num_heads, p.num_kv_heads, p.head_size = self.num_heads, self.num_kv_heads, self.head_size
        p.scale = float(scale) if scale is not None else 1.0 / math.sqrt(self.head_size) if self.head_size > 0 else 0.0
        p.sliding_window = int(sliding_window or 0)
        p.logits_soft_cap = float(logits_soft_cap)
        keep = []
        for field, values in (("alibi_slopes", alibi_slopes), ("sinks", sinks), ("k_scales", k_scales),
                              ("v_scales", v_scales)):
            pointer, count, array = _floats(values, field)
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
        self.device_type = "cuda" if L.lib.attnsel_kernel_device_type(handle) == L.DL_CUDA else "cpu"

    def __del__(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle and L is not None and L.lib is not None:
            L.lib.attnsel_kernel_destroy(handle)

    def plan(self, query_start_loc, seq_lens, block_table, slot_mapping=None) -> StepPlan:
        """The step's plan. query_start_loc: [num_seqs + 1]; seq_lens: [num_seqs]; block_table:
        [num_seqs, max_blocks_per_seq]; slot_mapping: [num_tokens] (needed by write_kv_cache)."""
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
        num_tokens = int(keep_qsl[num_seqs]) if num_seqs >= 0 else 0
        if slot_mapping is not None and _shape(slot_mapping)[0] < num_tokens:
            raise ValueError(f"slot_mapping has {_shape(slot_mapping)[0]} entries; the step has {num_tokens} tokens")
        b.num_seqs = num_seqs
        b.query_start_loc, b.seq_lens, b.block_table, b.slot_mapping = qsl, lens, table, slots
        b.max_blocks_per_seq = table_shape[1]
        handle = ctypes.c_void_p()
        L.check(L.lib.attnsel_kernel_plan(self._handle, ctypes.byref(b), ctypes.byref(handle)))
        return StepPlan(handle, num_tokens)

    def _stream(self, stream, tensor):
        if self.device_type != "cuda":
            return None
        if stream is not None:
            return stream if isinstance(stream, int) else getattr(stream, "cuda_stream", stream)
        if _is_torch(tensor) and tensor.is_cuda:
            import torch
            return torch.cuda.current_stream(tensor.device).cuda_stream
        return None

    def write_kv_cache(self, key, value, key_cache, value_cache, plan: StepPlan, stream=None) -> None:
        """Writes the step's new keys and values at the plan's slot mapping."""
        k, kp = _dlpack(key, "key")
        v, vp = _dlpack(value, "value")
        kc, kcp = _dlpack(key_cache, "key_cache")
        vc, vcp = _dlpack(value_cache, "value_cache")
        L.check(L.lib.attnsel_kernel_write_kv_cache(self._handle, plan._handle, kp, vp, kcp, vcp,
                                                    self._stream(stream, key)))

    def forward(self, query, key_cache, value_cache, plan: StepPlan, output=None, stream=None):
        """Attention of the step's queries against the cache; writes and returns `output`
        (allocated like `query` when not given)."""
        if output is None:
            output = _empty_like(query)
        q, qp = _dlpack(query, "query")
        kc, kcp = _dlpack(key_cache, "key_cache")
        vc, vcp = _dlpack(value_cache, "value_cache")
        o, op = _dlpack(output, "output")
        L.check(L.lib.attnsel_kernel_execute(self._handle, plan._handle, qp, kcp, vcp, op,
                                             self._stream(stream, query)))
        return output


def _empty_like(tensor):
    if _is_torch(tensor):
        import torch
        return torch.empty_like(tensor, memory_format=torch.contiguous_format)
    if hasattr(tensor, "__array_interface__"):
        import numpy
        return numpy.empty_like(tensor, order="C")
    raise TypeError(f"output is required for a {type(tensor).__name__} query")

"""attnsel's MLA kernels (multi-head latent attention: DeepSeek-V2/V3, Kimi-K2) on any tensor that
speaks DLPack, in the shape of vLLM's MLA layer (MLACommonImpl, vllm/model_executor/layers/attention/
mla_attention.py) and an engine's step:

    mla = attnsel.MLAAttention(num_heads=16, scale=0.1147, kv_b_proj=w)   # CPU_MLA, DeepSeek's widths
    step = mla.plan(kv_caches[0], query_start_loc, seq_lens, block_table, slot_mapping)  # once a step
    for l, layer in enumerate(layers):                                                  # every layer
        layer.concat_and_cache_mla(k_c_normed, k_pe, kv_caches[l], step)
        layer.forward(q, k_c_normed, k_pe, kv_caches[l], step, output)
    mla.update(step, query_start_loc, seq_lens, block_table, slot_mapping)            # the next step

A batch puts its decode requests (at most `decode_query_len` query tokens each) first, as vLLM
reorders it: they take the absorbed decode (q_nope · W_UK over the latent cache, then · W_UV);
the first request with more query tokens, and every one after it, take the prefill path.

Shapes (N heads, latent Dl = kv_lora_rank, rope Dr, nope Dn, value Dv):
    q            [num_tokens, N, Dn + Dr]   ([q_nope | q_pe], rope last)
    k_c_normed   [num_tokens, Dl]           the new tokens' latent (kv_a_layernorm's output)
    k_pe         [num_tokens, Dr]           their rotated rope key (vLLM squeezes its head axis)
    kv_cache     [num_blocks, block_size, Dl + Dr]
    output       [num_tokens, N, Dv]
    kv_b_proj    [N · (Dn + Dv), Dl]        kv_b_proj.weight on this rank (or the layer holding it)
decode_latent (FlashMLA's flash_mla_with_kvcache): q_latent [decode tokens, N, Dl + Dr] → out
[decode tokens, N, Dl], lse [decode tokens, N] float32. The batch arrays may be lists, numpy arrays
or tensors (copied into the plan)."""
import ctypes
import dataclasses
import math
from typing import Optional

from . import _library as L
from ._convert import c_float, c_int, instance
from ._dlpack import exported, is_torch
from .kernels import StepPlan, _batch, _dtype_name, _kernel_info, _raw_stream, _torch_stream


@dataclasses.dataclass(frozen=True)
class MLAStepSummary:
    """What an MLA plan's batch holds."""
    num_decodes: int          # decode requests (the head of the batch)
    num_decode_tokens: int    # their query tokens: decode_latent's rows
    num_prefills: int
    num_prefill_tokens: int
    context_chunks: int       # chunks the prefills' cached context is read in


class MLAStepPlan(StepPlan):
    """One step's plan for the MLA layers that share a cache geometry."""

    @property
    def summary(self) -> MLAStepSummary:
        s = L.MlaStepSummary()
        L.lib.attnsel_mla_step_summary_init(ctypes.byref(s))
        L.check(L.lib.attnsel_mla_step_plan_summary(self._handle, ctypes.byref(s)))
        return MLAStepSummary(s.num_decodes, s.num_decode_tokens, s.num_prefills, s.num_prefill_tokens,
                              s.context_chunks)


def _backend_name(backend):
    """A member's name from a name, an AttentionBackendEnum member or a Selection."""
    name = getattr(backend, "name", None) or getattr(backend, "backend", None) or backend
    if not isinstance(name, str):
        raise TypeError(f"backend must be a backend name, an AttentionBackendEnum member or a Selection, got "
                        f"{type(backend).__name__}")
    return name


def _empty(shape, like):
    """A new tensor of `shape` with the dtype and device of `like`."""
    if is_torch(like):
        import torch
        return torch.empty(shape, dtype=like.dtype, device=like.device)
    if hasattr(like, "__array_interface__"):
        import numpy
        return numpy.empty(shape, dtype=like.dtype)
    raise TypeError(f"give the output tensor: a {type(like).__name__} input has no allocator here")


class MLAAttention:
    """One MLA layer's kernel (vLLM's MLACommonImpl) over a paged latent cache.

    `backend`: an enum member, its name or a Selection (attnsel.select(..., use_mla=True));
    by default CPU_MLA. `scale`: the softmax scale with yarn's mscale², finite and > 0 (None:
    (qk_nope_head_dim + qk_rope_head_dim)^-0.5). `kv_b_proj`: the layer's kv_b_proj.weight for
    this rank's heads (or a module holding it as `.weight`), read once when the kernel is made;
    None for a layer that runs decode_latent only. `dtype`: the activations' (default: kv_b_proj's,
    else bfloat16). `kv_cache_dtype`: "auto", "bfloat16", "float16", "fp8" or "fp8_e4m3", whose
    `k_scale` (finite, > 0) stores e4m3(x / k_scale)."""

    def __init__(self, num_heads: int, scale: Optional[float] = None, *, kv_lora_rank: int = 512,
                 qk_nope_head_dim: int = 128, qk_rope_head_dim: int = 64, v_head_dim: int = 128, kv_b_proj=None,
                 backend="CPU_MLA", dtype=None, kv_cache_dtype: str = "auto", k_scale: float = 1.0,
                 batch_invariant: bool = False):
        self._handle = None
        self.backend = _backend_name(backend)
        self.num_heads = c_int(num_heads, "num_heads")
        self.kv_lora_rank = c_int(kv_lora_rank, "kv_lora_rank")
        self.qk_nope_head_dim = c_int(qk_nope_head_dim, "qk_nope_head_dim")
        self.qk_rope_head_dim = c_int(qk_rope_head_dim, "qk_rope_head_dim")
        self.v_head_dim = c_int(v_head_dim, "v_head_dim")
        qk = self.qk_nope_head_dim + self.qk_rope_head_dim
        self.scale = c_float(scale, "scale") if scale is not None else 1.0 / math.sqrt(qk) if qk > 0 else 0.0
        if scale is not None and self.scale == 0.0:  # the C API reads 0 as "the default"
            raise ValueError("scale = 0; the softmax scale must be a positive finite number (None: "
                             "(qk_nope_head_dim + qk_rope_head_dim)^-0.5)")
        p = L.MlaLayerParams()
        L.lib.attnsel_mla_layer_params_init(ctypes.byref(p))
        p.num_heads, p.kv_lora_rank, p.v_head_dim = self.num_heads, self.kv_lora_rank, self.v_head_dim
        p.qk_nope_head_dim, p.qk_rope_head_dim = self.qk_nope_head_dim, self.qk_rope_head_dim
        p.scale = self.scale
        dtype_text = L.encode(_dtype_name(dtype), "dtype")
        cache_text = L.encode(kv_cache_dtype, "kv_cache_dtype")
        p.dtype, p.kv_cache_dtype = dtype_text, cache_text
        p.k_scale = c_float(k_scale, "k_scale")
        p.batch_invariant = 1 if batch_invariant else 0
        weights = None
        if kv_b_proj is not None:
            weight = getattr(kv_b_proj, "weight", kv_b_proj)
            if is_torch(weight):
                weight = weight.detach()
            weights = exported(weight, "kv_b_proj")
            p.kv_b_proj = weights.pointer
        handle = ctypes.c_void_p()
        L.check(L.lib.attnsel_mla_kernel_create(L.encode(self.backend, "backend"), ctypes.byref(p),
                                                ctypes.byref(handle)))
        del weights  # read by the kernel when it was made, not kept
        self._handle = handle
        info = L.KernelInfo()
        L.lib.attnsel_kernel_info_init(ctypes.byref(info))
        L.check(L.lib.attnsel_mla_kernel_get_info(handle, ctypes.byref(info)))
        self.kernel_info = _kernel_info(info)
        self.device_type = self.kernel_info.device
        self._cuda = self.device_type == "cuda"
        query_len, heads = ctypes.c_int32(), ctypes.c_int32()
        L.check(L.lib.attnsel_mla_kernel_limits(handle, ctypes.byref(query_len), ctypes.byref(heads)))
        self.max_decode_query_len, self.max_heads = query_len.value, heads.value

    def __del__(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle and L is not None and L.lib is not None:
            L.lib.attnsel_mla_kernel_destroy(handle)

    def _stream(self, stream, tensor, entry):
        if not self._cuda:
            return None
        if stream is not None:
            return _raw_stream(stream)
        if entry.device_type == L.DL_CUDA and is_torch(tensor):
            return _torch_stream(entry.device_id)
        return None

    def plan(self, kv_cache, query_start_loc, seq_lens, block_table, slot_mapping=None, *,
             decode_query_len: int = 1, lse: bool = False, context_chunk_tokens: int = 0,
             graph_capturable: bool = False, max_blocks_per_seq: int = 0, stream=None) -> MLAStepPlan:
        """The step's plan for this layer's group. kv_cache: any layer's cache of the group (its
        geometry; the data is not read). query_start_loc [num_seqs + 1], seq_lens [num_seqs]
        (cached tokens, this step's included), block_table [num_seqs, max_blocks_per_seq],
        slot_mapping [num_tokens] (needed by concat_and_cache_mla; -1 skips a token).
        decode_query_len: vLLM's reorder_batch_threshold; lse: let decode_latent write the
        log-sum-exp; context_chunk_tokens: cached-context rows per prefill chunk (0 = the kernel's)."""
        b, num_tokens, keep = _batch(query_start_loc, seq_lens, block_table, slot_mapping)
        cache = exported(kv_cache, "kv_cache")
        o = L.MlaPlanOptions()
        L.lib.attnsel_mla_plan_options_init(ctypes.byref(o))
        o.graph_capturable, o.lse = bool(graph_capturable), bool(lse)
        o.max_blocks_per_seq = c_int(max_blocks_per_seq, "max_blocks_per_seq")
        o.decode_query_len = c_int(decode_query_len, "decode_query_len")
        o.context_chunk_tokens = c_int(context_chunk_tokens, "context_chunk_tokens", ctypes.c_int64)
        handle = ctypes.c_void_p()
        L.check(L.lib.attnsel_mla_kernel_plan(self._handle, ctypes.byref(b), cache.pointer, ctypes.byref(o),
                                              self._stream(stream, kv_cache, cache), ctypes.byref(handle)))
        del keep
        return MLAStepPlan(handle, num_tokens, bool(lse), bool(graph_capturable), cache.device_type,
                           cache.device_id, is_torch(kv_cache))

    def update(self, plan: MLAStepPlan, query_start_loc, seq_lens, block_table, slot_mapping=None, *,
               stream=None) -> MLAStepPlan:
        """Rewrites `plan` for the next step's batch in place (an error leaves it as it was)."""
        instance(plan, MLAStepPlan, "plan")
        b, num_tokens, keep = _batch(query_start_loc, seq_lens, block_table, slot_mapping)
        raw = None
        if self._cuda:
            raw = _raw_stream(stream) if stream is not None else (
                _torch_stream(plan._device_id) if plan._torch and plan._device_type == L.DL_CUDA else None)
        L.check(L.lib.attnsel_mla_kernel_update_plan(self._handle, plan._handle, ctypes.byref(b), raw))
        del keep
        plan.num_tokens = num_tokens
        return plan

    def concat_and_cache_mla(self, kv_c, k_pe, kv_cache, plan: MLAStepPlan, stream=None) -> None:
        """vLLM's concat_and_cache_mla at the plan's slot mapping: token t's latent then its rope
        key into its slot (fp8 caches: e4m3(x / k_scale)); slot -1 is skipped, a slot outside the
        cache was refused by plan()."""
        instance(plan, MLAStepPlan, "plan")
        c = exported(kv_c, "kv_c")
        pe = exported(k_pe, "k_pe")
        cache = exported(kv_cache, "kv_cache")
        L.check(L.lib.attnsel_mla_kernel_write_cache(self._handle, plan._handle, c.pointer, pe.pointer, cache.pointer,
                                                     self._stream(stream, kv_c, c)))

    def forward(self, q, k_c_normed, k_pe, kv_cache, plan: MLAStepPlan, output=None, stream=None):
        """MLACommonImpl.forward without the cache write (call concat_and_cache_mla first): the
        decode requests through the absorbed decode, the prefills through the 192/128 path with
        their cached context. Writes and returns `output` (allocated when not given)."""
        instance(plan, MLAStepPlan, "plan")
        if output is None:
            output = _empty((int(q.shape[0]), self.num_heads, self.v_head_dim), q)
        qe = exported(q, "q")
        c = exported(k_c_normed, "k_c_normed")
        pe = exported(k_pe, "k_pe")
        cache = exported(kv_cache, "kv_cache")
        out = exported(output, "output")
        L.check(L.lib.attnsel_mla_kernel_execute(self._handle, plan._handle, qe.pointer, c.pointer, pe.pointer,
                                                 cache.pointer, out.pointer, self._stream(stream, q, qe)))
        return output

    def decode_latent(self, q_latent, kv_cache, plan: MLAStepPlan, out=None, lse=None, stream=None):
        """The absorbed decode kernel alone over the plan's decode requests (FlashMLA's
        flash_mla_with_kvcache): q_latent has W_UK applied. Writes and returns `out`; `lse`
        (float32 [decode tokens, N]) receives each row's natural-log LSE (plan built with lse=True)."""
        instance(plan, MLAStepPlan, "plan")
        if out is None:
            out = _empty((int(q_latent.shape[0]), self.num_heads, self.kv_lora_rank), q_latent)
        ql = exported(q_latent, "q_latent")
        cache = exported(kv_cache, "kv_cache")
        o = exported(out, "out")
        lse_entry = exported(lse, "lse") if lse is not None else None
        L.check(L.lib.attnsel_mla_kernel_decode_latent(self._handle, plan._handle, ql.pointer, cache.pointer,
                                                       o.pointer, lse_entry.pointer if lse_entry else None,
                                                       self._stream(stream, q_latent, ql)))
        return out

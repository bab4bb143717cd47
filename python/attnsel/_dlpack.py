"""Tensors as DLPack DLTensors for the C API, exported once per tensor.

An engine passes the same KV caches (and usually the same query and output buffers) to every
call of every step; exporting them through __dlpack__ each time costs microseconds per tensor
(PyTorch builds a capsule, a DLManagedTensor and a reference to the storage). So the first
export's DLTensor is copied into a struct of our own and kept, keyed by the tensor object's
identity, together with a weak reference to the tensor and a signature that a later call
compares: the data pointer, shape and strides for PyTorch; shape, strides and dtype for other
arrays (numpy arrays cannot move their data while their shape is unchanged). The kept struct
holds no reference to the tensor: it is valid while the tensor lives, and the tensor is alive
while the caller passes it. An entry is dropped when its tensor is freed."""
import ctypes
import weakref

from . import _library as L

_PyCapsule_GetPointer = ctypes.pythonapi.PyCapsule_GetPointer
_PyCapsule_GetPointer.restype = ctypes.c_void_p
_PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_DLTENSOR = b"dltensor"
_DLTensorPointer = ctypes.POINTER(L.DLTensor)


def _torch_signature(t):
    return t.data_ptr(), t.shape, t.stride()


def _array_signature(a):
    return a.shape, a.strides, a.dtype


def is_torch(tensor):
    return type(tensor).__module__.startswith("torch")


class Exported:
    """A tensor's DLTensor: `pointer` (a c_void_p for the C call), `tensor` (the struct), its
    device, and the signature it was exported with."""
    __slots__ = ("pointer", "tensor", "device_type", "device_id", "sign", "signature", "ref", "_shape", "_strides")

    def __init__(self, source, sign, signature):
        ndim = source.ndim
        self._shape = (ctypes.c_int64 * max(ndim, 1))(*source.shape[:ndim])
        if source.strides:
            self._strides = (ctypes.c_int64 * max(ndim, 1))(*source.strides[:ndim])
        else:
            self._strides = None
        t = L.DLTensor()
        t.data, t.device, t.ndim, t.dtype = source.data, source.device, ndim, source.dtype
        t.shape = ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64))
        t.strides = ctypes.cast(self._strides, ctypes.POINTER(ctypes.c_int64)) if self._strides is not None else None
        t.byte_offset = source.byte_offset
        self.tensor = t
        self.pointer = ctypes.c_void_p(ctypes.addressof(t))
        self.device_type = source.device.device_type
        self.device_id = source.device.device_id
        self.sign = sign
        self.signature = signature
        self.ref = None


# id(tensor) -> Exported, for tensors that are alive.
_cache = {}


def _forget(key):
    return lambda _ref: _cache.pop(key, None)


def _export(tensor, name):
    export = getattr(tensor, "__dlpack__", None)
    if export is None:
        raise TypeError(f"{name} must be a tensor that supports DLPack (__dlpack__), e.g. a numpy array or a "
                        f"torch.Tensor; got {type(tensor).__name__}")
    try:
        capsule = export()
    except (BufferError, RuntimeError, TypeError) as e:
        raise ValueError(f"{name} cannot be shared through DLPack: {e}") from e
    # A DLManagedTensor starts with its DLTensor, so the capsule's pointer is the tensor's. The
    # caller copies it while it holds the capsule (and so the export) alive.
    return capsule, ctypes.cast(_PyCapsule_GetPointer(capsule, _DLTENSOR), _DLTensorPointer).contents


def _signer(tensor):
    """How to read a tensor's signature: PyTorch's or an array's; None for other objects."""
    if is_torch(tensor):
        return _torch_signature
    if hasattr(tensor, "shape") and hasattr(tensor, "strides") and hasattr(tensor, "dtype"):
        return _array_signature
    return None


def exported(tensor, name):
    """The tensor's DLTensor, from the cache when the tensor is unchanged since its export."""
    entry = _cache.get(id(tensor))
    # An entry is dropped when its tensor dies, so an id found here is the same live object;
    # the identity check costs little and keeps that true whatever the interpreter does.
    if entry is not None and entry.signature == entry.sign(tensor) and entry.ref() is tensor:
        return entry
    capsule, source = _export(tensor, name)
    sign = _signer(tensor)
    entry = Exported(source, sign, sign(tensor) if sign is not None else None)
    if sign is None:  # another framework's tensor: exported on every call, alive for this call's entry
        entry.ref = capsule
        return entry
    del source, capsule  # numpy and torch export without copying: the tensor holds the memory
    try:
        entry.ref = weakref.ref(tensor, _forget(id(tensor)))
    except TypeError:  # no weak references: exported on every call
        return entry
    _cache[id(tensor)] = entry
    return entry

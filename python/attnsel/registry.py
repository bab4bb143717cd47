"""vLLM's backend registry: AttentionBackendEnum, MambaAttentionBackendEnum and
register_backend, over libattnsel's registry (members added at run time included)."""
import ctypes
import importlib
from typing import Optional

from . import _library as L
from ._request import _request


class BackendClass:
    """A backend class of libattnsel (built in, or from a plugin), as get_class() returns it."""

    def __init__(self, info):
        self._info = info

    def get_name(self) -> str:
        return self._info["name"]

    def full_cls_name(self) -> str:
        return self._info["class"]

    @property
    def qualname(self) -> str:
        return self._info["class"]

    def is_mla(self) -> bool:
        return bool(self._info.get("is_mla", False))

    def is_sparse(self) -> bool:
        return bool(self._info.get("is_sparse", False))

    def is_ssm(self) -> bool:
        return bool(self._info.get("is_ssm", False))

    def has_kernel(self) -> bool:
        """Whether this build can run the backend's kernel here."""
        return bool(self._info.get("has_kernel", False))

    def validate_configuration(self, head_size, dtype, kv_cache_dtype=None, block_size=None, use_mla=False,
                               has_sink=False, use_sparse=False, use_mm_prefix=False,
                               use_per_head_quant_scales=False, device_capability=None, attn_type="decoder",
                               platform=None, **switches):
        """vLLM's validate_configuration: every reason this class rejects the configuration ([] =
        valid), on `platform` (default: "cuda:MAJOR.MINOR" from device_capability, else the
        current platform). `switches` are the selector's engine fields (use_dcp, use_non_causal, ...)."""
        if platform is None and device_capability is not None:
            major, minor = tuple(device_capability)[:2]
            platform = f"cuda:{major}.{minor}"
        request, keep = _request(platform=platform, head_size=head_size, dtype=dtype,
                                 kv_cache_dtype=kv_cache_dtype, block_size=block_size, use_mla=use_mla,
                                 has_sink=has_sink, use_sparse=use_sparse, use_mm_prefix=use_mm_prefix,
                                 use_per_head_quant_scales=use_per_head_quant_scales, attn_type=attn_type,
                                 **switches)
        return L.call_json(L.lib.attnsel_check_backend, ctypes.byref(request), L.encode(self._member_name()))

    def _member_name(self):
        return self._info.get("member", self.get_name())

    def __repr__(self):
        return f"<backend class {self.full_cls_name()}>"

    def __eq__(self, other):
        return isinstance(other, BackendClass) and other.full_cls_name() == self.full_cls_name()

    def __hash__(self):
        return hash(self.full_cls_name())


def _resolve_python_path(path):
    """vLLM's resolve_obj_by_qualname for a Python path "package.module.Class"."""
    module_name, _, attr = path.rpartition(".")
    if not module_name:
        return None
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None
    return getattr(module, attr, None)


class BackendMember:
    """One enum member (vLLM's AttentionBackendEnum.X). One object per name: `is` works."""

    def __init__(self, enum_cls, name, value):
        self._enum = enum_cls
        self.name = name
        self.value = value

    def get_path(self, include_classname: bool = True) -> str:
        out = ctypes.c_void_p()
        L.check(L.lib.attnsel_member_get_path(self._enum._kind, L.encode(self.name), int(include_classname),
                                              ctypes.byref(out)))
        return L.take_string(out)

    def get_class(self):
        """The class behind get_path(): libattnsel's class (a BackendClass), or a Python class when
        the path names one ("package.module.Class", as vLLM imports it)."""
        try:
            info = L.call_json(L.lib.attnsel_member_get_class, self._enum._kind, L.encode(self.name))
        except ImportError:
            python_class = _resolve_python_path(self.get_path())
            if python_class is None:
                raise
            return python_class
        info["member"] = self.name
        return BackendClass(info)

    def is_overridden(self) -> bool:
        out = ctypes.c_int()
        L.check(L.lib.attnsel_member_is_overridden(self._enum._kind, L.encode(self.name), ctypes.byref(out)))
        return bool(out.value)

    def clear_override(self) -> None:
        L.check(L.lib.attnsel_member_clear_override(self._enum._kind, L.encode(self.name)))

    def __repr__(self):
        return f"<{self._enum.__name__}.{self.name}: {self.value!r}>"

    def __str__(self):
        return f"{self._enum.__name__}.{self.name}"

    def __reduce__(self):
        return (_member_by_name, (self._enum._kind, self.name))


def _member_by_name(kind, name):
    return (AttentionBackendEnum if kind == L.ENUM_ATTENTION else MambaAttentionBackendEnum)[name]


class _BackendEnumMeta(type):
    """Enum-like access to one of libattnsel's registries: Enum["NAME"], Enum.NAME, iteration,
    len() and `in`, with members registered at run time."""

    def _members(cls):
        listing = L.call_json(L.lib.attnsel_enum_members, cls._kind)
        cache = cls.__dict__["_cache"]
        out = []
        for m in listing:
            member = cache.get(m["name"])
            if member is None:
                member = cache[m["name"]] = BackendMember(cls, m["name"], m["value"])
            out.append(member)
        return out

    def __getitem__(cls, name):
        # vLLM's message for an unknown name: "Unknown attention backend: 'X'. Valid options are: ..."
        L.check(L.lib.attnsel_member_check(cls._kind, L.encode(name)))
        member = cls.__dict__["_cache"].get(name)
        if member is None:
            cls._members()
            member = cls.__dict__["_cache"][name]
        return member

    def __getattr__(cls, name):
        if name.startswith("_"):
            raise AttributeError(name)
        if L.lib.attnsel_member_check(cls._kind, L.encode(name)) != 0:
            raise AttributeError(f"{cls.__name__} has no member {name}")
        return cls[name]

    def __iter__(cls):
        return iter(cls._members())

    def __len__(cls):
        return len(cls._members())

    def __contains__(cls, item):
        return isinstance(item, BackendMember) and item._enum is cls and item.name in cls.__dict__["_cache"]

    def __repr__(cls):
        return f"<enum {cls.__name__}>"

    def register(cls, name: str, value: str) -> BackendMember:
        """vLLM's register classmethod: a new member `name` whose value is the class path
        `value`. ValueError "Backend X already exists in ... Use register_backend(...) to
        override." when the name exists, "Invalid or reserved backend name: X" for a name vLLM
        refuses."""
        L.check(L.lib.attnsel_register_member(cls._kind, L.encode(name), L.encode(value)))
        return cls[name]


class AttentionBackendEnum(metaclass=_BackendEnumMeta):
    """vLLM's AttentionBackendEnum."""
    _kind = L.ENUM_ATTENTION
    _cache = {}


class MambaAttentionBackendEnum(metaclass=_BackendEnumMeta):
    """vLLM's MambaAttentionBackendEnum."""
    _kind = L.ENUM_MAMBA
    _cache = {}


def register_backend(backend, class_path: Optional[str] = None, is_mamba: bool = False):
    """vLLM's register_backend, in its forms:

        register_backend(AttentionBackendEnum.CUSTOM, "libfoo.so:symbol")   # override a member
        register_backend("MY_BACKEND", "libfoo.so:symbol")                  # a new member
        @register_backend(AttentionBackendEnum.CUSTOM)                      # a Python class
        class MyBackend: ...

    A string names a new member of AttentionBackendEnum (MambaAttentionBackendEnum with
    is_mamba=True), created at once through Enum.register: a name that exists raises vLLM's
    "already exists" ValueError. With a class path the override is set at once and an identity
    decorator is returned; without one, the decorator sets it to the class it decorates. A path
    is a libattnsel class name, a plugin's "library:symbol", or a Python class's
    "package.module.Class" (then get_class() imports it, as vLLM does)."""
    if isinstance(backend, str):
        enum = MambaAttentionBackendEnum if is_mamba else AttentionBackendEnum
        backend = enum.register(backend, class_path or "")
    kind, name = backend._enum._kind, backend.name

    def override(path):
        L.check(L.lib.attnsel_register_backend(kind, L.encode(name), L.encode(path)))

    if class_path is not None:
        override(class_path)
        return lambda x: x

    def decorator(cls):
        override(f"{cls.__module__}.{cls.__qualname__}")
        return cls
    return decorator


def load_plugin(spec: str) -> dict:
    """Loads a plugin ("path", "path:symbol" or a bare file name from the plugin directory) and
    registers its backends; returns what it declares."""
    return L.call_json(L.lib.attnsel_load_plugin, L.encode(spec))


def loaded_plugins() -> list:
    return L.call_json(L.lib.attnsel_loaded_plugins)

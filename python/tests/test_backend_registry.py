"""vLLM's tests/v1/attention/test_backend_registry.py, ported."""
import pytest

from attnsel import AttentionBackendEnum, MambaAttentionBackendEnum, register_backend


class CustomAttentionImpl:
    pass


class CustomAttentionBackend:
    @staticmethod
    def get_name():
        return "CUSTOM"

    @staticmethod
    def get_impl_cls():
        return CustomAttentionImpl


class CustomMambaAttentionImpl:
    pass


class CustomMambaAttentionBackend:
    @staticmethod
    def get_name():
        return "CUSTOM_MAMBA"

    @staticmethod
    def get_impl_cls():
        return CustomMambaAttentionImpl


@pytest.mark.parametrize("enum", [AttentionBackendEnum, MambaAttentionBackendEnum])
def test_custom_is_not_alias_of_any_backend(enum):
    aliases = [b.name for b in list(enum) if b.name != "CUSTOM" and b is enum.CUSTOM]
    assert aliases == []
    assert enum.CUSTOM.name == "CUSTOM"
    assert enum.CUSTOM.value is None


def test_register_custom_backend_with_class_path():
    expected_class_path = f"{__name__}.CustomAttentionBackend"
    register_backend(backend=AttentionBackendEnum.CUSTOM, class_path=expected_class_path, is_mamba=False)
    assert AttentionBackendEnum.CUSTOM.is_overridden()
    assert AttentionBackendEnum.CUSTOM.get_path() == expected_class_path
    backend_cls = AttentionBackendEnum.CUSTOM.get_class()
    assert backend_cls.get_name() == "CUSTOM"
    assert backend_cls.get_impl_cls() == CustomAttentionImpl


def test_register_custom_mamba_backend_with_class_path():
    expected_class_path = f"{__name__}.CustomMambaAttentionBackend"
    register_backend(backend=MambaAttentionBackendEnum.CUSTOM, class_path=expected_class_path, is_mamba=True)
    assert MambaAttentionBackendEnum.CUSTOM.is_overridden()
    assert MambaAttentionBackendEnum.CUSTOM.get_path() == expected_class_path
    backend_cls = MambaAttentionBackendEnum.CUSTOM.get_class()
    assert backend_cls.get_name() == "CUSTOM_MAMBA"
    assert backend_cls.get_impl_cls() == CustomMambaAttentionImpl


def test_register_backend_decorator_form():
    @register_backend(AttentionBackendEnum.CUSTOM)
    class Decorated:
        @staticmethod
        def get_name():
            return "DECORATED"

    assert AttentionBackendEnum.CUSTOM.get_path().endswith("test_register_backend_decorator_form.<locals>.Decorated")
    assert AttentionBackendEnum.CUSTOM.is_overridden()


def test_register_backend_string_form_adds_a_member():
    decorator = register_backend("PY_TEST_NEW_BACKEND", "attnsel::backends::FlashAttentionBackend")
    assert decorator(CustomAttentionBackend) is CustomAttentionBackend  # vLLM's identity decorator
    member = AttentionBackendEnum["PY_TEST_NEW_BACKEND"]
    assert member in AttentionBackendEnum
    assert member.value == "attnsel::backends::FlashAttentionBackend"
    assert member.is_overridden()
    assert member.get_class().get_name() == "FLASH_ATTN"
    assert "PY_TEST_NEW_BACKEND" in [m.name for m in AttentionBackendEnum]


@pytest.mark.parametrize("enum, name, is_mamba", [(AttentionBackendEnum, "FLASH_ATTN", False),
                                                  (MambaAttentionBackendEnum, "MAMBA1", True)])
def test_a_string_naming_an_existing_member_is_refused(enum, name, is_mamba):
    message = (f"Backend {name} already exists in {enum.__name__}. "
               f"Use register_backend({enum.__name__}.{name}, 'my.module.Backend') to override.")
    with pytest.raises(ValueError) as error:
        register_backend(name, "my.module.Backend", is_mamba=is_mamba)
    assert str(error.value) == message
    assert not enum[name].is_overridden()


def test_a_string_registered_twice_is_refused():
    register_backend("PY_TEST_TWICE", "attnsel::backends::FlashAttentionBackend")
    with pytest.raises(ValueError, match=r"^Backend PY_TEST_TWICE already exists in AttentionBackendEnum\. "
                                         r"Use register_backend\(AttentionBackendEnum\.PY_TEST_TWICE, ''\) "
                                         r"to override\.$"):
        register_backend("PY_TEST_TWICE")


def test_the_decorator_form_with_a_new_name_creates_the_member_at_once():
    decorator = register_backend("PY_TEST_DECORATED_MAMBA", is_mamba=True)
    member = MambaAttentionBackendEnum["PY_TEST_DECORATED_MAMBA"]  # before anything is decorated
    assert member.value == "" and not member.is_overridden()
    with pytest.raises(ValueError, match="Backend PY_TEST_DECORATED_MAMBA must be registered before use"):
        member.get_path()
    assert decorator(CustomMambaAttentionBackend) is CustomMambaAttentionBackend
    assert member.get_path() == f"{__name__}.CustomMambaAttentionBackend"
    assert member.get_class() is CustomMambaAttentionBackend


def test_enum_register_is_the_classmethod_vllm_defines():
    member = AttentionBackendEnum.register("PY_TEST_REGISTERED", "attnsel::backends::TritonAttentionBackend")
    assert member is AttentionBackendEnum.PY_TEST_REGISTERED
    assert member.value == "attnsel::backends::TritonAttentionBackend" and not member.is_overridden()
    assert member.get_class().get_name() == "TRITON_ATTN"
    mamba = MambaAttentionBackendEnum.register("PY_TEST_REGISTERED_MAMBA", "attnsel::backends::Mamba2AttentionBackend")
    assert mamba is MambaAttentionBackendEnum["PY_TEST_REGISTERED_MAMBA"]
    with pytest.raises(ValueError, match="^Backend PY_TEST_REGISTERED already exists in AttentionBackendEnum"):
        AttentionBackendEnum.register("PY_TEST_REGISTERED", "x.Y")
    with pytest.raises(ValueError, match="^Invalid or reserved backend name: register$"):
        AttentionBackendEnum.register("register", "x.Y")
    with pytest.raises(ValueError, match="^Invalid or reserved backend name: 1BAD$"):
        register_backend("1BAD", "x.Y")


def test_a_member_with_a_class_path_returns_an_identity_decorator():
    decorator = register_backend(AttentionBackendEnum.CUSTOM, f"{__name__}.CustomAttentionBackend")
    assert decorator(CustomMambaAttentionBackend) is CustomMambaAttentionBackend
    assert AttentionBackendEnum.CUSTOM.get_path() == f"{__name__}.CustomAttentionBackend"


def test_override_then_clear_restores_the_default_class():
    register_backend(AttentionBackendEnum.FLASHINFER, "attnsel::backends::FlashAttentionBackend")
    assert AttentionBackendEnum.FLASHINFER.get_class().get_name() == "FLASH_ATTN"
    AttentionBackendEnum.FLASHINFER.clear_override()
    assert not AttentionBackendEnum.FLASHINFER.is_overridden()
    assert AttentionBackendEnum.FLASHINFER.get_class().get_name() == "FLASHINFER"


def test_enum_access_forms():
    assert AttentionBackendEnum["FLASH_ATTN"] is AttentionBackendEnum.FLASH_ATTN
    assert AttentionBackendEnum.FLASH_ATTN.get_path(include_classname=False) == "attnsel::backends"
    assert str(AttentionBackendEnum.FLASH_ATTN) == "AttentionBackendEnum.FLASH_ATTN"
    assert len(MambaAttentionBackendEnum) == len(list(MambaAttentionBackendEnum)) > 1
    with pytest.raises(AttributeError):
        AttentionBackendEnum.NOT_A_MEMBER
    with pytest.raises(ValueError, match="Backend CUSTOM must be registered before use"):
        AttentionBackendEnum.CUSTOM.get_path()
    with pytest.raises(ValueError, match="Unknown attention backend: 'flash_attn'"):
        AttentionBackendEnum["flash_attn"]  # exact, as vLLM's Enum[name]


def test_unresolvable_class_is_an_import_error():
    register_backend(AttentionBackendEnum.CUSTOM, "no_such_module_anywhere.Backend")
    with pytest.raises(ImportError):
        AttentionBackendEnum.CUSTOM.get_class()

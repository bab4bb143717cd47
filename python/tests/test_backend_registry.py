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
    member = register_backend("PY_TEST_NEW_BACKEND", "attnsel::backends::FlashAttentionBackend")
    assert member is AttentionBackendEnum["PY_TEST_NEW_BACKEND"]
    assert member in AttentionBackendEnum
    assert member.get_class().get_name() == "FLASH_ATTN"
    assert "PY_TEST_NEW_BACKEND" in [m.name for m in AttentionBackendEnum]


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

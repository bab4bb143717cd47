"""Every test starts from the built-in registry: overrides made by a test are cleared."""
import pytest

import attnsel


@pytest.fixture(autouse=True)
def clean_overrides():
    yield
    for enum in (attnsel.AttentionBackendEnum, attnsel.MambaAttentionBackendEnum):
        for member in enum:
            if member.is_overridden():
                member.clear_override()

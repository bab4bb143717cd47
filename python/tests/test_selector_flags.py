"""The selector flags come from the library's table: every flag it lists is a keyword argument
of select() that reaches the selection, a field of AttentionSelectorConfig and an option of
`python3 -m attnsel select`; an unknown one is refused with the valid names."""
import ctypes
import subprocess
import sys

import pytest

import attnsel
from attnsel import _library as L
from attnsel._request import _request


def _listed():
    return L.call_json(L.lib.attnsel_list_selector_flags)


def _config_reached(**flags):
    """The selector config of a selection on cuda:9.0 with these flags, whether it succeeds or not."""
    request, keep = _request(platform="cuda:9.0", **flags)
    report, _ = L.call_json_report(L.lib.attnsel_select_json, ctypes.byref(request))
    return report["config"]


def test_every_listed_flag_is_a_keyword_that_reaches_the_selection_alone():
    names = [f["name"] for f in _listed()["flags"]]
    assert len(names) == len(set(names)) > 0
    for name in names:
        config = _config_reached(**{name: True})
        assert [n for n in names if config[n]] == [name]
        assert not _config_reached(**{name: False})[name]


def test_the_config_has_the_listed_fields_in_the_listed_order_with_vllms_defaults():
    listed = _listed()
    assert attnsel.AttentionSelectorConfig._fields == tuple(listed["config_fields"])
    config = attnsel.AttentionSelectorConfig(head_size=64, dtype="float16", kv_cache_dtype=None, block_size=None)
    assert config.attn_type == "decoder"
    for flag in listed["flags"]:
        assert getattr(config, flag["name"]) is False
    with pytest.raises(TypeError):
        attnsel.AttentionSelectorConfig(head_size=64)  # vLLM's four leading fields have no default


def test_an_unknown_flag_is_refused_with_the_valid_ones():
    with pytest.raises(TypeError) as error:
        attnsel.select("cuda:9.0", use_everything=True)
    assert "use_everything" in str(error.value)
    for flag in _listed()["flags"]:
        assert flag["name"] in str(error.value)


def test_the_module_command_has_every_flag_as_an_option():
    help_text = subprocess.run([sys.executable, "-m", "attnsel", "select", "--help"], check=True,
                               capture_output=True, text=True).stdout
    for flag in _listed()["flags"]:
        assert flag["cli_flag"] in help_text

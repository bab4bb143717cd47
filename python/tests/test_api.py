"""Every C API function, through the package (and directly through ctypes where the package
does not call it)."""
import ctypes
import json
import os
import subprocess
import sys

import pytest

import attnsel
from attnsel import _library as L

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "models")


def test_acceptance_command():
    assert attnsel.select(platform="cuda:9.0", head_size=72).backend == "FLASH_ATTN"


def test_select_explains_every_candidate():
    s = attnsel.select(platform="cuda:9.0", head_size=72)
    assert s.class_name == "attnsel::backends::FlashAttentionBackend" and s.priority == 0
    assert s.platform == "cuda:9.0" and s.mode == "reference"
    assert s.config == attnsel.AttentionSelectorConfig(head_size=72, dtype="bfloat16", kv_cache_dtype=None,
                                                       block_size=None)
    flashinfer = next(c for c in s.candidates if c.backend == "FLASHINFER")
    assert not flashinfer.valid and flashinfer.reasons == ["head_size not supported"]


def test_select_block_size_warning():
    s = attnsel.select("cuda:10.0", head_size=576, block_size=16, use_mla=True)
    assert s.backend == "TRITON_MLA"
    assert len(s.warnings) == 1 and "precluded higher-priority backend(s)" in s.warnings[0]


def test_select_failures_carry_vllm_types_and_candidates():
    with pytest.raises(ValueError, match="Selected backend FLASHMLA is not valid for this configuration") as e:
        attnsel.select("cuda:9.0", attention_backend="flashmla")
    assert [c.backend for c in e.value.candidates] == ["FLASHMLA"]
    with pytest.raises(NotImplementedError, match="Sparse Attention is not supported on CPU."):
        attnsel.select("cpu", head_size=576, use_mla=True, use_sparse=True)
    with pytest.raises(ValueError, match="unknown dtype 'float64'"):
        attnsel.select("cpu", dtype="float64")
    with pytest.raises(ValueError, match="kv_cache_dtype 'fp3' is not a cache dtype; valid values are: auto, "):
        attnsel.select("cpu", kv_cache_dtype="fp3")
    with pytest.raises(ValueError):
        attnsel.select("tpu")
    with pytest.raises(TypeError, match="unknown selector field"):
        attnsel.select("cpu", use_magic=True)


def test_select_accepts_torch_and_numpy_dtypes():
    torch = pytest.importorskip("torch")
    import numpy
    assert attnsel.select("cuda:9.0", dtype=torch.float16).config.dtype == "float16"
    assert attnsel.select("cuda:9.0", dtype=numpy.float32).config.dtype == "float32"


def test_selection_struct_accessors():
    request, keep = attnsel.selection._request(platform="cuda:9.0", head_size=72)
    handle = ctypes.c_void_p()
    assert L.lib.attnsel_select(ctypes.byref(request), ctypes.byref(handle)) == 0
    try:
        assert L.lib.attnsel_selection_backend(handle) == b"FLASH_ATTN"
        assert L.lib.attnsel_selection_class(handle) == b"attnsel::backends::FlashAttentionBackend"
        assert L.lib.attnsel_selection_priority(handle) == 0
        n = L.lib.attnsel_selection_num_candidates(handle)
        names = []
        for i in range(n):
            c = L.Candidate()
            assert L.lib.attnsel_selection_candidate(handle, i, ctypes.byref(c)) == 0
            names.append(c.backend.decode())
            assert c.num_reasons == (0 if c.valid else len([c.reasons[j] for j in range(c.num_reasons)]))
        assert names == [c.backend for c in attnsel.select("cuda:9.0", head_size=72).candidates]
        assert L.lib.attnsel_selection_candidate(handle, n, ctypes.byref(L.Candidate())) == 1
        assert L.lib.attnsel_status_name(1) == b"ValueError"
        assert b"out of range" in L.lib.attnsel_last_error()
        assert L.lib.attnsel_selection_num_warnings(handle) == 0
        assert L.lib.attnsel_selection_warning(handle, 0) is None
        assert json.loads(L.lib.attnsel_selection_json(handle))["backend"] == "FLASH_ATTN"
    finally:
        L.lib.attnsel_selection_destroy(handle)


def test_versions():
    assert attnsel.c_api_version[0] == L.C_API_MAJOR == 2
    assert attnsel.c_api_version[1] >= L.C_API_MINOR == 3
    assert attnsel.__version__.count(".") == 2


def test_a_library_of_another_major_or_an_older_minor_version_is_refused_by_name():
    assert L.version_problem("libattnsel.so", 2 << 16 | 3) is None
    assert L.version_problem("libattnsel.so", 2 << 16 | 7) is None
    assert L.version_problem("old.so", 2 << 16 | 2) == \
        "old.so implements attnsel's C API 2.2; this package needs 2.3 or a later 2.x"
    assert "C API 3.0; this package needs 2.3" in L.version_problem("new.so", 3 << 16)


def test_list_facts():
    facts = {f["name"]: f for f in attnsel.list_facts("cuda:9.0", facts=["flash_attn_version=2"])}
    assert facts["flash_attn_version"]["value"] == "2" and facts["flash_attn_version"]["overridden"]
    with pytest.raises(ValueError, match="conflicting facts values"):
        attnsel.list_facts("cpu", facts=["flash_attn_version=2", "flash_attn_version=3"])


def test_plan_default_model_and_files():
    p = attnsel.plan(platform="cuda:9.0")
    assert p.groups[0].backend == "FLASH_ATTN" and p.block_size == 16
    gemma = attnsel.plan(os.path.join(EXAMPLES, "gemma3.json"), "cpu")
    assert {g.backend for g in gemma.groups} == {"CPU_ATTN"} and gemma.block_size == 128
    with open(os.path.join(EXAMPLES, "gemma3.json")) as f:
        assert attnsel.plan(json.load(f), "cpu").groups == gemma.groups


def test_plan_failures():
    with pytest.raises(attnsel.PlanError, match="No common block size for 32") as e:
        attnsel.plan(os.path.join(EXAMPLES, "deepseek_v32.json"), "cuda:10.0", tensor_parallel_size=8, block_size=32)
    assert e.value.partial_plan is not None
    with pytest.raises(ValueError, match="no such file or folder"):
        attnsel.plan("/nonexistent/config.json", "cpu")


def test_list_backends():
    backends = {(b.enum, b.name): b for b in attnsel.list_backends("cuda:9.0")}
    fa = backends[("AttentionBackendEnum", "FLASH_ATTN")]
    assert fa.class_name == "attnsel::backends::FlashAttentionBackend"
    assert "bfloat16" in fa.capabilities["dtypes"]
    assert backends[("AttentionBackendEnum", "CUSTOM")].error.startswith("ValueError: Backend CUSTOM must be")
    assert ("MambaAttentionBackendEnum", "MAMBA1") in backends


def test_plugins():
    with pytest.raises(ImportError, match="does not exist"):
        attnsel.load_plugin("/nonexistent/libnothing.so")
    plugin = os.environ.get("ATTNSEL_TEST_PLUGIN")
    if not plugin:
        pytest.skip("ATTNSEL_TEST_PLUGIN is not set")
    info = attnsel.load_plugin(plugin)
    assert info["backends"] and os.path.samefile(info["library"], plugin)
    assert any(os.path.samefile(p["library"], plugin) for p in attnsel.loaded_plugins())


def test_environment_plugins_load_without_a_registration_call():
    """ATTNSEL_PLUGINS is loaded at the registry's first use, whatever the entry point; an
    entry that fails is a warning, and the program goes on."""
    plugin = os.environ.get("ATTNSEL_TEST_PLUGIN")
    if not plugin:
        pytest.skip("ATTNSEL_TEST_PLUGIN is not set")
    code = "import attnsel; print(attnsel.AttentionBackendEnum['CPU_ATTN'].get_path())"
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), ".."), ATTNSEL_LOG_LEVEL="warn",
               ATTNSEL_PLUGINS="/nonexistent/libmissing.so," + plugin + ":init_register_as")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == os.path.basename(plugin) + ":init_register_as"
    assert "ATTNSEL_PLUGINS entry '/nonexistent/libmissing.so'" in out.stderr


def test_module_entry_point():
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), ".."))
    out = subprocess.run([sys.executable, "-m", "attnsel", "select", "--platform", "cuda:9.0", "--head-size", "72",
                          "--json"], capture_output=True, text=True, env=env, check=True)
    assert json.loads(out.stdout)["backend"] == "FLASH_ATTN"
    failed = subprocess.run([sys.executable, "-m", "attnsel", "select", "--platform", "cuda:9.0",
                             "--attention-backend", "FLASHMLA"], capture_output=True, text=True, env=env)
    assert failed.returncode == 3 and "Selected backend FLASHMLA is not valid" in failed.stderr

"""fa_utils' get_flash_attn_version logs its fallbacks with vLLM's words when a selection from
Python reaches them (a fresh interpreter, so that vLLM's once-per-process lines appear)."""
import os
import subprocess
import sys


def _stderr_of(code):
    env = dict(os.environ, ATTNSEL_LOG_LEVEL="info")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stderr


def test_batch_invariance_line():
    err = _stderr_of("import attnsel\n"
                     "with attnsel.use_platform('cuda:10.0'), "
                     "attnsel.set_current_vllm_config(attnsel.VllmConfig(batch_invariant=True)):\n"
                     "    attnsel.get_attn_backend(128, 'bfloat16', 'fp8')\n")
    assert "Cannot use FA version 4 with batch invariance, defaulting to FA version 2.\n" in err


def test_head_256_line():
    err = _stderr_of("import attnsel\n"
                     "attnsel.select('cuda:10.0', 256, 'bfloat16', 'fp8')\n")
    assert ("FA4's Blackwell head_size=256 kernel does not support quantized KV cache dtype fp8, "
            "defaulting to FA version 2.\n") in err

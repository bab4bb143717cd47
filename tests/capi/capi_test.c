/* The C API from C99: selection, its failures, plans, the registry, plugins, kernel info, a
 * CPU kernel's step plans (plan, update, write, execute with log-sum-exp) checked against a
 * direct computation, and the MLA kernel's (cache write, execute, decode_latent) likewise. Usage: capi_test [PLUGIN_LIBRARY]
 * Built with -std=c99 -Wall -Werror against the installed header (scripts/check-install.sh)
 * and in the build tree (ctest). Exits non-zero with a message on the first failure. */
#include <attnsel/attnsel.h>
/* An engine that loads plugins may include the plugin ABI beside the C API: the two headers
 * declare no name twice. */
#include <attnsel/plugin.h>

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond)                                                               \
  do {                                                                            \
    if (!(cond)) {                                                                \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
              attnsel_last_error());                                              \
      ++failures;                                                                 \
    }                                                                             \
  } while (0)

static int contains(const char* text, const char* part) { return text != NULL && strstr(text, part) != NULL; }

static void test_versions(void) {
  CHECK(attnsel_c_api_version() >> 16 == ATTNSEL_C_API_MAJOR);
  CHECK(strlen(attnsel_version()) > 0);
  CHECK(strcmp(attnsel_status_name(ATTNSEL_STATUS_VALUE_ERROR), "ValueError") == 0);
  CHECK(strcmp(attnsel_status_name(ATTNSEL_STATUS_NOT_IMPLEMENTED_ERROR), "NotImplementedError") == 0);
  CHECK(strcmp(attnsel_status_name(ATTNSEL_STATUS_OS_ERROR), "OSError") == 0);
  CHECK(strcmp(attnsel_status_name(99), "Unknown") == 0);
  /* Every status the library returns has its name. */
  for (attnsel_status s = ATTNSEL_STATUS_OK; s <= ATTNSEL_STATUS_OS_ERROR; ++s)
    CHECK(!contains(attnsel_status_name(s), "Unknown"));
}

static void test_select(void) {
  attnsel_select_request r;
  attnsel_selection* s = NULL;
  attnsel_candidate c;
  attnsel_select_request_init(&r);
  r.platform = "cuda:9.0";
  r.head_size = 72;
  CHECK(attnsel_select(&r, &s) == ATTNSEL_STATUS_OK);
  CHECK(s != NULL);
  if (s == NULL) return;
  CHECK(strcmp(attnsel_selection_backend(s), "FLASH_ATTN") == 0);
  CHECK(strcmp(attnsel_selection_class(s), "attnsel::backends::FlashAttentionBackend") == 0);
  CHECK(attnsel_selection_priority(s) == 0);
  CHECK(attnsel_selection_num_candidates(s) >= 2);
  CHECK(attnsel_selection_candidate(s, 1, &c) == ATTNSEL_STATUS_OK);
  CHECK(strcmp(c.backend, "FLASHINFER") == 0 && !c.valid && c.num_reasons == 1);
  CHECK(c.num_reasons == 1 && strcmp(c.reasons[0], "head_size not supported") == 0);
  CHECK(attnsel_selection_candidate(s, 1000, &c) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "candidate index 1000 is out of range"));
  CHECK(attnsel_selection_num_warnings(s) == 0 && attnsel_selection_warning(s, 0) == NULL);
  CHECK(contains(attnsel_selection_json(s), "\"backend\": \"FLASH_ATTN\""));
  attnsel_selection_destroy(s);

  /* vLLM's block-size warning. */
  attnsel_select_request_init(&r);
  r.platform = "cuda:10.0";
  r.use_mla = 1;
  r.head_size = 576;
  r.block_size = 16;
  CHECK(attnsel_select(&r, &s) == ATTNSEL_STATUS_OK);
  if (s != NULL) {
    CHECK(strcmp(attnsel_selection_backend(s), "TRITON_MLA") == 0);
    CHECK(attnsel_selection_num_warnings(s) == 1 && contains(attnsel_selection_warning(s, 0), "precluded"));
    attnsel_selection_destroy(s);
  }
}

/* The selector flags by name (C API 2.3): the same selection as the field of 2.2, and an
 * unknown name refused with the valid ones. */
static void test_selector_flags(void) {
  attnsel_select_request r;
  attnsel_selection* s = NULL;
  char* json = NULL;
  attnsel_select_request_init(&r);
  r.platform = "cuda:10.0";
  r.head_size = 576;
  r.block_size = 16;
  CHECK(attnsel_select_request_set_flag(&r, "use_mla", 1) == ATTNSEL_STATUS_OK);
  CHECK(attnsel_select(&r, &s) == ATTNSEL_STATUS_OK);
  if (s != NULL) {
    CHECK(strcmp(attnsel_selection_backend(s), "TRITON_MLA") == 0);
    attnsel_selection_destroy(s);
  }
  CHECK(attnsel_select_request_set_flag(&r, "use_everything", 1) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "unknown selector flag 'use_everything'; valid flags are: "));
  CHECK(contains(attnsel_last_error(), "has_sink"));
  CHECK(attnsel_list_selector_flags(&json) == ATTNSEL_STATUS_OK);
  CHECK(contains(json, "\"name\": \"use_mla\"") && contains(json, "\"cli_flag\": \"--use-mla\""));
  attnsel_free_string(json);
}

/* vLLM's platform messages: the CPU's block-size warning for a block size the user gave. */
static void test_platform_messages(void) {
  attnsel_select_request r;
  attnsel_selection* s = NULL;
  attnsel_select_request_init(&r);
  r.platform = "cpu";
  r.block_size = 16;
  CHECK(attnsel_select(&r, &s) == ATTNSEL_STATUS_OK && s != NULL);
  if (s == NULL) return;
  CHECK(attnsel_selection_num_warnings(s) == 1);
  CHECK(attnsel_selection_warning(s, 0) != NULL &&
        strcmp(attnsel_selection_warning(s, 0), "CPU backend prefers block_size is multiples of 32, otherwise the "
                                                "performance is not optimized.") == 0);
  attnsel_selection_destroy(s);
  /* ROCm: a requested backend that cannot serve a TurboQuant layer gives way to TURBOQUANT. */
  attnsel_select_request_init(&r);
  r.platform = "rocm:gfx942";
  r.kv_cache_dtype = "turboquant_k8v4";
  r.attention_backend = "ROCM_ATTN";
  CHECK(attnsel_select(&r, &s) == ATTNSEL_STATUS_OK && s != NULL);
  if (s == NULL) return;
  CHECK(strcmp(attnsel_selection_backend(s), "TURBOQUANT") == 0);
  attnsel_selection_destroy(s);
}

static void test_select_failures(void) {
  attnsel_select_request r;
  attnsel_selection* s = NULL;
  attnsel_candidate c;
  char* json = NULL;
  /* An invalid explicit choice: ValueError with vLLM's message, and the candidate's reasons. */
  attnsel_select_request_init(&r);
  r.platform = "cuda:9.0";
  r.attention_backend = "flashmla";
  CHECK(attnsel_select(&r, &s) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "Selected backend FLASHMLA is not valid for this configuration"));
  CHECK(s != NULL);
  if (s != NULL) {
    CHECK(strcmp(attnsel_selection_backend(s), "") == 0);
    CHECK(attnsel_selection_num_candidates(s) == 1);
    CHECK(attnsel_selection_candidate(s, 0, &c) == ATTNSEL_STATUS_OK && !c.valid && c.num_reasons == 2);
    CHECK(contains(attnsel_selection_json(s), "\"error_type\": \"ValueError\""));
    attnsel_selection_destroy(s);
  }
  /* Sparse MLA on the CPU: NotImplementedError. */
  attnsel_select_request_init(&r);
  r.platform = "cpu";
  r.use_mla = r.use_sparse = 1;
  r.head_size = 576;
  CHECK(attnsel_select_json(&r, &json) == ATTNSEL_STATUS_NOT_IMPLEMENTED_ERROR);
  CHECK(contains(json, "Sparse Attention is not supported on CPU."));
  CHECK(contains(json, "\"platform\": \"cpu\""));
  attnsel_free_string(json);
  /* Bad input: an unknown platform, backend, dtype; NULL arguments. */
  attnsel_select_request_init(&r);
  r.platform = "tpu";
  CHECK(attnsel_select(&r, &s) == ATTNSEL_STATUS_VALUE_ERROR && s == NULL);
  attnsel_select_request_init(&r);
  r.platform = "cpu";
  r.attention_backend = "NO_SUCH";
  CHECK(attnsel_select(&r, &s) == ATTNSEL_STATUS_VALUE_ERROR && s == NULL);
  CHECK(contains(attnsel_last_error(), "Unknown attention backend: 'NO_SUCH'"));
  attnsel_select_request_init(&r);
  r.dtype = "float64";
  CHECK(attnsel_select(&r, &s) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "unknown dtype 'float64'; valid values are:"));
  CHECK(attnsel_select(NULL, &s) == ATTNSEL_STATUS_VALUE_ERROR);
  r.struct_size = 4;
  CHECK(attnsel_select(&r, &s) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "struct_size"));
}

static void test_check_and_facts(void) {
  attnsel_select_request r;
  char* json = NULL;
  attnsel_select_request_init(&r);
  r.platform = "cuda:9.0";
  r.head_size = 72;
  CHECK(attnsel_check_backend(&r, "FLASHINFER", &json) == ATTNSEL_STATUS_OK);
  CHECK(json != NULL && strcmp(json, "[\"head_size not supported\"]") == 0);
  attnsel_free_string(json);
  CHECK(attnsel_check_backend(&r, "flash_attn", &json) == ATTNSEL_STATUS_OK);
  CHECK(json != NULL && strcmp(json, "[]") == 0);
  attnsel_free_string(json);
  CHECK(attnsel_list_facts(&r, &json) == ATTNSEL_STATUS_OK);
  CHECK(contains(json, "\"name\": \"flash_attn_version\""));
  attnsel_free_string(json);
  /* The engine's settings are the facts a selection sees: VLLM_BATCH_INVARIANT demotes FA4 to
   * FA2 on Blackwell, which has no fp8 cache. */
  attnsel_select_request_init(&r);
  r.platform = "cuda:10.0";
  r.kv_cache_dtype = "fp8";
  r.use_batch_invariant = 1;
  CHECK(attnsel_check_backend(&r, "FLASH_ATTN", &json) == ATTNSEL_STATUS_OK);
  CHECK(contains(json, "FP8 KV cache requires FA3 on SM90 or FA4 on SM100"));
  attnsel_free_string(json);
  CHECK(attnsel_list_facts(&r, &json) == ATTNSEL_STATUS_OK);
  CHECK(contains(json, "\"name\": \"env.vllm_batch_invariant\",\n      \"type\": \"bool\",\n      \"value\": \"true\""));
  attnsel_free_string(json);
}

static void test_plan(void) {
  attnsel_plan_request r;
  char* json = NULL;
  attnsel_plan_request_init(&r);
  r.platform = "cuda:9.0";
  CHECK(attnsel_plan_json(&r, &json) == ATTNSEL_STATUS_OK);
  CHECK(contains(json, "\"backend\": \"FLASH_ATTN\""));
  attnsel_free_string(json);
  /* An MLA group reports its shape and softmax scale (Kimi-K2: yarn factor 32). */
  r.model_json =
      "{\"model_type\": \"kimi_k2\", \"architectures\": [\"DeepseekV3ForCausalLM\"], \"num_hidden_layers\": 2, "
      "\"num_attention_heads\": 64, \"kv_lora_rank\": 512, \"qk_rope_head_dim\": 64, \"qk_nope_head_dim\": 128, "
      "\"v_head_dim\": 128, \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 32, \"mscale_all_dim\": 1.0, "
      "\"original_max_position_embeddings\": 4096}}";
  CHECK(attnsel_plan_json(&r, &json) == ATTNSEL_STATUS_OK);
  CHECK(contains(json, "\"softmax_scale\": 0.13086079996295005"));
  CHECK(contains(json, "\"latent_size\": 576"));
  attnsel_free_string(json);
  r.model_json = "{\"model_type\": \"llama\"}";
  CHECK(attnsel_plan_json(&r, &json) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(json == NULL);
  CHECK(strlen(attnsel_last_error()) > 0);
}

static void test_registry(const char* plugin) {
  char* text = NULL;
  int overridden = -1;
  CHECK(attnsel_enum_members(ATTNSEL_ENUM_ATTENTION, &text) == ATTNSEL_STATUS_OK);
  CHECK(contains(text, "{\"name\":\"CUSTOM\",\"value\":null,\"overridden\":false}"));
  attnsel_free_string(text);
  CHECK(attnsel_enum_members(ATTNSEL_ENUM_MAMBA, &text) == ATTNSEL_STATUS_OK && contains(text, "MAMBA1"));
  attnsel_free_string(text);
  CHECK(attnsel_enum_members(7, &text) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(attnsel_member_check(ATTNSEL_ENUM_ATTENTION, "FLASH_ATTN") == ATTNSEL_STATUS_OK);
  CHECK(attnsel_member_check(ATTNSEL_ENUM_ATTENTION, "flash_attn") == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(attnsel_member_get_path(ATTNSEL_ENUM_ATTENTION, "CUSTOM", 1, &text) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "Backend CUSTOM must be registered before use."));
  CHECK(attnsel_member_get_path(ATTNSEL_ENUM_ATTENTION, "FLASH_ATTN", 1, &text) == ATTNSEL_STATUS_OK);
  CHECK(text != NULL && strcmp(text, "attnsel::backends::FlashAttentionBackend") == 0);
  attnsel_free_string(text);
  CHECK(attnsel_member_get_class(ATTNSEL_ENUM_ATTENTION, "FLASH_ATTN", &text) == ATTNSEL_STATUS_OK);
  CHECK(contains(text, "\"name\":\"FLASH_ATTN\""));
  attnsel_free_string(text);
  /* Override FLASHINFER with FLASH_ATTN's class, then clear it. */
  CHECK(attnsel_register_backend(ATTNSEL_ENUM_ATTENTION, "FLASHINFER", "attnsel::backends::FlashAttentionBackend") ==
        ATTNSEL_STATUS_OK);
  CHECK(attnsel_member_is_overridden(ATTNSEL_ENUM_ATTENTION, "FLASHINFER", &overridden) == ATTNSEL_STATUS_OK &&
        overridden == 1);
  CHECK(attnsel_member_clear_override(ATTNSEL_ENUM_ATTENTION, "FLASHINFER") == ATTNSEL_STATUS_OK);
  CHECK(attnsel_member_is_overridden(ATTNSEL_ENUM_ATTENTION, "FLASHINFER", &overridden) == ATTNSEL_STATUS_OK &&
        overridden == 0);
  /* A new member whose class cannot be resolved: get_class is an ImportError. */
  CHECK(attnsel_register_backend(ATTNSEL_ENUM_ATTENTION, "C_TEST_BACKEND", "no::such::Class") == ATTNSEL_STATUS_OK);
  CHECK(attnsel_member_get_class(ATTNSEL_ENUM_ATTENTION, "C_TEST_BACKEND", &text) == ATTNSEL_STATUS_IMPORT_ERROR);
  CHECK(attnsel_list_backends("cpu", NULL, &text) == ATTNSEL_STATUS_OK && contains(text, "\"name\": \"C_TEST_BACKEND\""));
  attnsel_free_string(text);
  /* vLLM's Enum.register: a new member with no override; an existing name is refused. */
  CHECK(attnsel_register_member(ATTNSEL_ENUM_MAMBA, "C_TEST_MAMBA", "attnsel::backends::Mamba2AttentionBackend") ==
        ATTNSEL_STATUS_OK);
  CHECK(attnsel_member_is_overridden(ATTNSEL_ENUM_MAMBA, "C_TEST_MAMBA", &overridden) == ATTNSEL_STATUS_OK &&
        overridden == 0);
  CHECK(attnsel_register_member(ATTNSEL_ENUM_MAMBA, "C_TEST_MAMBA", "x.Y") == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(strcmp(attnsel_last_error(), "Backend C_TEST_MAMBA already exists in MambaAttentionBackendEnum. Use "
                                     "register_backend(MambaAttentionBackendEnum.C_TEST_MAMBA, 'x.Y') to override.") == 0);
  CHECK(attnsel_register_member(ATTNSEL_ENUM_ATTENTION, "FLASH_ATTN", "x.Y") == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "Backend FLASH_ATTN already exists in AttentionBackendEnum."));
  /* vLLM's get_mamba_attn_backend and its errors. */
  CHECK(attnsel_get_mamba_attn_backend("MAMBA2", 0, &text) == ATTNSEL_STATUS_OK);
  CHECK(contains(text, "\"name\":\"MAMBA2_ATTN\"") && contains(text, "\"is_ssm\":true"));
  attnsel_free_string(text);
  CHECK(attnsel_get_mamba_attn_backend("MAMBA2", 1, &text) == ATTNSEL_STATUS_RUNTIME_ERROR && text == NULL);
  CHECK(strcmp(attnsel_last_error(), "VLLM batch_invariant mode is not supported for MAMBA2_ATTN.") == 0);
  CHECK(attnsel_get_mamba_attn_backend("CUSTOM", 0, &text) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "Backend CUSTOM must be registered before use."));
  CHECK(attnsel_get_mamba_attn_backend("FLASH_ATTN", 0, &text) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "Unknown attention backend: 'FLASH_ATTN'."));
  CHECK(attnsel_get_mamba_attn_backend("C_TEST_MAMBA", 0, &text) == ATTNSEL_STATUS_OK &&
        contains(text, "\"name\":\"MAMBA2_ATTN\""));
  attnsel_free_string(text);
  /* Plugins. */
  CHECK(attnsel_load_plugin("/nonexistent/libnothing.so", NULL) == ATTNSEL_STATUS_IMPORT_ERROR);
  CHECK(contains(attnsel_last_error(), "does not exist"));
  if (plugin != NULL) {
    CHECK(attnsel_load_plugin(plugin, &text) == ATTNSEL_STATUS_OK && contains(text, "\"backends\""));
    attnsel_free_string(text);
    CHECK(attnsel_loaded_plugins(&text) == ATTNSEL_STATUS_OK && contains(text, "\"library\""));
    attnsel_free_string(text);
  }
}

/* One sequence of up to 20 tokens over two blocks (the last token new) on CPU_ATTN in float32,
 * against a direct computation; GQA 4 query heads over 2 KV heads, head size 32, block size 16. */
#define H 4
#define KVH 2
#define D 32
#define BS 16
#define NB 3
#define CTX 20
static float q[1 * H * D], out[1 * H * D], lse[1 * H], kc[NB * BS * KVH * D], vc[NB * BS * KVH * D];
static float knew[CTX * KVH * D], vnew[CTX * KVH * D];

/* The largest difference of out (and lse, when given) from softmax(q·k / sqrt(D))·v over the
 * first `ctx` keys; NaN anywhere (an unwritten output) counts as an infinite error. */
static double direct_error(int ctx, const float* lse_out) {
  double max_error = 0.0;
  int h, d, t;
  for (h = 0; h < H; ++h) {
    const int kvh = h / (H / KVH);
    double logits[CTX], max_logit = -1e30, sum = 0.0;
    for (t = 0; t < ctx; ++t) {
      double dot = 0.0;
      for (d = 0; d < D; ++d) dot += (double)q[h * D + d] * knew[(t * KVH + kvh) * D + d];
      logits[t] = dot / sqrt((double)D);
      if (logits[t] > max_logit) max_logit = logits[t];
    }
    for (t = 0; t < ctx; ++t) sum += exp(logits[t] - max_logit);
    for (d = 0; d < D; ++d) {
      double expected = 0.0, error;
      for (t = 0; t < ctx; ++t) expected += exp(logits[t] - max_logit) / sum * vnew[(t * KVH + kvh) * D + d];
      error = fabs(out[h * D + d] - expected);
      if (!(error <= max_error)) max_error = error == error ? error : INFINITY;
    }
    if (lse_out != NULL) {
      const double error = fabs(lse_out[h] - (max_logit + log(sum)));
      if (!(error <= max_error)) max_error = error == error ? error : INFINITY;
    }
  }
  return max_error;
}

static void poison(void) {
  int i;
  for (i = 0; i < H * D; ++i) out[i] = NAN;
  for (i = 0; i < H; ++i) lse[i] = NAN;
}

static void test_kernel_info(void) {
  attnsel_kernel_info info;
  attnsel_kernel_info_init(&info);
  CHECK(attnsel_backend_get_kernel_info("cpu_attn", "bfloat16", NULL, &info) == ATTNSEL_STATUS_OK);
  CHECK(info.available == 1 && info.device_type == kDLCPU && info.lse_output == 1 && info.lse_prefill == 1);
  CHECK(info.graph_support == ATTNSEL_GRAPH_SUPPORT_NEVER && strcmp(info.graph_support_name, "never") == 0);
  CHECK(info.isa != NULL && strlen(info.isa) > 0 && info.preferred_layout == NULL);
  /* FLASH_ATTN's kernel lives on CUDA devices and is captured in graphs, available here or not. */
  attnsel_kernel_info_init(&info);
  CHECK(attnsel_backend_get_kernel_info("FLASH_ATTN", NULL, "auto", &info) == ATTNSEL_STATUS_OK);
  CHECK(info.device_type == kDLCUDA && info.graph_support == ATTNSEL_GRAPH_SUPPORT_UNIFORM_BATCH);
  /* Its log-sum-exp covers decode batches only (the prefill kernels do not write one). */
  CHECK(strcmp(info.graph_support_name, "uniform_batch") == 0 && info.lse_output == 1 && info.lse_prefill == 0);
  CHECK(info.preferred_layout != NULL && strcmp(info.preferred_layout, "LBNHC") == 0);
  /* A backend without a kernel, a bad dtype, a struct from nowhere. */
  CHECK(attnsel_backend_get_kernel_info("FLASHINFER", NULL, NULL, &info) == ATTNSEL_STATUS_OK && info.available == 0);
  CHECK(attnsel_backend_get_kernel_info("CPU_ATTN", "float64", NULL, &info) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "unknown dtype 'float64'"));
  CHECK(attnsel_backend_get_kernel_info("NO_SUCH", NULL, NULL, &info) == ATTNSEL_STATUS_VALUE_ERROR);
  info.struct_size = 2;
  CHECK(attnsel_backend_get_kernel_info("CPU_ATTN", NULL, NULL, &info) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "attnsel_kernel_info.struct_size"));
  /* A struct of the first version (up to lse_output) is filled up to there and no further. */
  attnsel_kernel_info_init(&info);
  info.struct_size = (uint32_t)offsetof(attnsel_kernel_info, lse_prefill);
  info.lse_prefill = 7;
  CHECK(attnsel_backend_get_kernel_info("CPU_ATTN", NULL, NULL, &info) == ATTNSEL_STATUS_OK);
  CHECK(info.lse_output == 1 && info.lse_prefill == 7);
}

static void test_kernel(void) {
  int64_t q_shape[3] = {1, H, D}, lse_shape[2] = {1, H}, kv_shape[3] = {CTX, KVH, D};
  int64_t cache_shape[4] = {NB, BS, KVH, D}, small_cache_shape[4] = {NB - 1, BS, KVH, D};
  const DLDataType f32 = {kDLFloat, 32, 1}, f64 = {kDLFloat, 64, 1};
  DLTensor tq = {q, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, q_shape, NULL, 0};
  DLTensor tout = {out, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, q_shape, NULL, 0};
  DLTensor tlse = {lse, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, lse_shape, NULL, 0};
  DLTensor tk = {knew, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, kv_shape, NULL, 0};
  DLTensor tv = {vnew, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, kv_shape, NULL, 0};
  DLTensor tkc = {kc, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, cache_shape, NULL, 0};
  DLTensor tvc = {vc, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, cache_shape, NULL, 0};
  DLTensor tkc_small = {kc, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, small_cache_shape, NULL, 0};
  DLTensor tvc_small = {vc, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, small_cache_shape, NULL, 0};
  int32_t qsl_prefill[2] = {0, CTX}, qsl_decode[2] = {0, 1}, lens[1] = {CTX}, shorter[1] = {CTX - 3};
  int32_t table[2] = {2, 0}, qsl_two[3] = {0, 1, 2}, lens_two[2] = {CTX, CTX}, table_two[4] = {2, 0, 2, 0};
  int64_t slots[CTX];
  attnsel_layer_params p;
  attnsel_batch b, two;
  attnsel_plan_options o;
  attnsel_kernel_info info;
  attnsel_kernel* k = NULL;
  attnsel_step_plan* plan = NULL;
  unsigned seed = 12345u;
  int i, t;
  for (i = 0; i < CTX * KVH * D; ++i) {
    seed = seed * 1103515245u + 12345u;
    knew[i] = (float)((seed >> 8) % 2001) / 1000.0f - 1.0f;
    seed = seed * 1103515245u + 12345u;
    vnew[i] = (float)((seed >> 8) % 2001) / 1000.0f - 1.0f;
  }
  for (t = 0; t < CTX; ++t) slots[t] = (int64_t)table[t / BS] * BS + t % BS;
  for (i = 0; i < H * D; ++i) q[i] = (float)((i * 37) % 23) / 11.0f - 1.0f;
  for (i = 0; i < NB * BS * KVH * D; ++i) kc[i] = vc[i] = NAN; /* every read slot must be written */
  attnsel_layer_params_init(&p);
  p.num_heads = H;
  p.num_kv_heads = KVH;
  p.head_size = D;
  CHECK(attnsel_kernel_create("cpu_attn", &p, &k) == ATTNSEL_STATUS_OK);
  if (k == NULL) return;
  attnsel_kernel_info_init(&info);
  CHECK(attnsel_kernel_get_info(k, &info) == ATTNSEL_STATUS_OK);
  CHECK(info.available && info.device_type == kDLCPU && info.lse_output && info.graph_support == ATTNSEL_GRAPH_SUPPORT_NEVER);
  /* Write all twenty tokens (a prefill step's slot mapping), then decode the last one. */
  attnsel_batch_init(&b);
  b.num_seqs = 1;
  b.query_start_loc = qsl_prefill;
  b.seq_lens = lens;
  b.block_table = table;
  b.max_blocks_per_seq = 2;
  b.slot_mapping = slots;
  CHECK(attnsel_kernel_plan(k, &b, &tkc, &tvc, f32, NULL, NULL, &plan) == ATTNSEL_STATUS_OK);
  CHECK(attnsel_step_plan_workspace_bytes(plan) > 0);
  CHECK(attnsel_step_plan_fp8_queries(plan) == 0); /* the CPU kernel multiplies the queries as given */
  CHECK(attnsel_step_plan_fp8_queries(NULL) == 0);
  CHECK(attnsel_kernel_write_kv_cache(k, plan, &tk, &tv, &tkc, &tvc, NULL) == ATTNSEL_STATUS_OK);
  attnsel_step_plan_destroy(plan);
  b.query_start_loc = qsl_decode;
  b.slot_mapping = NULL;
  attnsel_plan_options_init(&o);
  CHECK(o.early_cache_reads == 0); /* a promise the caller makes: off unless set */
  o.lse = 1;
  o.early_cache_reads = 1; /* host kernels have no reads to move earlier: same results */
  CHECK(attnsel_kernel_plan(k, &b, &tkc, &tvc, f32, &o, NULL, &plan) == ATTNSEL_STATUS_OK);
  CHECK(attnsel_kernel_write_kv_cache(k, plan, &tk, &tv, &tkc, &tvc, NULL) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "no slot_mapping"));
  poison();
  CHECK(attnsel_kernel_execute(k, plan, &tq, &tkc, &tvc, &tout, &tlse, NULL) == ATTNSEL_STATUS_OK);
  CHECK(direct_error(CTX, lse) < 1e-4);
  /* Without lse the output is the same; lse stays untouched. */
  poison();
  CHECK(attnsel_kernel_execute(k, plan, &tq, &tkc, &tvc, &tout, NULL, NULL) == ATTNSEL_STATUS_OK);
  CHECK(direct_error(CTX, NULL) < 1e-4 && lse[0] != lse[0]);
  /* Appending needs a slot mapping, which this plan's batch has not. */
  CHECK(attnsel_kernel_execute_append(k, plan, &tq, &tk, &tv, &tkc, &tvc, &tout, NULL, NULL) ==
        ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "no slot_mapping"));
  /* One call per layer: the decode token's key and value appended and attended over. Its
   * cache slot is poisoned first, so only the append makes the output right. */
  {
    int64_t one_shape[3] = {1, KVH, D}, bad_shape[3] = {1, KVH + 1, D};
    DLTensor tk1 = {knew + (CTX - 1) * KVH * D, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, one_shape, NULL, 0};
    DLTensor tv1 = {vnew + (CTX - 1) * KVH * D, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, one_shape, NULL, 0};
    const int64_t last = slots[CTX - 1];
    attnsel_step_plan* step = NULL;
    b.slot_mapping = &slots[CTX - 1];
    CHECK(attnsel_kernel_plan(k, &b, &tkc, &tvc, f32, NULL, NULL, &step) == ATTNSEL_STATUS_OK);
    for (i = 0; i < KVH * D; ++i) kc[last * KVH * D + i] = vc[last * KVH * D + i] = NAN;
    poison();
    CHECK(attnsel_kernel_execute_append(k, step, &tq, &tk1, &tv1, &tkc, &tvc, &tout, NULL, NULL) == ATTNSEL_STATUS_OK);
    CHECK(direct_error(CTX, NULL) < 1e-4);
    CHECK(kc[last * KVH * D] == knew[(CTX - 1) * KVH * D]);
    /* New keys of another shape are refused by name; a NULL one too. */
    tk1.shape = bad_shape;
    CHECK(attnsel_kernel_execute_append(k, step, &tq, &tk1, &tv1, &tkc, &tvc, &tout, NULL, NULL) ==
          ATTNSEL_STATUS_VALUE_ERROR);
    CHECK(contains(attnsel_last_error(), "new_kv.key"));
    CHECK(attnsel_kernel_execute_append(k, step, &tq, &tk1, NULL, &tkc, &tvc, &tout, NULL, NULL) ==
          ATTNSEL_STATUS_VALUE_ERROR);
    CHECK(contains(attnsel_last_error(), "value"));
    attnsel_step_plan_destroy(step);
    b.slot_mapping = NULL;
  }
  /* The next step: the same plan, updated to a shorter context. */
  b.seq_lens = shorter;
  CHECK(attnsel_kernel_update_plan(k, plan, &b, NULL) == ATTNSEL_STATUS_OK);
  poison();
  CHECK(attnsel_kernel_execute(k, plan, &tq, &tkc, &tvc, &tout, &tlse, NULL) == ATTNSEL_STATUS_OK);
  CHECK(direct_error(CTX - 3, lse) < 1e-4);
  b.seq_lens = lens;
  /* Bad input: a wrong dtype, tensors of another geometry than the plan's, NULL tensors. */
  tq.dtype.bits = 64;
  CHECK(attnsel_kernel_execute(k, plan, &tq, &tkc, &tvc, &tout, NULL, NULL) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "query: unsupported DLPack dtype"));
  tq.dtype.bits = 32;
  CHECK(attnsel_kernel_execute(k, plan, &tq, &tkc_small, &tvc_small, &tout, NULL, NULL) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "differs from the plan's cache geometry"));
  CHECK(attnsel_kernel_execute(k, plan, NULL, &tkc, &tvc, &tout, NULL, NULL) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(attnsel_kernel_execute(k, NULL, &tq, &tkc, &tvc, &tout, NULL, NULL) == ATTNSEL_STATUS_VALUE_ERROR);
  /* A two-sequence batch in the one-sequence plan: the query has too few rows for it. */
  attnsel_batch_init(&two);
  two.num_seqs = 2;
  two.query_start_loc = qsl_two;
  two.seq_lens = lens_two;
  two.block_table = table_two;
  two.max_blocks_per_seq = 2;
  CHECK(attnsel_kernel_update_plan(k, plan, &two, NULL) == ATTNSEL_STATUS_OK);
  CHECK(attnsel_kernel_execute(k, plan, &tq, &tkc, &tvc, &tout, NULL, NULL) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "the plan's batch needs at least [2, 4, 32]"));
  attnsel_step_plan_destroy(plan);
  plan = NULL;
  /* Plans refused: a block beyond a smaller cache, a float64 activation dtype, graph capture
   * on a host kernel, a bad options struct, NULL caches. */
  CHECK(attnsel_kernel_plan(k, &b, &tkc_small, &tvc_small, f32, NULL, NULL, &plan) == ATTNSEL_STATUS_VALUE_ERROR &&
        plan == NULL);
  CHECK(contains(attnsel_last_error(), "block"));
  CHECK(attnsel_kernel_plan(k, &b, &tkc, &tvc, f64, NULL, NULL, &plan) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "dtype"));
  attnsel_plan_options_init(&o);
  o.graph_capturable = 1;
  CHECK(attnsel_kernel_plan(k, &b, &tkc, &tvc, f32, &o, NULL, &plan) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "cannot be captured in a CUDA graph"));
  o.struct_size = 1;
  CHECK(attnsel_kernel_plan(k, &b, &tkc, &tvc, f32, &o, NULL, &plan) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "attnsel_plan_options.struct_size"));
  CHECK(attnsel_kernel_plan(k, &b, NULL, &tvc, f32, NULL, NULL, &plan) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "key_cache must not be NULL"));
  /* An lse output on a plan built without it. */
  CHECK(attnsel_kernel_plan(k, &b, &tkc, &tvc, f32, NULL, NULL, &plan) == ATTNSEL_STATUS_OK);
  CHECK(attnsel_kernel_execute(k, plan, &tq, &tkc, &tvc, &tout, &tlse, NULL) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "PlanOptions::lse"));
  attnsel_step_plan_destroy(plan);
  /* A plan serves only its KV-cache group: a layer with other head counts is refused. */
  {
    attnsel_kernel* other = NULL;
    p.num_heads = 2;
    CHECK(attnsel_kernel_create("CPU_ATTN", &p, &other) == ATTNSEL_STATUS_OK);
    CHECK(attnsel_kernel_plan(other, &b, &tkc, &tvc, f32, NULL, NULL, &plan) == ATTNSEL_STATUS_OK);
    CHECK(attnsel_kernel_execute(k, plan, &tq, &tkc, &tvc, &tout, NULL, NULL) == ATTNSEL_STATUS_VALUE_ERROR);
    CHECK(contains(attnsel_last_error(), "is not in the plan's group (heads 2/2"));
    attnsel_step_plan_destroy(plan);
    attnsel_kernel_destroy(other);
  }
  attnsel_kernel_destroy(k);
  /* A backend without a kernel here. */
  CHECK(attnsel_kernel_create("FLASHINFER", &p, &k) == ATTNSEL_STATUS_NOT_IMPLEMENTED_ERROR && k == NULL);
}

/* CPU_MLA in float32: two heads of DeepSeek's dimensions, one request of MCTX tokens over two
 * blocks of 16 (table {2, 0}); its last token decoded against the un-absorbed MLA computed
 * directly. */
#define MN 2
#define ML 512
#define MR 64
#define MNOPE 128
#define MV 128
#define MCTX 20
#define MNB 3
static float w_kv[MN * (MNOPE + MV) * ML], latents[MCTX * (ML + MR)], mcache[MNB * BS * (ML + MR)];
static float mq[MN * (MNOPE + MR)], mout[2 * MN * MV];
static float mql[MN * (ML + MR)], mlo[MN * ML], mlse[MN];

/* decode_latent's output and LSE against the latent MQA computed directly. */
static double latent_direct_error(void) {
  const double scale = 1.0 / sqrt((double)(MNOPE + MR));
  double max_error = 0.0;
  int n, j, e;
  for (n = 0; n < MN; ++n) {
    double logits[MCTX], max_logit = -1e30, sum = 0.0, error;
    for (j = 0; j < MCTX; ++j) {
      double dot = 0.0;
      for (e = 0; e < ML + MR; ++e) dot += (double)mql[n * (ML + MR) + e] * latents[j * (ML + MR) + e];
      logits[j] = dot * scale;
      if (logits[j] > max_logit) max_logit = logits[j];
    }
    for (j = 0; j < MCTX; ++j) sum += exp(logits[j] - max_logit);
    for (e = 0; e < ML; ++e) {
      double expected = 0.0;
      for (j = 0; j < MCTX; ++j) expected += exp(logits[j] - max_logit) / sum * latents[j * (ML + MR) + e];
      error = fabs(mlo[n * ML + e] - expected);
      if (!(error <= max_error)) max_error = error == error ? error : INFINITY;
    }
    error = fabs(mlse[n] - (max_logit + log(sum)));
    if (!(error <= max_error)) max_error = error == error ? error : INFINITY;
  }
  return max_error;
}

static double mla_direct_error(void) {
  const double scale = 1.0 / sqrt((double)(MNOPE + MR));
  double max_error = 0.0;
  int n, j, e, l;
  for (n = 0; n < MN; ++n) {
    const float* w = w_kv + n * (MNOPE + MV) * ML;
    double logits[MCTX], values[MCTX][MV], max_logit = -1e30, sum = 0.0;
    for (j = 0; j < MCTX; ++j) {
      const float* c = latents + j * (ML + MR);
      double dot = 0.0;
      for (e = 0; e < MNOPE; ++e) {
        double k = 0.0;
        for (l = 0; l < ML; ++l) k += (double)w[e * ML + l] * c[l];
        dot += mq[n * (MNOPE + MR) + e] * k;
      }
      for (e = 0; e < MR; ++e) dot += (double)mq[n * (MNOPE + MR) + MNOPE + e] * c[ML + e];
      for (e = 0; e < MV; ++e) {
        double v = 0.0;
        for (l = 0; l < ML; ++l) v += (double)w[(MNOPE + e) * ML + l] * c[l];
        values[j][e] = v;
      }
      logits[j] = dot * scale;
      if (logits[j] > max_logit) max_logit = logits[j];
    }
    for (j = 0; j < MCTX; ++j) sum += exp(logits[j] - max_logit);
    for (e = 0; e < MV; ++e) {
      double expected = 0.0, error;
      for (j = 0; j < MCTX; ++j) expected += exp(logits[j] - max_logit) / sum * values[j][e];
      error = fabs(mout[n * MV + e] - expected);
      if (!(error <= max_error)) max_error = error == error ? error : INFINITY;
    }
  }
  return max_error;
}

static void test_mla_kernel(void) {
  int64_t w_shape[2] = {MN * (MNOPE + MV), ML}, latent_shape[2] = {MCTX, ML}, rope_shape[2] = {MCTX, MR};
  int64_t latent_strides[2] = {ML + MR, 1}, cache_shape[3] = {MNB, BS, ML + MR};
  int64_t q_shape[3] = {1, MN, MNOPE + MR}, out_shape[3] = {1, MN, MV}, two_out_shape[3] = {2, MN, MV};
  int64_t aliasing_strides[3] = {0, MV, 1}, overlapping_cache_strides[3] = {BS * (ML + MR), ML, 1};
  DLTensor tw = {w_kv, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, w_shape, NULL, 0};
  DLTensor tc = {latents, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, latent_shape, latent_strides, 0};
  DLTensor tpe = {latents + ML, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, rope_shape, latent_strides, 0};
  DLTensor tcache = {mcache, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, cache_shape, NULL, 0};
  DLTensor tq = {mq, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, q_shape, NULL, 0};
  DLTensor tout = {mout, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, out_shape, NULL, 0};
  int32_t qsl_write[2] = {0, MCTX}, qsl_decode[2] = {0, 1}, lens[1] = {MCTX}, table[2] = {2, 0};
  int64_t slots[MCTX], outside[1] = {MNB * BS}, skipped[1] = {-1};
  attnsel_mla_layer_params p;
  attnsel_mla_plan_options o;
  attnsel_mla_step_summary summary;
  attnsel_kernel_info info;
  attnsel_batch b;
  attnsel_mla_kernel* k = NULL;
  attnsel_mla_kernel* bad = NULL;
  attnsel_step_plan* plan = NULL;
  attnsel_step_plan* decode = NULL;
  int32_t max_query = 0, max_heads = 0;
  static float saved[MNB * BS * (ML + MR)];
  unsigned seed = 777u;
  int i, t;
  /* Latents and queries in [-0.1, 0.1], key rows of kv_b_proj in [-1, 1], value rows in [-0.1, 0.1]. */
  for (i = 0; i < MN * (MNOPE + MV) * ML; ++i) {
    seed = seed * 1103515245u + 12345u;
    w_kv[i] = ((float)((seed >> 8) % 2001) / 1000.0f - 1.0f) * ((i / ML) % (MNOPE + MV) < MNOPE ? 1.0f : 0.1f);
  }
  for (i = 0; i < MCTX * (ML + MR); ++i) {
    seed = seed * 1103515245u + 12345u;
    latents[i] = ((float)((seed >> 8) % 2001) / 1000.0f - 1.0f) * 0.1f;
  }
  for (i = 0; i < MN * (MNOPE + MR); ++i) mq[i] = (float)((i * 37) % 23) / 110.0f - 0.1f;
  for (i = 0; i < MNB * BS * (ML + MR); ++i) mcache[i] = NAN; /* every read row must be written */
  for (t = 0; t < MCTX; ++t) slots[t] = (int64_t)table[t / BS] * BS + t % BS;

  attnsel_mla_layer_params_init(&p);
  CHECK(p.kv_lora_rank == ML && p.qk_rope_head_dim == MR && p.qk_nope_head_dim == MNOPE && p.v_head_dim == MV);
  p.num_heads = MN;
  p.kv_b_proj = &tw; /* float32: the activation dtype follows it */
  CHECK(attnsel_mla_kernel_create("cpu_mla", &p, &k) == ATTNSEL_STATUS_OK);
  if (k == NULL) return;
  attnsel_kernel_info_init(&info);
  CHECK(attnsel_mla_kernel_get_info(k, &info) == ATTNSEL_STATUS_OK && info.available && info.device_type == kDLCPU);
  CHECK(attnsel_mla_kernel_limits(k, &max_query, &max_heads) == ATTNSEL_STATUS_OK && max_query >= 1 &&
        max_heads >= MN);

  /* Every token written (concat_and_cache_mla over a prefill's slot mapping). */
  attnsel_batch_init(&b);
  b.num_seqs = 1;
  b.query_start_loc = qsl_write;
  b.seq_lens = lens;
  b.block_table = table;
  b.max_blocks_per_seq = 2;
  b.slot_mapping = slots;
  CHECK(attnsel_mla_kernel_plan(k, &b, &tcache, NULL, NULL, &plan) == ATTNSEL_STATUS_OK);
  CHECK(attnsel_mla_kernel_write_cache(k, plan, &tc, &tpe, &tcache, NULL) == ATTNSEL_STATUS_OK);
  CHECK(mcache[slots[3] * (ML + MR)] == latents[3 * (ML + MR)]);
  CHECK(mcache[slots[MCTX - 1] * (ML + MR) + ML] == latents[(MCTX - 1) * (ML + MR) + ML]); /* rope last */
  attnsel_mla_step_summary_init(&summary);
  CHECK(attnsel_mla_step_plan_summary(plan, &summary) == ATTNSEL_STATUS_OK && summary.num_prefills == 1 &&
        summary.num_prefill_tokens == MCTX && summary.num_decodes == 0);
  attnsel_step_plan_destroy(plan);
  plan = NULL;
  memcpy(saved, mcache, sizeof saved);
  /* A padding slot (-1) writes nothing; a slot outside the cache is refused by plan(). */
  b.query_start_loc = qsl_decode;
  b.slot_mapping = skipped;
  CHECK(attnsel_mla_kernel_plan(k, &b, &tcache, NULL, NULL, &plan) == ATTNSEL_STATUS_OK);
  CHECK(attnsel_mla_kernel_write_cache(k, plan, &tc, &tpe, &tcache, NULL) == ATTNSEL_STATUS_OK);
  CHECK(memcmp(saved, mcache, sizeof saved) == 0);
  tcache.strides = overlapping_cache_strides; /* token rows overlapping the next one's */
  CHECK(attnsel_mla_kernel_write_cache(k, plan, &tc, &tpe, &tcache, NULL) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "cache rows overlap"));
  tcache.strides = NULL;
  CHECK(memcmp(saved, mcache, sizeof saved) == 0);
  attnsel_step_plan_destroy(plan);
  plan = NULL;
  b.slot_mapping = outside;
  CHECK(attnsel_mla_kernel_plan(k, &b, &tcache, NULL, NULL, &plan) == ATTNSEL_STATUS_VALUE_ERROR && plan == NULL);
  CHECK(contains(attnsel_last_error(), "slot"));
  CHECK(memcmp(saved, mcache, sizeof saved) == 0);

  /* The decode step of the last token, against the direct computation. */
  b.slot_mapping = NULL;
  attnsel_mla_plan_options_init(&o);
  CHECK(o.decode_query_len == 1 && o.lse == 0);
  CHECK(attnsel_mla_kernel_plan(k, &b, &tcache, &o, NULL, &decode) == ATTNSEL_STATUS_OK);
  CHECK(attnsel_mla_step_plan_summary(decode, &summary) == ATTNSEL_STATUS_OK && summary.num_decodes == 1 &&
        summary.num_decode_tokens == 1);
  for (i = 0; i < 2 * MN * MV; ++i) mout[i] = NAN;
  tc.shape[0] = tpe.shape[0] = 1;
  CHECK(attnsel_mla_kernel_execute(k, decode, &tq, &tc, &tpe, &tcache, &tout, NULL) == ATTNSEL_STATUS_OK);
  CHECK(mla_direct_error() < 1e-5);
  CHECK(mout[MN * MV] != mout[MN * MV]); /* rows past the batch are not written */
  /* Bad input at this door: an output whose rows share memory, or that overlaps the query;
   * the write without a slot mapping; decode_latent's lse on a plan without it; NULLs. */
  tout.shape = two_out_shape;
  tout.strides = aliasing_strides;
  CHECK(attnsel_mla_kernel_execute(k, decode, &tq, &tc, &tpe, &tcache, &tout, NULL) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "output") && contains(attnsel_last_error(), "share memory"));
  tout.shape = out_shape;
  tout.strides = NULL;
  tout.data = mq;
  CHECK(attnsel_mla_kernel_execute(k, decode, &tq, &tc, &tpe, &tcache, &tout, NULL) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "overlaps"));
  tout.data = mout;
  CHECK(attnsel_mla_kernel_write_cache(k, decode, &tc, &tpe, &tcache, NULL) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "no slot_mapping"));
  {
    /* The absorbed decode kernel alone: its LSE needs a plan built with lse. */
    int64_t ql_shape[3] = {1, MN, ML + MR}, lo_shape[3] = {1, MN, ML}, lse_shape[2] = {1, MN};
    int64_t heads_alias_strides[3] = {MN * ML, 0, 1}, lse_alias_strides[2] = {0, 1};
    DLTensor tql = {mql, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, ql_shape, NULL, 0};
    DLTensor tlo = {mlo, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, lo_shape, NULL, 0};
    DLTensor tlse = {mlse, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, lse_shape, NULL, 0};
    attnsel_step_plan* with_lse = NULL;
    for (i = 0; i < MN * (ML + MR); ++i) mql[i] = (float)((i * 53) % 29) / 14.0f - 1.0f;
    CHECK(attnsel_mla_kernel_decode_latent(k, decode, &tql, &tcache, &tlo, &tlse, NULL) == ATTNSEL_STATUS_VALUE_ERROR);
    CHECK(contains(attnsel_last_error(), "MlaPlanOptions::lse"));
    o.lse = 1;
    CHECK(attnsel_mla_kernel_plan(k, &b, &tcache, &o, NULL, &with_lse) == ATTNSEL_STATUS_OK);
    for (i = 0; i < MN * ML; ++i) mlo[i] = NAN;
    mlse[0] = mlse[1] = NAN;
    /* Written tensors whose heads share memory: out, then lse; nothing is written. */
    tlo.strides = heads_alias_strides;
    CHECK(attnsel_mla_kernel_decode_latent(k, with_lse, &tql, &tcache, &tlo, &tlse, NULL) == ATTNSEL_STATUS_VALUE_ERROR);
    CHECK(contains(attnsel_last_error(), "out is written") && contains(attnsel_last_error(), "share memory"));
    tlo.strides = NULL;
    tlse.strides = lse_alias_strides;
    lse_shape[0] = 2;
    CHECK(attnsel_mla_kernel_decode_latent(k, with_lse, &tql, &tcache, &tlo, &tlse, NULL) == ATTNSEL_STATUS_VALUE_ERROR);
    CHECK(contains(attnsel_last_error(), "lse is written") && contains(attnsel_last_error(), "share memory"));
    tlse.strides = NULL;
    lse_shape[0] = 1;
    CHECK(mlo[0] != mlo[0] && mlse[0] != mlse[0] && mlse[1] != mlse[1]);
    CHECK(attnsel_mla_kernel_decode_latent(k, with_lse, &tql, &tcache, &tlo, &tlse, NULL) == ATTNSEL_STATUS_OK);
    CHECK(latent_direct_error() < 1e-4);
    attnsel_step_plan_destroy(with_lse);
    o.lse = 0;
  }
  CHECK(attnsel_mla_kernel_execute(k, decode, NULL, &tc, &tpe, &tcache, &tout, NULL) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "q must not be NULL"));
  CHECK(attnsel_mla_step_plan_summary(NULL, &summary) == ATTNSEL_STATUS_VALUE_ERROR);
  o.struct_size = 1;
  CHECK(attnsel_mla_kernel_plan(k, &b, &tcache, &o, NULL, &plan) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "attnsel_mla_plan_options.struct_size"));
  attnsel_step_plan_destroy(decode);
  /* Layers refused when made: an fp8 scale of 0 or NaN, an unknown cache dtype, a softmax scale
   * that is NaN or negative, more heads than the kernel computes, a kv_b_proj of another shape;
   * a backend without an MLA kernel here. */
  p.kv_cache_dtype = "fp8";
  p.k_scale = 0.0f;
  CHECK(attnsel_mla_kernel_create("CPU_MLA", &p, &bad) == ATTNSEL_STATUS_VALUE_ERROR && bad == NULL);
  CHECK(contains(attnsel_last_error(), "k_scale"));
  p.k_scale = NAN;
  CHECK(attnsel_mla_kernel_create("CPU_MLA", &p, &bad) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "k_scale"));
  p.kv_cache_dtype = "fp9";
  p.k_scale = 1.0f;
  CHECK(attnsel_mla_kernel_create("CPU_MLA", &p, &bad) == ATTNSEL_STATUS_VALUE_ERROR && bad == NULL);
  CHECK(contains(attnsel_last_error(), "kv_cache_dtype 'fp9'") && contains(attnsel_last_error(), "fp8_e4m3"));
  p.kv_cache_dtype = NULL;
  p.scale = NAN;
  CHECK(attnsel_mla_kernel_create("CPU_MLA", &p, &bad) == ATTNSEL_STATUS_VALUE_ERROR && bad == NULL);
  CHECK(contains(attnsel_last_error(), "scale = nan") && contains(attnsel_last_error(), "positive finite"));
  p.scale = -0.1f;
  CHECK(attnsel_mla_kernel_create("CPU_MLA", &p, &bad) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "scale = -0.1"));
  p.scale = 0.0f;
  p.kv_cache_dtype = NULL;
  p.k_scale = 1.0f;
  p.kv_b_proj = NULL;
  p.num_heads = max_heads + 1;
  CHECK(attnsel_mla_kernel_create("CPU_MLA", &p, &bad) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "num_heads"));
  p.num_heads = MN + 1;
  p.kv_b_proj = &tw;
  CHECK(attnsel_mla_kernel_create("CPU_MLA", &p, &bad) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "kv_b_proj"));
  p.kv_b_proj = NULL;
  p.num_heads = MN;
  p.dtype = "float64";
  CHECK(attnsel_mla_kernel_create("CPU_MLA", &p, &bad) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "dtype: unknown dtype 'float64'"));
  p.dtype = NULL;
  CHECK(attnsel_mla_kernel_create("TRITON_MLA", &p, &bad) == ATTNSEL_STATUS_NOT_IMPLEMENTED_ERROR && bad == NULL);
  attnsel_mla_kernel_destroy(k);
}

/* Bad input never changes meaning: NULL is "not given", an empty text is given (and refused);
 * values outside their range are refused with the range; unknown cache dtypes get the one text. */
static void test_bad_input_keeps_its_meaning(void) {
  attnsel_select_request r;
  attnsel_plan_request p;
  attnsel_selection* s = NULL;
  char* json = NULL;
  const char* fact[1] = {"flash_attn_version=7"};
  attnsel_select_request_init(&r);
  r.platform = "";
  CHECK(attnsel_select(&r, &s) == ATTNSEL_STATUS_VALUE_ERROR && s == NULL);
  CHECK(contains(attnsel_last_error(), "Invalid platform '': unknown platform"));
  attnsel_select_request_init(&r);
  r.platform = "cuda:9.0";
  r.mode = "";
  CHECK(attnsel_select(&r, &s) == ATTNSEL_STATUS_VALUE_ERROR && s == NULL);
  CHECK(contains(attnsel_last_error(), "unknown mode ''; valid values are: reference, runnable"));
  attnsel_select_request_init(&r);
  r.platform = "cuda:9.-0";
  CHECK(attnsel_select(&r, &s) == ATTNSEL_STATUS_VALUE_ERROR && s == NULL);
  CHECK(contains(attnsel_last_error(), "MAJOR from 1 to 99 and MINOR from 0 to 9"));
  attnsel_select_request_init(&r);
  r.platform = "cuda:9.0";
  r.facts = fact;
  r.num_facts = 1;
  CHECK(attnsel_select(&r, &s) == ATTNSEL_STATUS_VALUE_ERROR && s == NULL);
  CHECK(contains(attnsel_last_error(), "for fact flash_attn_version: expected 0 (auto), 2, 3 or 4"));
  attnsel_select_request_init(&r);
  r.platform = "cuda:9.0";
  r.kv_cache_dtype = "fp9";
  CHECK(attnsel_select(&r, &s) == ATTNSEL_STATUS_VALUE_ERROR && s == NULL);
  CHECK(contains(attnsel_last_error(), "kv_cache_dtype 'fp9' is not a cache dtype; valid values are: auto, "));
  r.kv_cache_dtype = NULL;
  r.run_cache_dtype = "";
  CHECK(attnsel_select(&r, &s) == ATTNSEL_STATUS_VALUE_ERROR && s == NULL);
  CHECK(contains(attnsel_last_error(), "run_cache_dtype '' is not a cache dtype"));
  CHECK(attnsel_list_backends("", NULL, &json) == ATTNSEL_STATUS_VALUE_ERROR && json == NULL);

  attnsel_plan_request_init(&p);
  p.platform = "";
  CHECK(attnsel_plan_json(&p, &json) == ATTNSEL_STATUS_VALUE_ERROR && json == NULL);
  CHECK(contains(attnsel_last_error(), "Invalid platform ''"));
  attnsel_plan_request_init(&p);
  p.platform = "cuda:9.0";
  p.attention_config = "";
  CHECK(attnsel_plan_json(&p, &json) == ATTNSEL_STATUS_VALUE_ERROR && json == NULL);
  CHECK(contains(attnsel_last_error(), "--attention-config is empty"));
  attnsel_plan_request_init(&p);
  p.platform = "cuda:9.0";
  p.model_path = "";
  CHECK(attnsel_plan_json(&p, &json) == ATTNSEL_STATUS_VALUE_ERROR && json == NULL);
  CHECK(contains(attnsel_last_error(), "the model path is empty"));
  attnsel_plan_request_init(&p);
  p.platform = "cuda:9.0";
  p.kv_cache_dtype = "fp9";
  CHECK(attnsel_plan_json(&p, &json) == ATTNSEL_STATUS_VALUE_ERROR && json == NULL);
  CHECK(contains(attnsel_last_error(), "--kv-cache-dtype 'fp9' is not a cache dtype"));
}

int main(int argc, char** argv) {
  test_versions();
  test_select();
  test_selector_flags();
  test_platform_messages();
  test_select_failures();
  test_bad_input_keeps_its_meaning();
  test_check_and_facts();
  test_plan();
  test_registry(argc > 1 ? argv[1] : NULL);
  test_kernel_info();
  test_kernel();
  test_mla_kernel();
  if (failures != 0) {
    fprintf(stderr, "capi_test: %d check(s) failed\n", failures);
    return 1;
  }
  printf("capi_test: all checks passed\n");
  return 0;
}

/* The C API from C99: selection, its failures, plans, the registry, plugins and a CPU kernel
 * checked against a direct computation. Usage: capi_test [PLUGIN_LIBRARY]
 * Built with -std=c99 -Wall -Werror against the installed header (scripts/check-install.sh)
 * and in the build tree (ctest). Exits non-zero with a message on the first failure. */
#include <attnsel/attnsel.h>

#include <math.h>
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
  CHECK(strcmp(attnsel_status_name(99), "Unknown") == 0);
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
}

static void test_plan(void) {
  attnsel_plan_request r;
  char* json = NULL;
  attnsel_plan_request_init(&r);
  r.platform = "cuda:9.0";
  CHECK(attnsel_plan_json(&r, &json) == ATTNSEL_STATUS_OK);
  CHECK(contains(json, "\"backend\": \"FLASH_ATTN\""));
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

/* One sequence of 20 tokens over two blocks (the last token new) on CPU_ATTN in float32,
 * against a direct computation; GQA 4 query heads over 2 KV heads, head size 32, block size 16. */
#define H 4
#define KVH 2
#define D 32
#define BS 16
#define NB 3
#define CTX 20
static void test_kernel(void) {
  static float q[1 * H * D], out[1 * H * D], kc[NB * BS * KVH * D], vc[NB * BS * KVH * D];
  static float knew[CTX * KVH * D], vnew[CTX * KVH * D];
  int64_t q_shape[3] = {1, H, D}, kv_shape[3] = {CTX, KVH, D}, cache_shape[4] = {NB, BS, KVH, D};
  DLTensor tq = {q, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, q_shape, NULL, 0};
  DLTensor tout = {out, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, q_shape, NULL, 0};
  DLTensor tk = {knew, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, kv_shape, NULL, 0};
  DLTensor tv = {vnew, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, kv_shape, NULL, 0};
  DLTensor tkc = {kc, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, cache_shape, NULL, 0};
  DLTensor tvc = {vc, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, cache_shape, NULL, 0};
  int32_t qsl_prefill[2] = {0, CTX}, qsl_decode[2] = {0, 1}, lens[1] = {CTX}, table[2] = {2, 0};
  int64_t slots[CTX];
  attnsel_layer_params p;
  attnsel_batch b;
  attnsel_kernel* k = NULL;
  attnsel_step_plan* plan = NULL;
  unsigned seed = 12345u;
  int i, h, d, t;
  double max_error = 0.0;
  for (i = 0; i < CTX * KVH * D; ++i) {
    seed = seed * 1103515245u + 12345u;
    knew[i] = (float)((seed >> 8) % 2001) / 1000.0f - 1.0f;
    seed = seed * 1103515245u + 12345u;
    vnew[i] = (float)((seed >> 8) % 2001) / 1000.0f - 1.0f;
  }
  for (t = 0; t < CTX; ++t) slots[t] = (int64_t)table[t / BS] * BS + t % BS;
  for (i = 0; i < H * D; ++i) {
    q[i] = (float)((i * 37) % 23) / 11.0f - 1.0f;
    out[i] = NAN;
  }
  attnsel_layer_params_init(&p);
  p.num_heads = H;
  p.num_kv_heads = KVH;
  p.head_size = D;
  CHECK(attnsel_kernel_create("cpu_attn", &p, &k) == ATTNSEL_STATUS_OK);
  if (k == NULL) return;
  CHECK(attnsel_kernel_device_type(k) == kDLCPU);
  /* Write all five tokens (a prefill step's slot mapping), then decode the last one. */
  attnsel_batch_init(&b);
  b.num_seqs = 1;
  b.query_start_loc = qsl_prefill;
  b.seq_lens = lens;
  b.block_table = table;
  b.max_blocks_per_seq = 2;
  b.slot_mapping = slots;
  CHECK(attnsel_kernel_plan(k, &b, &plan) == ATTNSEL_STATUS_OK);
  CHECK(attnsel_kernel_write_kv_cache(k, plan, &tk, &tv, &tkc, &tvc, NULL) == ATTNSEL_STATUS_OK);
  attnsel_step_plan_destroy(plan);
  b.query_start_loc = qsl_decode;
  b.slot_mapping = NULL;
  CHECK(attnsel_kernel_plan(k, &b, &plan) == ATTNSEL_STATUS_OK);
  CHECK(attnsel_kernel_write_kv_cache(k, plan, &tk, &tv, &tkc, &tvc, NULL) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "no slot_mapping"));
  CHECK(attnsel_kernel_execute(k, plan, &tq, &tkc, &tvc, &tout, NULL) == ATTNSEL_STATUS_OK);
  for (h = 0; h < H; ++h) {
    const int kvh = h / (H / KVH);
    double logits[CTX], max_logit = -1e30, sum = 0.0;
    for (t = 0; t < CTX; ++t) {
      double dot = 0.0;
      for (d = 0; d < D; ++d) dot += (double)q[h * D + d] * knew[(t * KVH + kvh) * D + d];
      logits[t] = dot / sqrt((double)D);
      if (logits[t] > max_logit) max_logit = logits[t];
    }
    for (t = 0; t < CTX; ++t) sum += exp(logits[t] - max_logit);
    for (d = 0; d < D; ++d) {
      double expected = 0.0;
      for (t = 0; t < CTX; ++t) expected += exp(logits[t] - max_logit) / sum * vnew[(t * KVH + kvh) * D + d];
      if (!(fabs(out[h * D + d] - expected) <= max_error)) max_error = fabs(out[h * D + d] - expected);
    }
  }
  CHECK(max_error < 1e-4); /* NaN (an unwritten output) fails too */
  /* Bad input: a wrong dtype, a mismatched plan, NULL tensors. */
  tq.dtype.bits = 64;
  CHECK(attnsel_kernel_execute(k, plan, &tq, &tkc, &tvc, &tout, NULL) == ATTNSEL_STATUS_VALUE_ERROR);
  CHECK(contains(attnsel_last_error(), "query: unsupported DLPack dtype"));
  tq.dtype.bits = 32;
  CHECK(attnsel_kernel_execute(k, plan, NULL, &tkc, &tvc, &tout, NULL) == ATTNSEL_STATUS_VALUE_ERROR);
  attnsel_step_plan_destroy(plan);
  {
    attnsel_kernel* other = NULL;
    p.num_heads = 2;
    CHECK(attnsel_kernel_create("CPU_ATTN", &p, &other) == ATTNSEL_STATUS_OK);
    CHECK(attnsel_kernel_plan(other, &b, &plan) == ATTNSEL_STATUS_OK);
    CHECK(attnsel_kernel_execute(k, plan, &tq, &tkc, &tvc, &tout, NULL) == ATTNSEL_STATUS_VALUE_ERROR);
    CHECK(contains(attnsel_last_error(), "this step plan was built for layers with num_heads=2"));
    attnsel_step_plan_destroy(plan);
    attnsel_kernel_destroy(other);
  }
  attnsel_kernel_destroy(k);
  /* A backend without a kernel here. */
  CHECK(attnsel_kernel_create("FLASHINFER", &p, &k) == ATTNSEL_STATUS_NOT_IMPLEMENTED_ERROR && k == NULL);
}

int main(int argc, char** argv) {
  test_versions();
  test_select();
  test_select_failures();
  test_check_and_facts();
  test_plan();
  test_registry(argc > 1 ? argv[1] : NULL);
  test_kernel();
  if (failures != 0) {
    fprintf(stderr, "capi_test: %d check(s) failed\n", failures);
    return 1;
  }
  printf("capi_test: all checks passed\n");
  return 0;
}

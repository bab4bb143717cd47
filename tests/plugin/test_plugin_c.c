/* Test plugin written against the C ABI alone: one well-formed plugin
 * (attnsel_plugin_init) and one init symbol per way a plugin can be wrong. */
#include <stddef.h>
#include <stdio.h>

#include "attnsel/plugin.h"

static int init_calls = 0;

/* How many times attnsel_plugin_init ran (tests check that loading is idempotent). */
ATTNSEL_PLUGIN_EXPORT int test_plugin_init_calls(void) { return init_calls; }

static const attnsel_dtype kHalf[] = {ATTNSEL_DTYPE_FLOAT16, ATTNSEL_DTYPE_BFLOAT16};
static const char* const kKvAuto[] = {"auto", "float16", "bfloat16"};
static const char* const kKvUnknown[] = {"auto", "int3"};
static const attnsel_block_size kBlock16[] = {{16, 1}};
static const int32_t kHeads[] = {64, 128};
static const attnsel_kv_cache_layout kLayouts[] = {ATTNSEL_KV_LAYOUT_LBHNC, ATTNSEL_KV_LAYOUT_LBNHC};

static int check_combination(void* user_data, const attnsel_combination* args, char* reason, size_t capacity) {
  (void)user_data;
  if (args->head_size == 64 && args->has_block_size && args->block_size == 32) {
    snprintf(reason, capacity, "head size 64 needs block size 16, got %d", (int)args->block_size);
    return ATTNSEL_FAILED;
  }
  return ATTNSEL_OK;
}

static uint32_t score_zero(void* user_data, char* reason, size_t capacity) {
  (void)user_data;
  snprintf(reason, capacity, "needs AVX-1024, which this CPU does not have");
  return 0;
}

#define BACKEND(NAME, ...)                                                                              \
  {                                                                                                     \
    .struct_size = sizeof(attnsel_backend), .name = NAME, .dtypes = kHalf, .num_dtypes = 2,            \
    .kv_cache_dtypes = kKvAuto, .num_kv_cache_dtypes = 3, .block_sizes = kBlock16, .num_block_sizes = 1, \
    .attn_types = ATTNSEL_ATTN_TYPE_BIT(ATTNSEL_ATTN_TYPE_DECODER), .features = ATTNSEL_FEATURE_VLLM_DEFAULTS, \
    __VA_ARGS__                                                                                        \
  }

#define PLUGIN(SYMBOL, NAME, ...)                                                                      \
  static const attnsel_plugin SYMBOL##_description = {                                                \
      .abi_major = ATTNSEL_PLUGIN_ABI_MAJOR, .abi_minor = ATTNSEL_PLUGIN_ABI_MINOR,                     \
      .struct_size = sizeof(attnsel_plugin), .name = NAME, .version = "1.2.3", __VA_ARGS__};          \
  ATTNSEL_PLUGIN_EXPORT const attnsel_plugin* SYMBOL(const attnsel_host* host) {                       \
    (void)host;                                                                                        \
    return &SYMBOL##_description;                                                                      \
  }

#define BACKENDS(...) .num_backends = sizeof((const attnsel_backend* const[]){__VA_ARGS__}) / sizeof(void*), \
                      .backends = (const attnsel_backend* const[]){__VA_ARGS__}

/* ---- the well-formed plugin ---------------------------------------------------------- */

static const attnsel_backend kBasic =
    BACKEND("C_BASIC", .head_sizes = kHeads, .num_head_sizes = 2, .kv_cache_layouts = kLayouts,
            .num_kv_cache_layouts = 2, .features = ATTNSEL_FEATURE_VLLM_DEFAULTS | ATTNSEL_FEATURE_SLIDING_WINDOW,
            .has_compute_capability_range = 1, .min_compute_capability = {8, 0},
            .max_compute_capability = {9, 0}, .check_combination = check_combination);
static const attnsel_backend kBasicMla =
    BACKEND("C_BASIC_MLA", .features = ATTNSEL_FEATURE_MLA | ATTNSEL_FEATURE_PCP,
            .attn_types = ATTNSEL_ATTN_TYPE_BIT(ATTNSEL_ATTN_TYPE_DECODER) |
                          ATTNSEL_ATTN_TYPE_BIT(ATTNSEL_ATTN_TYPE_ENCODER_ONLY));
static const attnsel_backend* const kBasicBackends[] = {&kBasic, &kBasicMla};
static const attnsel_plugin kBasicPlugin = {ATTNSEL_PLUGIN_ABI_MAJOR, ATTNSEL_PLUGIN_ABI_MINOR, sizeof(attnsel_plugin),
                                            "c-basic", "1.2.3", NULL, 2, kBasicBackends};

ATTNSEL_PLUGIN_EXPORT const attnsel_plugin* attnsel_plugin_init(const attnsel_host* host) {
  ++init_calls;
  if (host == NULL || host->abi_major != ATTNSEL_PLUGIN_ABI_MAJOR || host->struct_size < sizeof(attnsel_host))
    return NULL;
  return &kBasicPlugin;
}

/* ---- version and size ---------------------------------------------------------------- */

static const attnsel_backend kOne = BACKEND("C_ONE");
static const attnsel_plugin kMajorMismatch = {ATTNSEL_PLUGIN_ABI_MAJOR + 1, 0, sizeof(attnsel_plugin), "c-major",
                                              NULL, NULL, 1, (const attnsel_backend* const[]){&kOne}};
ATTNSEL_PLUGIN_EXPORT const attnsel_plugin* init_major_mismatch(const attnsel_host* h) { (void)h; return &kMajorMismatch; }

static const attnsel_plugin kMinorNewer = {ATTNSEL_PLUGIN_ABI_MAJOR, ATTNSEL_PLUGIN_ABI_MINOR + 1,
                                           sizeof(attnsel_plugin) + 8, "c-minor", NULL, NULL, 1,
                                           (const attnsel_backend* const[]){&kOne}};
ATTNSEL_PLUGIN_EXPORT const attnsel_plugin* init_minor_newer(const attnsel_host* h) { (void)h; return &kMinorNewer; }

static const attnsel_plugin kTooSmall = {ATTNSEL_PLUGIN_ABI_MAJOR, ATTNSEL_PLUGIN_ABI_MINOR, 12, "c-small", NULL, NULL,
                                         1, (const attnsel_backend* const[]){&kOne}};
ATTNSEL_PLUGIN_EXPORT const attnsel_plugin* init_struct_too_small(const attnsel_host* h) { (void)h; return &kTooSmall; }

static const attnsel_backend kBackendSmall = {.struct_size = 8, .name = "C_SMALL"};
PLUGIN(init_backend_too_small, "c-backend-small", BACKENDS(&kBackendSmall))

/* ---- init failures --------------------------------------------------------------------- */

PLUGIN(init_reports_error, "c-error", .error = "no accelerator driver found (libfancy.so.3 is missing)",
       BACKENDS(&kOne))

ATTNSEL_PLUGIN_EXPORT const attnsel_plugin* init_returns_null(const attnsel_host* h) { (void)h; return NULL; }

PLUGIN(init_no_backends, "c-empty", .num_backends = 0)

/* ---- self-contradicting declarations ---------------------------------------------------- */

static const attnsel_backend kDupA = BACKEND("C_DUP");
static const attnsel_backend kDupB = BACKEND("C_DUP", .features = ATTNSEL_FEATURE_MLA);
PLUGIN(init_duplicate_names, "c-dup", BACKENDS(&kDupA, &kDupB))

static const attnsel_backend kNoDtypes = BACKEND("C_NO_DTYPES", .num_dtypes = 0);
PLUGIN(init_empty_dtypes, "c-no-dtypes", BACKENDS(&kNoDtypes))

static const attnsel_backend kInverted = BACKEND("C_INVERTED", .has_compute_capability_range = 1,
                                                 .min_compute_capability = {9, 0}, .max_compute_capability = {8, 0});
PLUGIN(init_cc_inverted, "c-inverted", BACKENDS(&kInverted))

static const attnsel_backend kContradictions =
    BACKEND("C_CONTRADICTIONS", .num_dtypes = 0, .kv_cache_dtypes = kKvUnknown, .num_kv_cache_dtypes = 2,
            .has_compute_capability_range = 1, .min_compute_capability = {9, 0}, .max_compute_capability = {8, 0},
            .attn_types = 0);
PLUGIN(init_contradictions, "c-contradictions", BACKENDS(&kContradictions))

static const attnsel_backend kBadName = BACKEND("lower-case name");
PLUGIN(init_bad_name, "c-bad-name", BACKENDS(&kBadName))

static int create_only(void* u, const attnsel_plugin_layer_params* p, void** impl, char* e, size_t c) {
  (void)u; (void)p; (void)impl; (void)e; (void)c;
  return ATTNSEL_FAILED;
}
static const attnsel_kernel_ops kPartialOps = {.struct_size = sizeof(attnsel_kernel_ops), .create = create_only};
static const attnsel_backend kPartialKernel = BACKEND("C_PARTIAL_KERNEL", .kernel = &kPartialOps);
PLUGIN(init_partial_kernel, "c-partial-kernel", BACKENDS(&kPartialKernel))

/* A valid backend that asks to be registered, then an invalid one: nothing may remain. */
static const char* const kHalfWayNames[] = {"C_HALF_WAY"};
static const attnsel_backend kHalfWayGood = BACKEND("C_HALF_WAY_GOOD", .register_as = kHalfWayNames,
                                                    .num_register_as = 1);
PLUGIN(init_half_way, "c-half-way", BACKENDS(&kHalfWayGood, &kNoDtypes))

/* ---- availability and registration ------------------------------------------------------ */

static const char* const kUnavailableNames[] = {"C_UNAVAILABLE"};
static const attnsel_backend kUnavailable = BACKEND("C_UNAVAILABLE", .score = score_zero,
                                                    .register_as = kUnavailableNames, .num_register_as = 1);
static const attnsel_backend kAvailable = BACKEND("C_AVAILABLE");
PLUGIN(init_score_zero, "c-score", BACKENDS(&kUnavailable, &kAvailable))

static const char* const kRegisterNames[] = {"C_REG_NEW", "CPU_ATTN"};
static const attnsel_backend kRegister = BACKEND("C_REG", .register_as = kRegisterNames, .num_register_as = 2);
PLUGIN(init_register_as, "c-register", BACKENDS(&kRegister))

static const char* const kRegisterAgainNames[] = {"C_REG_NEW"};
static const attnsel_backend kRegisterAgain = BACKEND("C_REG_AGAIN", .register_as = kRegisterAgainNames,
                                                      .num_register_as = 1);
PLUGIN(init_register_as_again, "c-register-again", BACKENDS(&kRegisterAgain))

/* ---- kernel entry points that fail ---------------------------------------------------- */

#include <stdlib.h>

static int kernel_destroyed = 0;

/* How many kernel instances attnsel destroyed (tests check that none leaks). */
ATTNSEL_PLUGIN_EXPORT int test_plugin_kernels_destroyed(void) { return kernel_destroyed; }

static int failing_create(void* u, const attnsel_plugin_layer_params* p, void** impl, char* e, size_t c) {
  (void)u;
  if (p->head_size == 13) {
    snprintf(e, c, "head size 13 is unlucky");
    return ATTNSEL_FAILED;
  }
  *impl = malloc(16);
  return *impl != NULL ? ATTNSEL_OK : ATTNSEL_FAILED;
}
static void failing_destroy(void* impl) {
  ++kernel_destroyed;
  free(impl);
}
static int failing_write(void* impl, const attnsel_tensor* k, const attnsel_tensor* v, const attnsel_kv_cache* cache,
                         const attnsel_metadata* md, char* e, size_t c) {
  (void)impl; (void)k; (void)v; (void)cache; (void)md; (void)e; (void)c;
  return ATTNSEL_OK;
}
static int failing_forward(void* impl, const attnsel_tensor* q, const attnsel_kv_cache* cache,
                           const attnsel_metadata* md, const attnsel_tensor* out, char* e, size_t c) {
  (void)impl; (void)q; (void)cache; (void)out;
  snprintf(e, c, "device lost after %d sequences", (int)md->num_seqs);
  return ATTNSEL_FAILED;
}
static const attnsel_kernel_ops kFailingOps = {sizeof(attnsel_kernel_ops), failing_create, failing_destroy,
                                               failing_write, failing_forward};
static const attnsel_dtype kFloat32[] = {ATTNSEL_DTYPE_FLOAT32};
static const char* const kKvAutoOnly[] = {"auto"};
static const attnsel_block_size kAnyBlock[] = {{1, 1}};
static const attnsel_backend kFailingKernel = BACKEND("C_FAILING_KERNEL", .dtypes = kFloat32, .num_dtypes = 1,
                                                      .kv_cache_dtypes = kKvAutoOnly, .num_kv_cache_dtypes = 1,
                                                      .block_sizes = kAnyBlock, .kernel = &kFailingOps);
PLUGIN(init_failing_kernel, "c-failing-kernel", BACKENDS(&kFailingKernel))

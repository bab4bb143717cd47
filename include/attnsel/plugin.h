// Layer: core (src/layers.txt)
/* The attnsel plugin ABI: third-party attention backends in shared libraries.
 *
 * C only, so that a plugin built with another compiler, standard library or language
 * loads safely. Nothing crosses this boundary but plain structs, C strings and function
 * pointers: a plugin must never let an exception (or a longjmp) escape a function it
 * exports or declares here; it reports failures through its return values instead.
 *
 * How a plugin is found and used:
 *   1. The host dlopen()s the library and dlsym()s an init function (by default
 *      ATTNSEL_PLUGIN_DEFAULT_SYMBOL; any exported name through "libfoo.so:symbol").
 *   2. It calls init(host) once per (library, symbol) and process. init returns a
 *      description whose first three fields are the ABI major/minor version and the
 *      struct's size; the host checks those before it reads anything else.
 *   3. The description declares one or more backends: a name, capabilities as data,
 *      and optional callbacks (a combination check, a score, kernel entry points).
 *      The host validates every declaration before it registers any of them, so a
 *      plugin loads completely or not at all.
 *
 * Versioning (ONNX Runtime's rule: every struct that crosses starts with its size):
 *   - ATTNSEL_PLUGIN_ABI_MAJOR changes when a struct changes incompatibly; the host
 *     rejects another major version with a message naming both.
 *   - ATTNSEL_PLUGIN_ABI_MINOR grows when fields are appended; the host accepts a plugin
 *     built against its own or any older minor version, and rejects a newer one (it
 *     could not honour fields it does not know). A struct whose struct_size is smaller
 *     than its declared minor version requires is rejected.
 *   - Structs the host passes to the plugin (attnsel_host, attnsel_combination,
 *     attnsel_plugin_layer_params, attnsel_metadata) carry the host's struct_size: a plugin
 *     reads only fields that lie inside it.
 *
 * Lifetime: everything the description points to (strings, arrays, callbacks,
 * user_data) must stay valid and unchanged until the library is unloaded; static
 * storage is the simple way. The host never unloads a library while any backend
 * object or kernel instance created from it is alive. Whatever the host passes to a
 * callback (structs, strings, arrays) is valid only during that call: copy what you keep.
 *
 * Thread-safety: the host calls init under a lock, never concurrently. check_combination
 * and score may be called from any thread, concurrently. A kernel instance's
 * write_kv_cache and forward may be called concurrently on distinct outputs.
 */
#ifndef ATTNSEL_PLUGIN_H
#define ATTNSEL_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ATTNSEL_PLUGIN_ABI_MAJOR 1u
#define ATTNSEL_PLUGIN_ABI_MINOR 0u

/** The init symbol looked up when a library is named without ":symbol". */
#define ATTNSEL_PLUGIN_DEFAULT_SYMBOL "attnsel_plugin_init"

/** Marks a plugin's init function as exported from its shared library. */
#if defined(_WIN32)
#define ATTNSEL_PLUGIN_EXPORT __declspec(dllexport)
#else
#define ATTNSEL_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* ---- enumerations: fixed-width integers, since a C enum's size may differ ---------- */

/** Model (activation) dtype. */
typedef uint32_t attnsel_dtype;
#define ATTNSEL_DTYPE_FLOAT16 0u
#define ATTNSEL_DTYPE_BFLOAT16 1u
#define ATTNSEL_DTYPE_FLOAT32 2u

/** Attention type (vLLM's AttentionType); attn_types masks use ATTNSEL_ATTN_TYPE_BIT. */
typedef uint32_t attnsel_attn_type;
#define ATTNSEL_ATTN_TYPE_DECODER 0u
#define ATTNSEL_ATTN_TYPE_ENCODER 1u
#define ATTNSEL_ATTN_TYPE_ENCODER_ONLY 2u
#define ATTNSEL_ATTN_TYPE_ENCODER_DECODER 3u
#define ATTNSEL_ATTN_TYPE_BIT(t) (1u << (t))

/** KV-cache layouts (vLLM's KVCacheLayout), for the optional preference list. */
typedef uint32_t attnsel_kv_cache_layout;
#define ATTNSEL_KV_LAYOUT_LBHNC 0u
#define ATTNSEL_KV_LAYOUT_LBNHC 1u
#define ATTNSEL_KV_LAYOUT_LHBNC 2u
#define ATTNSEL_KV_LAYOUT_BLHNC 3u
#define ATTNSEL_KV_LAYOUT_BLNHC 4u
#define ATTNSEL_KV_LAYOUT_BHLNC 5u

/** Boolean capabilities: one bit per boolean field of the C++ capability record
 *  (BackendCapabilities, attnsel/capabilities.hpp), named after vLLM's AttentionBackend
 *  predicate; the table of checks (attnsel/capability_checks.hpp) maps each bit. A set bit
 *  is a promise that the backend (and its kernel, when it has one) handles it. */
#define ATTNSEL_FEATURE_MLA (1ull << 0)                   /**< is_mla() */
#define ATTNSEL_FEATURE_SPARSE (1ull << 1)                /**< is_sparse() */
#define ATTNSEL_FEATURE_SINK (1ull << 2)                  /**< supports_sink() */
#define ATTNSEL_FEATURE_MM_PREFIX (1ull << 3)             /**< supports_mm_prefix() */
#define ATTNSEL_FEATURE_SLIDING_WINDOW (1ull << 4)        /**< supports_sliding_window() */
#define ATTNSEL_FEATURE_NON_CAUSAL (1ull << 5)            /**< supports_non_causal() */
#define ATTNSEL_FEATURE_BATCH_INVARIANT (1ull << 6)       /**< supports_batch_invariance() */
#define ATTNSEL_FEATURE_KV_CONNECTOR (1ull << 7)          /**< supports_kv_connector() */
#define ATTNSEL_FEATURE_PCP (1ull << 8)                   /**< supports_pcp() */
#define ATTNSEL_FEATURE_DCP (1ull << 9)                   /**< supports_dcp() */
#define ATTNSEL_FEATURE_NON_CAUSAL_DCP (1ull << 10)       /**< supports_non_causal_dcp() */
#define ATTNSEL_FEATURE_PER_HEAD_QUANT_SCALES (1ull << 11) /**< supports_per_head_quant_scales() */
#define ATTNSEL_FEATURE_ALIBI_SQRT (1ull << 12)           /**< supports_alibi_sqrt() */
#define ATTNSEL_FEATURE_RSWA (1ull << 13)                 /**< supports_rswa() */
#define ATTNSEL_FEATURE_QUERY_LENS_MISMATCH (1ull << 14)  /**< supports_device_cpu_query_lens_mismatch() */
#define ATTNSEL_FEATURE_FORWARD_UPDATES_KV (1ull << 15)   /**< forward_includes_kv_cache_update() */
#define ATTNSEL_FEATURE_ALL_V1_0 ((1ull << 16) - 1)
/** vLLM's defaults for a standard (non-MLA) backend: KV connector, adaptive
 *  verification and a forward that updates the cache are on, everything else off. */
#define ATTNSEL_FEATURE_VLLM_DEFAULTS \
  (ATTNSEL_FEATURE_KV_CONNECTOR | ATTNSEL_FEATURE_QUERY_LENS_MISMATCH | ATTNSEL_FEATURE_FORWARD_UPDATES_KV)

/** Tensor element types (the kernel interface's ScalarType). */
typedef uint32_t attnsel_scalar_type;
#define ATTNSEL_SCALAR_F32 0u
#define ATTNSEL_SCALAR_F16 1u
#define ATTNSEL_SCALAR_BF16 2u
#define ATTNSEL_SCALAR_FP8_E4M3 3u
#define ATTNSEL_SCALAR_FP8_E5M2 4u
#define ATTNSEL_SCALAR_U8 5u
#define ATTNSEL_SCALAR_I32 6u
#define ATTNSEL_SCALAR_I64 7u

typedef uint32_t attnsel_device_kind;
#define ATTNSEL_DEVICE_CPU 0u
#define ATTNSEL_DEVICE_CUDA 1u

/** Callback status: 0 = success; anything else = failure, with a message written. */
#define ATTNSEL_OK 0
#define ATTNSEL_FAILED 1

/* ---- what the host tells the plugin -------------------------------------------------- */

/** Passed to init. */
typedef struct attnsel_host {
  uint32_t abi_major;            /**< the host's ATTNSEL_PLUGIN_ABI_MAJOR */
  uint32_t abi_minor;            /**< the host's ATTNSEL_PLUGIN_ABI_MINOR */
  uint32_t struct_size;          /**< sizeof(attnsel_host) in the host */
  const char* attnsel_version;   /**< e.g. "0.1.0" */
} attnsel_host;

/* ---- capabilities ---------------------------------------------------------------------- */

typedef struct attnsel_compute_capability {
  int32_t major;
  int32_t minor;
} attnsel_compute_capability;

/** One kernel block size rule: exactly `value`, or any multiple of it. */
typedef struct attnsel_block_size {
  int32_t value;            /**< > 0 */
  uint8_t is_multiple_of;   /**< 0: exactly value; 1: MultipleOf(value) */
} attnsel_block_size;

/** The arguments of vLLM's supports_combination. */
typedef struct attnsel_combination {
  uint32_t struct_size;
  int32_t head_size;
  attnsel_dtype dtype;
  const char* kv_cache_dtype;          /**< NULL = not given */
  int32_t block_size;                  /**< valid when has_block_size */
  uint8_t has_block_size;
  uint8_t use_mla;
  uint8_t has_sink;
  uint8_t use_sparse;
  uint8_t use_mm_prefix;
  uint8_t has_device_capability;       /**< 0 on CPU, ROCm, XPU */
  attnsel_compute_capability device_capability;
} attnsel_combination;

/** (optional) A backend-specific joint rule. Returns 0 when the combination works;
 *  otherwise writes a NUL-terminated reason (truncated to `reason_capacity`) and returns
 *  non-zero. */
typedef int (*attnsel_check_combination_fn)(void* user_data, const attnsel_combination* args, char* reason,
                                           size_t reason_capacity);

/** (optional) Whether the backend can run on this machine (llama.cpp's score): 0 = it
 *  cannot, and a NUL-terminated reason is written; any other value = it can. Called
 *  once, when the plugin is loaded. */
typedef uint32_t (*attnsel_score_fn)(void* user_data, char* reason, size_t reason_capacity);

/* ---- kernel interface mirrors ------------------------------------------------------- */

#define ATTNSEL_MAX_DIMS 6

/** A non-owning strided view; strides are in elements. */
typedef struct attnsel_tensor {
  void* data;
  attnsel_scalar_type dtype;
  attnsel_device_kind device;
  int32_t device_index;
  int32_t ndim;
  int64_t shape[ATTNSEL_MAX_DIMS];
  int64_t stride[ATTNSEL_MAX_DIMS];
} attnsel_tensor;

/** The paged cache: key and value views of rank 4, logically
 *  [num_blocks, block_size, num_kv_heads, head_size]; strides give the physical layout. */
typedef struct attnsel_kv_cache {
  attnsel_tensor key;
  attnsel_tensor value;
} attnsel_kv_cache;

/** A batch of sequences in vLLM's flattened form (the kernel interface's AttentionMetadata).
 *  Every array comes with its length. */
typedef struct attnsel_metadata {
  uint32_t struct_size;
  int32_t num_seqs;
  int32_t num_actual_tokens;
  const int32_t* query_start_loc;    /**< [num_seqs + 1] */
  int64_t query_start_loc_len;
  const int32_t* seq_lens;           /**< [num_seqs] */
  int64_t seq_lens_len;
  const int32_t* block_table;        /**< [num_seqs, max_blocks_per_seq] row-major */
  int64_t block_table_len;
  int32_t max_blocks_per_seq;
  const int64_t* slot_mapping;       /**< [num_actual_tokens]; -1 = padding */
  int64_t slot_mapping_len;
  int32_t max_query_len;
  int32_t max_seq_len;
} attnsel_metadata;

/** Per-layer parameters (the kernel interface's LayerParams). Named apart from the C API's
 *  attnsel_layer_params (attnsel/attnsel.h): a program may include both headers. */
typedef struct attnsel_plugin_layer_params {
  uint32_t struct_size;
  int32_t num_heads;
  int32_t num_kv_heads;
  int32_t head_size;
  float scale;
  uint8_t has_sliding_window;
  int32_t sliding_window;            /**< valid when has_sliding_window */
  float logits_soft_cap;             /**< 0 = off */
  const float* alibi_slopes;         /**< NULL/0 = off; else [num_heads] */
  uint32_t num_alibi_slopes;
  const float* sinks;                /**< NULL/0 = off; else [num_heads] */
  uint32_t num_sinks;
  attnsel_attn_type attn_type;
  uint8_t causal;
  const char* kv_cache_dtype;        /**< "auto", "fp8", ... */
  float k_scale;
  float v_scale;
} attnsel_plugin_layer_params;

/** (optional) Kernel entry points. Either every function is set or the pointer to this
 *  struct is NULL. The host validates shapes, dtypes, strides, block tables and slots
 *  before it calls write_kv_cache or forward. Each returns ATTNSEL_OK, or writes a
 *  NUL-terminated message and returns non-zero. */
typedef struct attnsel_kernel_ops {
  uint32_t struct_size;
  /** Builds one layer's kernel instance into *impl. */
  int (*create)(void* user_data, const attnsel_plugin_layer_params* params, void** impl, char* error,
                size_t error_capacity);
  /** Releases an instance made by create. */
  void (*destroy)(void* impl);
  /** key/value: [num_tokens, num_kv_heads, head_size]; writes token i to slot_mapping[i]. */
  int (*write_kv_cache)(void* impl, const attnsel_tensor* key, const attnsel_tensor* value,
                        const attnsel_kv_cache* cache, const attnsel_metadata* metadata, char* error,
                        size_t error_capacity);
  /** query, output: [num_tokens, num_heads, head_size]; output written in place. */
  int (*forward)(void* impl, const attnsel_tensor* query, const attnsel_kv_cache* cache,
                 const attnsel_metadata* metadata, const attnsel_tensor* output, char* error,
                 size_t error_capacity);
} attnsel_kernel_ops;

/* ---- what the plugin declares ---------------------------------------------------------- */

/** One backend. Lists are (pointer, count) pairs. */
typedef struct attnsel_backend {
  uint32_t struct_size;
  /** get_name(): an identifier of A-Z, 0-9 and _ (e.g. "MY_ATTN"); unique in the plugin. */
  const char* name;
  /** (optional) Enum members registered when the plugin loads: an existing member is
   *  overridden (e.g. "CPU_ATTN"), a new name becomes a member (vLLM's register_backend). */
  const char* const* register_as;
  uint32_t num_register_as;
  /** supported_dtypes(): at least one. */
  const attnsel_dtype* dtypes;
  uint32_t num_dtypes;
  /** supported_kv_cache_dtypes(): at least one, each one of vLLM's cache dtype names
   *  ("auto", "float16", "bfloat16", "fp8", ...). */
  const char* const* kv_cache_dtypes;
  uint32_t num_kv_cache_dtypes;
  /** get_supported_kernel_block_sizes(): at least one ({1, 1} = any size). */
  const attnsel_block_size* block_sizes;
  uint32_t num_block_sizes;
  /** get_supported_head_sizes(): empty = any head size. */
  const int32_t* head_sizes;
  uint32_t num_head_sizes;
  /** supported_kv_cache_layouts(), most preferred first: empty = no preference. */
  const attnsel_kv_cache_layout* kv_cache_layouts;
  uint32_t num_kv_cache_layouts;
  /** supports_attn_type(): a non-empty mask of ATTNSEL_ATTN_TYPE_BIT(...). */
  uint32_t attn_types;
  /** ATTNSEL_FEATURE_* bits. */
  uint64_t features;
  /** supports_compute_capability(): when set, the device must have a compute capability
   *  within [min, max] (inclusive); when 0, any device (also ones without one). */
  uint8_t has_compute_capability_range;
  attnsel_compute_capability min_compute_capability;
  attnsel_compute_capability max_compute_capability;
  /** Passed back to every callback of this backend. */
  void* user_data;
  attnsel_check_combination_fn check_combination;   /**< (optional) */
  attnsel_score_fn score;                           /**< (optional) NULL = runs anywhere */
  const attnsel_kernel_ops* kernel;                 /**< (optional) NULL = no kernel */
} attnsel_backend;

/** What init returns. */
typedef struct attnsel_plugin {
  uint32_t abi_major;     /**< ATTNSEL_PLUGIN_ABI_MAJOR the plugin was built against */
  uint32_t abi_minor;     /**< ATTNSEL_PLUGIN_ABI_MINOR the plugin was built against */
  uint32_t struct_size;   /**< sizeof(attnsel_plugin) */
  const char* name;       /**< the plugin's name, for messages */
  const char* version;    /**< the plugin's version, for messages (optional) */
  /** Non-NULL: init failed, this says why; the host loads nothing from the plugin. */
  const char* error;
  uint32_t num_backends;
  const attnsel_backend* const* backends;
} attnsel_plugin;

/** The init function's type. Returns NULL only if it cannot even describe its failure. */
typedef const attnsel_plugin* (*attnsel_plugin_init_fn)(const attnsel_host* host);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* ATTNSEL_PLUGIN_H */

// Layer: capi (src/layers.txt)
/* attnsel's C API: choosing, explaining and running attention backends from C and from
 * any language with a C foreign-function interface (Python's ctypes, Rust, Go, Julia).
 *
 * C99. Nothing crosses this boundary but plain structs, C strings, opaque handles and
 * DLPack tensors (dlpack.h, 0.6 or later), so a program built with another compiler or
 * standard library links safely against libattnsel.so. No C++ exception escapes a
 * function declared here.
 *
 * Errors: a function that can fail returns an attnsel_status. ATTNSEL_STATUS_OK (0) means
 * success; any other value names vLLM's error category (ValueError, ImportError,
 * NotImplementedError, RuntimeError) and attnsel_last_error() returns the message (vLLM's
 * text where vLLM has one) until the same thread's next failing call.
 *
 * Strings: a `char**` out-parameter receives a string the caller owns and releases with
 * attnsel_free_string(). A `const char*` result lives as long as the object it came from.
 *
 * Versioning (the plugin ABI's rule, include/attnsel/plugin.h): ATTNSEL_C_API_MAJOR changes
 * when a declaration changes incompatibly; ATTNSEL_C_API_MINOR grows when functions are
 * added or fields are appended to a struct. Every struct passed in starts with struct_size
 * (set it with the struct's *_init function, which also sets the defaults); the library
 * reads (or, for a struct it fills, writes) only the fields that lie inside it, so a program
 * built against an older minor version keeps working. attnsel_c_api_version() tells which version the library has.
 *
 * Thread-safety: every function may be called from any thread. The registry functions
 * take the registry's lock. A kernel is immutable after creation. A step plan is read by
 * execute/write functions, which may run concurrently on distinct outputs;
 * attnsel_kernel_update_plan changes it and must not overlap them.
 */
#ifndef ATTNSEL_ATTNSEL_H
#define ATTNSEL_ATTNSEL_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ATTNSEL_C_API_MAJOR 2u
#define ATTNSEL_C_API_MINOR 3u

/** Marks the functions libattnsel.so exports. */
#if defined(__GNUC__) || defined(__clang__)
#define ATTNSEL_C_API __attribute__((visibility("default")))
#else
#define ATTNSEL_C_API
#endif

/* ---- errors and versions -------------------------------------------------------------- */

typedef int32_t attnsel_status;
#define ATTNSEL_STATUS_OK 0
#define ATTNSEL_STATUS_VALUE_ERROR 1           /**< vLLM's ValueError (bad input) */
#define ATTNSEL_STATUS_IMPORT_ERROR 2          /**< a class or library could not be loaded */
#define ATTNSEL_STATUS_NOT_IMPLEMENTED_ERROR 3 /**< not available on this platform or build */
#define ATTNSEL_STATUS_RUNTIME_ERROR 4         /**< a run-time condition failed */
#define ATTNSEL_STATUS_INTERNAL_ERROR 5        /**< anything unexpected (out of memory, a bug) */
#define ATTNSEL_STATUS_OS_ERROR 6              /**< a library could not be opened (vLLM catches OSError beside ImportError) */

/** The message of this thread's last failure ("" when none). Valid until the thread's next
 *  failing call. */
ATTNSEL_C_API const char* attnsel_last_error(void);
/** "ValueError", "ImportError", "NotImplementedError", "RuntimeError", "InternalError", or
 *  "OK"; "Unknown" for any other value. */
ATTNSEL_C_API const char* attnsel_status_name(attnsel_status status);
/** (major << 16) | minor of the C API the library implements. */
ATTNSEL_C_API uint32_t attnsel_c_api_version(void);
/** The library's version, e.g. "0.1.0". */
ATTNSEL_C_API const char* attnsel_version(void);
/** Releases a string returned through a `char**` out-parameter (NULL is ignored). */
ATTNSEL_C_API void attnsel_free_string(char* text);

/* ---- selection ------------------------------------------------------------------------ */

/** One layer's selection request: the platform, the engine switches and every argument of
 *  vLLM's get_attn_backend. Strings may be NULL (= the default named beside each field). */
typedef struct attnsel_select_request {
  uint32_t struct_size;
  const char* platform;                /**< "cuda:9.0", "rocm:gfx942", "xpu", "cpu", "other:NAME"; NULL = this host */
  const char* mode;                    /**< "reference" or "runnable"; NULL = the platform's default */
  const char* const* facts;            /**< runtime facts, "NAME=VALUE" each */
  uint32_t num_facts;
  const char* attention_backend;       /**< a member name (any case) or "auto"; NULL = auto */
  const char* attention_config;        /**< vLLM's --attention-config JSON; NULL = none */
  const char* const* backend_per_kind; /**< "KIND=NAME" each (e.g. "sliding_window=TRITON_ATTN") */
  uint32_t num_backend_per_kind;
  int32_t head_size;                   /**< default 128 */
  const char* dtype;                   /**< "float16", "bfloat16", "float32"; NULL = bfloat16 */
  const char* kv_cache_dtype;          /**< NULL = None (not given) */
  int32_t block_size;                  /**< > 0: user-specified; 0 = not given */
  const char* attn_type;               /**< "decoder", "encoder", "encoder_only", "encoder_decoder"; NULL = decoder */
  int32_t num_heads;                   /**< > 0: given; 0 = not given */
  const char* run_cache_dtype;         /**< the run's CacheConfig.cache_dtype; NULL = kv_cache_dtype or "auto" */
  /* The selector flags of C API 2.2, one field each. A flag is on when its field is nonzero or
   * attnsel_select_request_set_flag turned it on; flags added since have no field. */
  uint8_t use_mla;
  uint8_t has_sink;
  uint8_t use_sparse;
  uint8_t use_mm_prefix;
  uint8_t use_per_head_quant_scales;
  uint8_t has_sliding_window;
  uint8_t use_non_causal;              /**< AttentionConfig.use_non_causal */
  uint8_t use_batch_invariant;         /**< VLLM_BATCH_INVARIANT */
  uint8_t use_kv_connector;            /**< a KV-transfer instance */
  uint8_t use_pcp;                     /**< prefill context parallelism (size > 1) */
  uint8_t use_dcp;                     /**< decode context parallelism (size > 1) */
  uint8_t use_adaptive_verification;   /**< speculative decoding with adaptive verification */
  uint8_t use_rswa;                    /**< the model uses R-SWA */
  /** Since C API 2.3: the selector flags turned on by name, bit i for flag i of
   *  attnsel_list_selector_flags. Set it with attnsel_select_request_set_flag. */
  uint64_t flags;
} attnsel_select_request;

/** Zeroes the request, sets struct_size and the defaults (head_size 128). */
ATTNSEL_C_API void attnsel_select_request_init(attnsel_select_request* request);

/** Since C API 2.3. Turns the selector flag `name` (vLLM's AttentionSelectorConfig field name,
 *  e.g. "has_sink", "use_dcp") on (value != 0) or off, whichever flag the library knows,
 *  with or without a field of its own above. VALUE_ERROR naming the valid flags for an
 *  unknown name; the request is then unchanged. */
ATTNSEL_C_API attnsel_status attnsel_select_request_set_flag(attnsel_select_request* request, const char* name,
                                                            int value);

/** Since C API 2.3. The selector flags the library knows, in the order of their bits in
 *  attnsel_select_request.flags: {"flags": [{"name", "cli_flag", "help", "source", "capability"}],
 *  "config_fields": [...]}. "source" is "layer" (get_attn_backend's argument) or "engine"
 *  (an engine setting); "capability" is the capability a backend declares to serve it, as
 *  `attnsel list` names it; "config_fields" is every field of AttentionSelectorConfig in the
 *  order vLLM declares it, the flags vLLM lacks last. As `attnsel select --list-flags --json`
 *  prints it. */
ATTNSEL_C_API attnsel_status attnsel_list_selector_flags(char** out_json);

/** One backend a selection considered. */
typedef struct attnsel_candidate {
  const char* backend;          /**< the enum member's name */
  int32_t priority;             /**< its index in the platform's list (0 = highest) */
  uint8_t valid;
  uint32_t num_reasons;
  const char* const* reasons;   /**< why it was rejected (none when valid) */
} attnsel_candidate;

/** A selection's outcome: a chosen backend, or (attnsel_select failed) the candidates that
 *  were rejected. */
typedef struct attnsel_selection attnsel_selection;

/** vLLM's get_attn_backend on the requested platform. On success *out holds the choice.
 *  When the selection itself fails (no valid backend, an invalid explicit choice), the
 *  status says why, and *out still holds the candidates with their reasons (backend ""),
 *  so the caller can explain the failure; on any other failure *out is NULL. Release *out
 *  with attnsel_selection_destroy. */
ATTNSEL_C_API attnsel_status attnsel_select(const attnsel_select_request* request, attnsel_selection** out);
ATTNSEL_C_API void attnsel_selection_destroy(attnsel_selection* selection);
/** The chosen member's name ("" for a failed selection). */
ATTNSEL_C_API const char* attnsel_selection_backend(const attnsel_selection* selection);
/** The chosen class's qualified name. */
ATTNSEL_C_API const char* attnsel_selection_class(const attnsel_selection* selection);
/** The chosen backend's priority, or -1 for an explicit or routed choice. */
ATTNSEL_C_API int32_t attnsel_selection_priority(const attnsel_selection* selection);
ATTNSEL_C_API uint32_t attnsel_selection_num_candidates(const attnsel_selection* selection);
/** Fills *out with candidate `index`; VALUE_ERROR when index >= the number of candidates. */
ATTNSEL_C_API attnsel_status attnsel_selection_candidate(const attnsel_selection* selection, uint32_t index,
                                                         attnsel_candidate* out);
ATTNSEL_C_API uint32_t attnsel_selection_num_warnings(const attnsel_selection* selection);
/** Warning `index` (vLLM's logged warnings, e.g. a block size that shut out better
 *  backends); NULL when index is out of range. */
ATTNSEL_C_API const char* attnsel_selection_warning(const attnsel_selection* selection, uint32_t index);
/** The selection as `attnsel select --json` prints it: {"backend", "class", "priority",
 *  "platform", "mode", "config", "num_heads", "requested", "candidates", "warnings"}, or for
 *  a failed selection {"error", "error_type", "candidates", "platform", "mode", "config"}. */
ATTNSEL_C_API const char* attnsel_selection_json(const attnsel_selection* selection);

/** attnsel_select as JSON text in one call. *out_json receives the selection's JSON, or the
 *  failure object for every failure whose request could be read ({"error", "error_type",
 *  "candidates", ...}); the status is the same as attnsel_select's. */
ATTNSEL_C_API attnsel_status attnsel_select_json(const attnsel_select_request* request, char** out_json);

/** The reasons (a JSON array of strings; [] = valid) for which `backend` is rejected for the
 *  request's layer on the request's platform: vLLM's validate_configuration, plus in
 *  runnable mode a missing kernel or its gaps. The request's attention_backend is ignored. */
ATTNSEL_C_API attnsel_status attnsel_check_backend(const attnsel_select_request* request, const char* backend,
                                                   char** out_json);

/** Every runtime fact with its value on the request's platform, as the request's engine
 *  settings leave it (its facts and mode applied; the attention config's FlashAttention
 *  version, batch invariance, ... as a selection sees them): {"platform", "facts": [{"name",
 *  "type", "value", "default", "overridden", "from_engine", "doc"}]}, as `attnsel select
 *  --list-facts --json` prints it. */
ATTNSEL_C_API attnsel_status attnsel_list_facts(const attnsel_select_request* request, char** out_json);

/* ---- whole-model plans ------------------------------------------------------------------ */

/** vLLM's engine options for a plan, spelled as on vLLM's command line. */
typedef struct attnsel_plan_request {
  uint32_t struct_size;
  const char* platform;                /**< as in attnsel_select_request; NULL = this host */
  const char* mode;                    /**< NULL = the platform's default */
  const char* const* facts;            /**< "NAME=VALUE" each */
  uint32_t num_facts;
  const char* model_path;              /**< a config.json, or a folder holding one */
  const char* model_json;              /**< config.json's text (used when model_path is NULL);
                                            both NULL = the built-in Llama-3-8B-like model */
  const char* attention_backend;       /**< --attention-backend; NULL = auto */
  const char* attention_config;        /**< --attention-config JSON */
  const char* kv_cache_dtype;          /**< --kv-cache-dtype; NULL = "auto" */
  int32_t block_size;                  /**< --block-size; 0 = not given */
  const char* dtype;                   /**< --dtype; NULL = "auto" */
  int32_t tensor_parallel_size;        /**< default 1 */
  int32_t decode_context_parallel_size;   /**< default 1 */
  int32_t prefill_context_parallel_size;  /**< default 1 */
  const char* kv_transfer_config;      /**< --kv-transfer-config JSON */
  const char* kv_cache_layout;         /**< --kv-cache-layout ("NHD", "HND", ...) */
  uint8_t batch_invariant;             /**< VLLM_BATCH_INVARIANT */
} attnsel_plan_request;

ATTNSEL_C_API void attnsel_plan_request_init(attnsel_plan_request* request);

/** The plan of every layer as `attnsel plan --json` prints it. On failure *out_json holds
 *  {"error", "error_type", "plan"} (the partial plan, or null) whenever the model and the
 *  options could be read. */
ATTNSEL_C_API attnsel_status attnsel_plan_json(const attnsel_plan_request* request, char** out_json);

/* ---- the registry (vLLM's AttentionBackendEnum / MambaAttentionBackendEnum) ------------ */

typedef uint32_t attnsel_enum;
#define ATTNSEL_ENUM_ATTENTION 0u /**< AttentionBackendEnum */
#define ATTNSEL_ENUM_MAMBA 1u     /**< MambaAttentionBackendEnum */

/** The members, in declaration order, dynamic ones included: a JSON array of {"name",
 *  "value" (the default class path, null for CUSTOM), "overridden"}. */
ATTNSEL_C_API attnsel_status attnsel_enum_members(attnsel_enum which, char** out_json);
/** Every member of both enums with its class and capabilities on `platform` (NULL = this
 *  host), as `attnsel list --json` prints it. */
ATTNSEL_C_API attnsel_status attnsel_list_backends(const char* platform, const char* mode, char** out_json);
/** vLLM's Enum[name] (exact): VALUE_ERROR "Unknown attention backend: 'X'. Valid options
 *  are: ..." when there is no such member. */
ATTNSEL_C_API attnsel_status attnsel_member_check(attnsel_enum which, const char* name);
/** get_path(include_classname): the override or default class path; VALUE_ERROR "Backend X
 *  must be registered before use. ..." when there is none. */
ATTNSEL_C_API attnsel_status attnsel_member_get_path(attnsel_enum which, const char* name, int include_classname,
                                                     char** out_path);
/** get_class(): resolves get_path() through the class table and the plugin loader.
 *  *out_json receives {"name" (get_name()), "class" (the qualified name), "is_ssm", and for
 *  attention classes "is_mla", "is_sparse", "has_kernel"}. IMPORT_ERROR when it cannot. */
ATTNSEL_C_API attnsel_status attnsel_member_get_class(attnsel_enum which, const char* name, char** out_json);
ATTNSEL_C_API attnsel_status attnsel_member_is_overridden(attnsel_enum which, const char* name, int* out);
ATTNSEL_C_API attnsel_status attnsel_member_clear_override(attnsel_enum which, const char* name);
/** vLLM's register_backend(backend, class_path): an existing member is overridden (last
 *  writer wins); a new name becomes a member of `which` first (an upper-case identifier).
 *  class_path is a class's qualified name, or "libfoo.so:symbol" for a plugin's backend. */
ATTNSEL_C_API attnsel_status attnsel_register_backend(attnsel_enum which, const char* name, const char* class_path);
/** vLLM's AttentionBackendEnum.register(name, value) classmethod (MambaAttentionBackendEnum's
 *  for ATTNSEL_ENUM_MAMBA): a new member `name` whose value is `value`, with no override.
 *  VALUE_ERROR "Backend X already exists in AttentionBackendEnum. Use
 *  register_backend(AttentionBackendEnum.X, 'value') to override." when the name exists, and
 *  "Invalid or reserved backend name: X" for a name vLLM refuses. (C API 2.1) */
ATTNSEL_C_API attnsel_status attnsel_register_member(attnsel_enum which, const char* name, const char* value);

/** vLLM's get_mamba_attn_backend: the class of the MambaAttentionBackendEnum member
 *  `mamba_type` (its exact name), as attnsel_member_get_class returns it. VALUE_ERROR for an
 *  unknown name and for an unregistered CUSTOM ("Backend CUSTOM must be registered before
 *  use. ..."); IMPORT_ERROR when the class cannot be loaded; RUNTIME_ERROR "VLLM
 *  batch_invariant mode is not supported for <NAME>." when batch_invariant
 *  (VLLM_BATCH_INVARIANT) is set and the class does not support it. (C API 2.1) */
ATTNSEL_C_API attnsel_status attnsel_get_mamba_attn_backend(const char* mamba_type, int batch_invariant,
                                                            char** out_json);

/* ---- plugins ----------------------------------------------------------------------------- */

/** Loads a plugin ("path", "path:symbol", or a bare file name found in the plugin search
 *  path) and registers its backends; loading the same one again is a no-op. *out_json
 *  (optional, may be NULL) receives {"library", "symbol", "name", "version", "backends":
 *  [{"name", "qualname", "available", "unavailable_reason", "has_kernel",
 *  "registered_as"}]}. IMPORT_ERROR when it cannot be loaded. */
ATTNSEL_C_API attnsel_status attnsel_load_plugin(const char* spec, char** out_json);
/** Every plugin loaded so far, a JSON array of the objects attnsel_load_plugin returns. */
ATTNSEL_C_API attnsel_status attnsel_loaded_plugins(char** out_json);

/* ---- kernels: create, ask, plan a step, execute a layer ------------------------------------
 *
 * The shape of an inference engine's step (vLLM's AttentionMetadataBuilder, FlashInfer's
 * plan/run; docs/STEP_PLAN.md). A step plan is built once per step and KV-cache group (the
 * layers that share a backend, their heads, head size, window and causality, and their cache
 * geometry): every check of the batch, the work split, the workspace and the upload of the
 * batch description happen there. Then every layer of the group writes its new keys and
 * values and executes against the plan: these check only the layer's tensors against the
 * plan and launch on the caller's stream, with no allocation, synchronisation, pageable copy
 * or logging. The next step updates the plan in place (attnsel_kernel_update_plan).
 *
 *   attnsel_kernel_plan(layer[0], &batch, key_cache[0], value_cache[0], dtype, &opts, s, &plan);
 *   for each layer l:
 *     attnsel_kernel_write_kv_cache(layer[l], plan, key[l], value[l], key_cache[l], value_cache[l], s);
 *     attnsel_kernel_execute(layer[l], plan, query[l], key_cache[l], value_cache[l], output[l], NULL, s);
 *   attnsel_kernel_update_plan(layer[0], plan, &next_batch, s);   (next step: same buffers)
 *
 * or, one call per layer (the write and the attention together, fused into one launch by the
 * CUDA kernels for decode batches; attnsel_kernel_execute_append):
 *     attnsel_kernel_execute_append(layer[l], plan, query[l], key[l], value[l], key_cache[l],
 *                                   value_cache[l], output[l], NULL, s);
 *
 * Tensors are DLPack DLTensors (from any framework's __dlpack__ / to_dlpack) where the kernel
 * wants them (attnsel_kernel_info: host memory for CPU kernels, device memory for CUDA ones).
 * Shapes:
 *   query, output:          [num_tokens, num_heads, head_size]
 *   key, value:             [num_tokens, num_kv_heads, head_size]
 *   key_cache, value_cache: [num_blocks, block_size, num_kv_heads, head_size] in logical
 *                           order; strides give the physical layout (NHD, HND, ...).
 *   lse:                    [num_tokens, num_heads] float32
 * The batch description (attnsel_batch) is always in host memory; the plan copies it. */

/** Where device work runs: a cudaStream_t. NULL = CUDA's legacy default stream, used only
 *  when passed. Ignored by CPU kernels, which run on the calling thread (and its OpenMP team)
 *  and return when done. */
typedef void* attnsel_stream;

/** One layer's parameters (the kernel interface's LayerParams). */
typedef struct attnsel_layer_params {
  uint32_t struct_size;
  int32_t num_heads;
  int32_t num_kv_heads;
  int32_t head_size;
  float scale;                   /**< softmax scale; 0 = 1 / sqrt(head_size) */
  int32_t sliding_window;        /**< window in tokens; 0 = full attention */
  float logits_soft_cap;         /**< 0 = off */
  const float* alibi_slopes;     /**< NULL = off; else [num_heads] */
  uint32_t num_alibi_slopes;
  const float* sinks;            /**< NULL = off; else [num_heads] sink logits */
  uint32_t num_sinks;
  const char* attn_type;         /**< NULL = "decoder" */
  uint8_t causal;                /**< default 1 (decoder self-attention is causal) */
  const char* kv_cache_dtype;    /**< "auto", "fp8", "fp8_e4m3", "fp8_e5m2"; NULL = "auto" */
  float k_scale;                 /**< fp8 caches: dequantisation scale, default 1 */
  float v_scale;
  const float* k_scales;         /**< NULL = k_scale for every head; else [num_kv_heads] */
  uint32_t num_k_scales;
  const float* v_scales;
  uint32_t num_v_scales;
  uint8_t batch_invariant;       /**< VLLM_BATCH_INVARIANT */
} attnsel_layer_params;

ATTNSEL_C_API void attnsel_layer_params_init(attnsel_layer_params* params);

/** One step's batch in vLLM's flattened form, in host memory. */
typedef struct attnsel_batch {
  uint32_t struct_size;
  int32_t num_seqs;
  const int32_t* query_start_loc;  /**< [num_seqs + 1]: prefix sums of the query lengths */
  const int32_t* seq_lens;         /**< [num_seqs]: context lengths, new tokens included */
  const int32_t* block_table;      /**< [num_seqs * max_blocks_per_seq], row-major */
  int32_t max_blocks_per_seq;
  const int64_t* slot_mapping;     /**< [query_start_loc[num_seqs]]: each new token's cache slot
                                        (-1 = skip); NULL = none (the plan cannot write the cache) */
} attnsel_batch;

ATTNSEL_C_API void attnsel_batch_init(attnsel_batch* batch);

/** How a step plan is built (the kernel interface's PlanOptions). */
typedef struct attnsel_plan_options {
  uint32_t struct_size;
  /** Build into persistent buffers for CUDA-graph capture (kernels whose graph support is
   *  UNIFORM_BATCH or better): the plan's device pointers and launch shapes never change and
   *  attnsel_kernel_update_plan rewrites only their contents, so a step captured once replays
   *  for every later batch of the same shape (number of sequences, query lengths). Refused
   *  (VALUE_ERROR) by kernels whose graph support is NEVER. */
  uint8_t graph_capturable;
  /** Capturable plans: the block-table rows the buffers hold (0 = the first batch's
   *  max_blocks_per_seq); later batches may use up to this many blocks per sequence. */
  int32_t max_blocks_per_seq;
  /** Let attnsel_kernel_execute write each row's log-sum-exp (attnsel_kernel_info.lse_output);
   *  NOT_IMPLEMENTED_ERROR from kernels that cannot. */
  uint8_t lse;
  /** Executes with new keys and values may read the cache positions before the step's new
   *  tokens while the kernel ahead of them is still running (PlanOptions::early_cache_reads):
   *  set it only when nothing still running then writes those positions, as for the layers
   *  of one step whose steps are separated by attnsel_kernel_update_plan. */
  uint8_t early_cache_reads;
} attnsel_plan_options;

/** Zeroes the options and sets struct_size (defaults: not capturable, no log-sum-exp). */
ATTNSEL_C_API void attnsel_plan_options_init(attnsel_plan_options* options);

/** How far a kernel's launches can be captured in a CUDA graph and replayed with new batch
 *  contents (vLLM's AttentionCGSupport; weakest first). */
#define ATTNSEL_GRAPH_SUPPORT_NEVER 0                       /**< no capture (host kernels) */
#define ATTNSEL_GRAPH_SUPPORT_UNIFORM_SINGLE_TOKEN_DECODE 1 /**< batches of one query token per sequence */
#define ATTNSEL_GRAPH_SUPPORT_UNIFORM_BATCH 2               /**< batches of one fixed shape */
#define ATTNSEL_GRAPH_SUPPORT_ALWAYS 3                      /**< any batch */

/** What a kernel needs and offers: callers ask this rather than match backend names. */
typedef struct attnsel_kernel_info {
  uint32_t struct_size;          /**< set by attnsel_kernel_info_init; the library fills only the fields inside it */
  uint8_t available;             /**< a kernel exists in this build and can run on this host */
  int32_t device_type;           /**< where its tensors live: kDLCPU or kDLCUDA */
  const char* isa;               /**< the instruction set or device it runs, e.g. "AVX3+BF16", "CUDA sm_90a" */
  int32_t graph_support;         /**< ATTNSEL_GRAPH_SUPPORT_* */
  const char* graph_support_name; /**< "never", "uniform_single_token_decode", "uniform_batch", "always" */
  const char* preferred_layout;  /**< the cache layout its loads are tuned for (vLLM's KVCacheLayout
                                      name, e.g. "LBNHC" = NHD); NULL = no preference */
  uint8_t lse_output;            /**< attnsel_kernel_execute can write the log-sum-exp */
  uint8_t lse_prefill;           /**< ...of every batch; 0 with lse_output: decode batches only (an execute
                                      with lse of a batch with prefill sequences is refused) */
} attnsel_kernel_info;

/** Zeroes the struct and sets struct_size. */
ATTNSEL_C_API void attnsel_kernel_info_init(attnsel_kernel_info* info);

typedef struct attnsel_kernel attnsel_kernel;
typedef struct attnsel_step_plan attnsel_step_plan;

/** The kernel of `backend` (a member name, any case, e.g. "CPU_ATTN", "FLASH_ATTN", or a
 *  plugin's) for one layer. NOT_IMPLEMENTED_ERROR when the backend has no kernel in this
 *  build or on this machine, VALUE_ERROR for parameters it does not compute. */
ATTNSEL_C_API attnsel_status attnsel_kernel_create(const char* backend, const attnsel_layer_params* params,
                                                   attnsel_kernel** out);
ATTNSEL_C_API void attnsel_kernel_destroy(attnsel_kernel* kernel);

/** The kernel's device, ISA, graph support, preferred cache layout and log-sum-exp support.
 *  The strings live as long as the kernel. */
ATTNSEL_C_API attnsel_status attnsel_kernel_get_info(const attnsel_kernel* kernel, attnsel_kernel_info* out);

/** The same, asked of a backend before any kernel is made: `backend` as in
 *  attnsel_kernel_create, `dtype` the activations' ("bfloat16", "float16", "float32"; NULL =
 *  "bfloat16"), `kv_cache_dtype` as in attnsel_layer_params (NULL = "auto"). A backend
 *  without a kernel here reports available = 0. The strings live until the process ends. */
ATTNSEL_C_API attnsel_status attnsel_backend_get_kernel_info(const char* backend, const char* dtype,
                                                             const char* kv_cache_dtype, attnsel_kernel_info* out);

/** Builds a step's plan for the KV-cache group of `kernel`'s layer: checks the batch against
 *  the group's cache geometry (key_cache/value_cache: any layer's cache of the group; their
 *  data is not read and their pointers are not kept) and the activation dtype (of query and
 *  output), splits the work, sizes the workspace and uploads the batch description on
 *  `stream`. options NULL = the defaults. The plan owns its workspace; it serves every layer
 *  of the group (VALUE_ERROR for a layer, tensor or cache of another shape) and must outlive
 *  the device work it was used for. Executes of one plan run in the order of one stream. */
ATTNSEL_C_API attnsel_status attnsel_kernel_plan(const attnsel_kernel* kernel, const attnsel_batch* batch,
                                                 const DLTensor* key_cache, const DLTensor* value_cache,
                                                 DLDataType dtype, const attnsel_plan_options* options,
                                                 attnsel_stream stream, attnsel_step_plan** out);

/** Rebuilds `plan` for the next step's batch in place, reusing its buffers (for graph replays:
 *  no allocation while they fit). A graph-capturable plan keeps every pointer and launch shape
 *  and so needs the batch shape it was built for (same num_seqs and query lengths, at most its
 *  max_blocks_per_seq); anything else is a VALUE_ERROR and leaves the plan as it was. Issue it
 *  on the stream that executes the plan. `kernel` is any layer of the plan's group. */
ATTNSEL_C_API attnsel_status attnsel_kernel_update_plan(const attnsel_kernel* kernel, attnsel_step_plan* plan,
                                                        const attnsel_batch* batch, attnsel_stream stream);

ATTNSEL_C_API void attnsel_step_plan_destroy(attnsel_step_plan* plan);
/** Bytes of memory the plan owns (batch description and workspace, host and device). */
ATTNSEL_C_API uint64_t attnsel_step_plan_workspace_bytes(const attnsel_step_plan* plan);
/** 1 when some of the plan's outputs multiply fp8 (e4m3) queries and probabilities
 *  (FLASH_ATTN's Hopper prefill on an fp8 cache, as FlashAttention-3 runs it with a quantised
 *  query): their error is an fp8 query's, not only the cache's. 0 otherwise, and for NULL. */
ATTNSEL_C_API int attnsel_step_plan_fp8_queries(const attnsel_step_plan* plan);

/** Writes the step's new keys and values into the layer's paged cache at the plan's slot
 *  mapping (vLLM's reshape_and_cache), on `stream`. */
ATTNSEL_C_API attnsel_status attnsel_kernel_write_kv_cache(const attnsel_kernel* kernel, const attnsel_step_plan* plan,
                                                           const DLTensor* key, const DLTensor* value,
                                                           const DLTensor* key_cache, const DLTensor* value_cache,
                                                           attnsel_stream stream);

/** Attention of the step's queries against the layer's paged cache, on `stream`; the first
 *  query_start_loc[num_seqs] rows of `output` are written (the rest are left untouched).
 *  `lse` (NULL = none) receives each row's natural-log softmax denominator (sinks included,
 *  -inf for a row that sees no key) and needs a plan built with attnsel_plan_options.lse.
 *  The layer's tensors are checked against the plan (dtype, shape, strides, device) before
 *  any is read. */
ATTNSEL_C_API attnsel_status attnsel_kernel_execute(const attnsel_kernel* kernel, const attnsel_step_plan* plan,
                                                    const DLTensor* query, const DLTensor* key_cache,
                                                    const DLTensor* value_cache, const DLTensor* output,
                                                    const DLTensor* lse, attnsel_stream stream);

/** attnsel_kernel_write_kv_cache and then attnsel_kernel_execute, in one call: the step's new
 *  keys and values (`key`, `value`) are written to the plan's slot mapping (slot -1 skipped;
 *  an fp8 cache stores them quantised) and the queries attend over the cache with them. The
 *  result is that of the two calls. FLASH_ATTN's CUDA kernels do both in the decode launch
 *  when every sequence is a decode sequence, every slot is -1 or its token's position in the
 *  block table and no such block is read through another block-table entry; otherwise, and
 *  on the CPU, the write runs first. Needs a plan whose
 *  batch has a slot_mapping; every tensor is checked against the plan before any is read
 *  (an error names the tensor). */
ATTNSEL_C_API attnsel_status attnsel_kernel_execute_append(const attnsel_kernel* kernel, const attnsel_step_plan* plan,
                                                           const DLTensor* query, const DLTensor* key,
                                                           const DLTensor* value, const DLTensor* key_cache,
                                                           const DLTensor* value_cache, const DLTensor* output,
                                                           const DLTensor* lse, attnsel_stream stream);

/* ---- MLA kernels: multi-head latent attention (C API 2.2) ------------------------------
 *
 * DeepSeek-V2/V3 and Kimi-K2 layers (include/attnsel/mla.hpp), in the same step shape as the
 * kernels above: one plan per step for the layers that share a cache geometry, then per
 * layer the cache write (vLLM's concat_and_cache_mla) and the layer's attention
 * (MLACommonImpl.forward without the write), on the caller's stream:
 *
 *   attnsel_mla_kernel_plan(layer[0], &batch, cache[0], &opts, s, &plan);
 *   for each layer l:
 *     attnsel_mla_kernel_write_cache(layer[l], plan, kv_c[l], k_pe[l], cache[l], s);
 *     attnsel_mla_kernel_execute(layer[l], plan, q[l], kv_c[l], k_pe[l], cache[l], output[l], s);
 *   attnsel_mla_kernel_update_plan(layer[0], plan, &next_batch, s);   (next step)
 *
 * A batch puts its decode requests (at most attnsel_mla_plan_options.decode_query_len query
 * tokens each) first: they take the absorbed decode (q_nope · W_UK, attention over the latent
 * cache, then · W_UV); the first request with more query tokens, and every one after it, take
 * the prefill path (192/128 attention over the new tokens, merged with their cached context).
 * Shapes (N = num_heads, Dl = kv_lora_rank, Dr = qk_rope_head_dim, Dn = qk_nope_head_dim,
 * Dv = v_head_dim):
 *   q:          [num_tokens, N, Dn + Dr]  ([q_nope | q_pe], rope last)
 *   kv_c, k_pe: [num_tokens, Dl] and [num_tokens, Dr]: the new tokens' latent and rope key
 *               (they may be slices of one [num_tokens, Dl + Dr] tensor)
 *   cache:      [num_blocks, block_size, Dl + Dr]
 *   output:     [num_tokens, N, Dv]
 *   q_latent, out, lse of decode_latent: [decode tokens, N, Dl + Dr], [decode tokens, N, Dl],
 *               [decode tokens, N] float32
 * Every tensor is checked against the plan (dtype, shape, device, unit stride in the last
 * dimension, no negative stride, a written tensor whose elements share memory or that
 * overlaps an input) before any memory is touched; the batch against the cache in plan and
 * update (every used block id inside the cache, every slot -1 or inside it). Errors are
 * VALUE_ERRORs naming the argument. A plan of these functions serves only MLA kernels (the
 * standard ones refuse it, and the other way round); attnsel_step_plan_destroy and
 * attnsel_step_plan_workspace_bytes serve both. */

/** One MLA layer's parameters (the kernel interface's MlaLayerParams). */
typedef struct attnsel_mla_layer_params {
  uint32_t struct_size;
  int32_t num_heads;            /**< query heads on this rank (the model's divided by the TP size) */
  int32_t kv_lora_rank;         /**< default 512 */
  int32_t qk_rope_head_dim;     /**< default 64 */
  int32_t qk_nope_head_dim;     /**< default 128 */
  int32_t v_head_dim;           /**< default 128 */
  float scale;                  /**< softmax scale, yarn mscale² included; 0 = (qk_nope + qk_rope)^-0.5 */
  const char* dtype;            /**< activations: "bfloat16", "float16", "float32"; NULL = kv_b_proj's, else bfloat16 */
  const char* kv_cache_dtype;   /**< "auto", "bfloat16", "float16", "fp8", "fp8_e4m3"; NULL = "auto" */
  float k_scale;                /**< fp8 caches: stored = e4m3(x / k_scale), finite and > 0; default 1 */
  uint8_t batch_invariant;      /**< VLLM_BATCH_INVARIANT */
  /** kv_b_proj.weight for this rank's heads, [N · (Dn + Dv), Dl] (head n's Dn key rows, then
   *  its Dv value rows), of the activation dtype, where the kernel runs. Read when the kernel
   *  is made (W_UK and W_UV are derived from it) and not kept. NULL: a layer that runs
   *  attnsel_mla_kernel_decode_latent only. */
  const DLTensor* kv_b_proj;
} attnsel_mla_layer_params;

/** Zeroes the parameters, sets struct_size and DeepSeek's dimensions, k_scale 1. */
ATTNSEL_C_API void attnsel_mla_layer_params_init(attnsel_mla_layer_params* params);

/** How an MLA step plan is built (the kernel interface's MlaPlanOptions). */
typedef struct attnsel_mla_plan_options {
  uint32_t struct_size;
  uint8_t graph_capturable;        /**< fixed buffers and launch shapes (VALUE_ERROR from host kernels) */
  int32_t max_blocks_per_seq;      /**< capturable plans: block-table rows held (0 = the first batch's) */
  int32_t decode_query_len;        /**< vLLM's reorder_batch_threshold; default 1, at most the kernel's limit */
  uint8_t lse;                     /**< attnsel_mla_kernel_decode_latent may write the log-sum-exp */
  int64_t context_chunk_tokens;    /**< cached-context rows read per prefill chunk; 0 = the kernel's default */
} attnsel_mla_plan_options;

ATTNSEL_C_API void attnsel_mla_plan_options_init(attnsel_mla_plan_options* options);

/** What an MLA plan's batch holds. */
typedef struct attnsel_mla_step_summary {
  uint32_t struct_size;
  int32_t num_decodes;          /**< decode requests (the head of the batch) */
  int32_t num_decode_tokens;    /**< their query tokens: the rows of decode_latent */
  int32_t num_prefills;
  int32_t num_prefill_tokens;
  int32_t context_chunks;       /**< chunks the prefills' cached context is read in */
} attnsel_mla_step_summary;

ATTNSEL_C_API void attnsel_mla_step_summary_init(attnsel_mla_step_summary* summary);

typedef struct attnsel_mla_kernel attnsel_mla_kernel;

/** The MLA kernel of `backend` (a member name, any case, e.g. "CPU_MLA"; with a selection,
 *  attnsel_selection_backend's) for one layer. NOT_IMPLEMENTED_ERROR when the backend has no
 *  MLA kernel in this build or on this machine, VALUE_ERROR naming the field for parameters
 *  it does not compute (a head count beyond its limit, dimensions it lacks, a cache dtype it
 *  does not store, an fp8 k_scale that is 0, negative or not finite, a kv_b_proj of another
 *  shape or dtype). */
ATTNSEL_C_API attnsel_status attnsel_mla_kernel_create(const char* backend, const attnsel_mla_layer_params* params,
                                                       attnsel_mla_kernel** out);
ATTNSEL_C_API void attnsel_mla_kernel_destroy(attnsel_mla_kernel* kernel);
/** The kernel's device, ISA, graph support and log-sum-exp support (decode_latent's). */
ATTNSEL_C_API attnsel_status attnsel_mla_kernel_get_info(const attnsel_mla_kernel* kernel, attnsel_kernel_info* out);
/** The most query tokens a decode request may have, and the most heads. */
ATTNSEL_C_API attnsel_status attnsel_mla_kernel_limits(const attnsel_mla_kernel* kernel,
                                                       int32_t* max_decode_query_len, int32_t* max_heads);

/** Builds a step's plan: checks the batch against the cache geometry (`cache`: any layer's
 *  cache of the group; its data is not read), splits decodes and prefills and the work.
 *  options NULL = the defaults. */
ATTNSEL_C_API attnsel_status attnsel_mla_kernel_plan(const attnsel_mla_kernel* kernel, const attnsel_batch* batch,
                                                     const DLTensor* cache, const attnsel_mla_plan_options* options,
                                                     attnsel_stream stream, attnsel_step_plan** out);
/** Rebuilds `plan` for the next step's batch in place (a VALUE_ERROR leaves it as it was). */
ATTNSEL_C_API attnsel_status attnsel_mla_kernel_update_plan(const attnsel_mla_kernel* kernel, attnsel_step_plan* plan,
                                                            const attnsel_batch* batch, attnsel_stream stream);
/** The decode/prefill split of an MLA plan (VALUE_ERROR for another kind of plan). */
ATTNSEL_C_API attnsel_status attnsel_mla_step_plan_summary(const attnsel_step_plan* plan,
                                                           attnsel_mla_step_summary* out);

/** vLLM's concat_and_cache_mla at the plan's slot mapping: token t writes kv_c[t] then
 *  k_pe[t] to its slot (fp8 caches: e4m3(x / k_scale)); slot -1 is skipped. Needs a plan whose
 *  batch has a slot_mapping. */
ATTNSEL_C_API attnsel_status attnsel_mla_kernel_write_cache(const attnsel_mla_kernel* kernel,
                                                            const attnsel_step_plan* plan, const DLTensor* kv_c,
                                                            const DLTensor* k_pe, const DLTensor* cache,
                                                            attnsel_stream stream);
/** The layer's attention over the plan's batch, the cache already written; the first
 *  query_start_loc[num_seqs] rows of `output` are written. Needs a kernel made with kv_b_proj. */
ATTNSEL_C_API attnsel_status attnsel_mla_kernel_execute(const attnsel_mla_kernel* kernel, const attnsel_step_plan* plan,
                                                        const DLTensor* q, const DLTensor* kv_c, const DLTensor* k_pe,
                                                        const DLTensor* cache, const DLTensor* output,
                                                        attnsel_stream stream);
/** The absorbed decode kernel alone over the plan's decode requests (FlashMLA's
 *  flash_mla_with_kvcache): q_latent (W_UK applied, rope last) → out, and `lse` (NULL = none;
 *  natural log, -inf for a row that sees no key; needs a plan built with lse). */
ATTNSEL_C_API attnsel_status attnsel_mla_kernel_decode_latent(const attnsel_mla_kernel* kernel,
                                                              const attnsel_step_plan* plan, const DLTensor* q_latent,
                                                              const DLTensor* cache, const DLTensor* out,
                                                              const DLTensor* lse, attnsel_stream stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ATTNSEL_ATTNSEL_H */

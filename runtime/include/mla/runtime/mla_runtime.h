/*===- mla_runtime.h - The C API of the mla runtime ------------------------===*
 *
 * A stable C interface over the C++ runtime (mla::rt) for embedding: open a
 * device, load a package, query and launch its kernel with caller-owned
 * buffers and streams, and manage KV-cache pages. Pure C (C99 or newer, or
 * C++); link with the mla_runtime library and the C++ standard library.
 *
 * Conventions
 *  - Every fallible function returns an mla_status. MLA_OK is 0. After each
 *    call that returns an mla_status, mla_last_error() on the same thread
 *    holds its message: "" on success, otherwise one line that names the
 *    offending argument, file or manifest line. The message is thread-local:
 *    calls on other threads never change it.
 *  - Output pointers ("out") are written only on success.
 *  - Handles are opaque. A NULL handle is an MLA_ERROR_INVALID_ARGUMENT
 *    error; the *_close / *_destroy functions accept NULL and do nothing.
 *  - No function throws, aborts or prints.
 *
 * Ownership
 *  - The caller owns every tensor buffer, stream and caller workspace it
 *    passes; the runtime never frees them and keeps no pointer to them after
 *    the call returns (on a GPU the enqueued work reads them until it runs:
 *    keep them alive until the stream has passed the launch).
 *  - Each *_open / *_load / *_create function returns a handle the caller
 *    releases with the matching *_close / *_destroy, exactly once.
 *  - A kernel keeps what it needs of its device and package: the package may
 *    be closed right after mla_kernel_load, the device before its kernels.
 *  - Strings returned by the query functions belong to the handle they came
 *    from and stay valid until it is closed; mla_last_error()'s string stays
 *    valid until the next mla_* call on the same thread.
 *  - The runtime allocates: host memory for handles; device memory only in
 *    mla_kernel_reserve_workspace (GPU devices) and, on the host device, a
 *    pooled workspace buffer on a launch that needs one and has none (kept
 *    for reuse until the kernel is closed). GPU launches never allocate.
 *
 * Threading
 *  - mla_device and mla_kernel handles may be used from several threads at
 *    once (launches included), as may a mla_package (read-only after load).
 *    Concurrent GPU launches on different streams need their own
 *    mla_launch_options.workspace (the reserved workspace is one buffer).
 *  - Closing a handle must not race with its use.
 *  - mla_page_pool is not synchronized: guard it with your own lock.
 *
 *===----------------------------------------------------------------------===*/

#ifndef MLA_RUNTIME_MLA_RUNTIME_H
#define MLA_RUNTIME_MLA_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version of this API: MAJOR changes break source or binary compatibility
 * (it is the shared library's SONAME version, libmla_runtime.so.MAJOR);
 * MINOR adds functions. 1.1 added the kind table (mla_num_kinds, ...),
 * mla_kernel_output_shape, mla_convert and mla_device_uses_host_memory. */
#define MLA_RUNTIME_VERSION_MAJOR 1
#define MLA_RUNTIME_VERSION_MINOR 1
#define MLA_RUNTIME_VERSION_PATCH 0

/* Most dims a tensor of the C API has. */
#define MLA_MAX_RANK 8

/* A dynamic ('?') dim in mla_arg_info.dims. */
#define MLA_DYNAMIC_DIM (-1)

typedef enum mla_status {
  MLA_OK = 0,
  /* An API or launch argument is wrong; the message names it. */
  MLA_ERROR_INVALID_ARGUMENT = 1,
  /* A package is malformed, truncated, corrupted or of another version. */
  MLA_ERROR_INVALID_PACKAGE = 2,
  /* A package's manifest is malformed ("manifest line N: ..."). */
  MLA_ERROR_INVALID_MANIFEST = 3,
  /* A well-formed request this runtime, build or device cannot serve (no
   * CUDA driver, no target for the device, a decode launcher on a merge
   * kernel, ...). */
  MLA_ERROR_UNSUPPORTED = 4,
  /* A file could not be read (the message starts with the path). */
  MLA_ERROR_IO = 5,
  /* The device backend failed (loading code, allocating, launching). */
  MLA_ERROR_BACKEND = 6,
  /* The runtime ran out of host memory or hit an internal error. */
  MLA_ERROR_INTERNAL = 7
} mla_status;

typedef enum mla_dtype {
  MLA_DTYPE_BF16 = 0,
  MLA_DTYPE_F16 = 1,
  MLA_DTYPE_F32 = 2,
  MLA_DTYPE_I32 = 3,
  MLA_DTYPE_I64 = 4
} mla_dtype;

/* Opaque handles. */
typedef struct mla_device mla_device;
typedef struct mla_package mla_package;
typedef struct mla_kernel mla_kernel;
typedef struct mla_page_pool mla_page_pool;

/* ---- Errors and versions --------------------------------------------- */

/* The message of this thread's most recent mla_status-returning call ("" if
 * it succeeded or there was none). Never NULL. */
const char *mla_last_error(void);

/* A short lower-case name of a status ("ok", "invalid argument", ...); never
 * NULL ("unknown status" for values outside the enum). */
const char *mla_status_name(mla_status status);

/* The runtime's version as MAJOR * 10000 + MINOR * 100 + PATCH, and as a
 * "MAJOR.MINOR.PATCH" string (static storage). */
int mla_version(void);
const char *mla_version_string(void);

/* The package format version this runtime reads. */
uint32_t mla_package_format_version(void);

/* Bytes per element of a dtype (0 for values outside the enum) and its
 * name ("bf16", ...; "unknown" outside the enum). */
size_t mla_dtype_size(mla_dtype dtype);
const char *mla_dtype_name(mla_dtype dtype);

/* Converts `count` elements of src_dtype at `src` into dst_dtype at `dst`:
 * floating types among themselves (bf16 and f16 round to nearest even, NaN
 * stays NaN, f16 overflows to infinity), integer types among themselves
 * (an i64 that does not fit in i32 is an error naming the element); mixing
 * the two is MLA_ERROR_INVALID_ARGUMENT. src and dst must not overlap
 * unless the dtypes and the pointers are equal. NULL is allowed when count
 * is 0. */
mla_status mla_convert(const void *src, mla_dtype src_dtype, void *dst,
                       mla_dtype dst_dtype, size_t count);

/* ---- Kernel kinds ----------------------------------------------------- *
 * The kernel kinds and the roles of their arguments, in kernel-argument
 * order: the runtime's kind table (Kinds.def), for bindings that build their
 * launchers from it. A kernel may have more arguments than its kind (the
 * inputs of variant regions, e.g. "sinks"): mla_kernel_arg lists them all. */

typedef enum mla_role_use {
  MLA_ROLE_INPUT = 0,
  MLA_ROLE_OUTPUT = 1,
  /* An input the kernel updates (append_kv's kv). */
  MLA_ROLE_INOUT = 2
} mla_role_use;

/* One argument of a kind. */
typedef struct mla_role_info {
  /* "q", "scale", ...; static storage. */
  const char *role;
  /* 1 for a scalar, 0 for a tensor. */
  int32_t is_scalar;
  /* Tensors: the rank; 0 for a scalar. */
  int32_t rank;
  mla_role_use use;
} mla_role_info;

/* The number of kinds, and the name of kind `index` ("decode", "prefill",
 * "merge", "append_kv"; static storage; NULL when index >= mla_num_kinds()). */
size_t mla_num_kinds(void);
const char *mla_kind_name(size_t index);

/* The number of arguments of `kind`, and argument `index` of it, in
 * kernel-argument order. An unknown kind is MLA_ERROR_INVALID_ARGUMENT
 * naming the known ones. */
mla_status mla_kind_num_roles(const char *kind, size_t *out);
mla_status mla_kind_role(const char *kind, size_t index, mla_role_info *out);

/* ---- Devices ---------------------------------------------------------- */

typedef struct mla_device_options {
  /* Host device: worker threads of its pool (callers included), 0 = one per
   * core. Ignored by GPU devices. */
  uint32_t host_threads;
} mla_device_options;

/* Opens "host", "cuda" (= "cuda:0"), "cuda:N", "hip" (= "hip:0"), "hip:N",
 * the AMD emulator "emu", "emu:reverse" or "emu:random[:SEED]" (wave order
 * between barriers; runs gfx*-emu targets on the host, see docs/AMD.md) or
 * "auto" (cuda if it opens, else hip, else host). options may be NULL.
 * Without a driver or device: MLA_ERROR_UNSUPPORTED with a one-line reason
 * such as "cuda: libcuda.so.1 not found (no NVIDIA driver on this
 * machine)". */
mla_status mla_device_open(const char *name, const mla_device_options *options,
                           mla_device **out);
void mla_device_close(mla_device *device);

/* The device's name ("host", "cuda:0", "hip:1"). */
mla_status mla_device_name(const mla_device *device, const char **out);

/* 1 when tensors of the device live in host memory (the host and the
 * emulator: host pointers are valid tensor data), 0 for GPUs (device
 * addresses only). */
mla_status mla_device_uses_host_memory(const mla_device *device, int32_t *out);

/* Waits for the work enqueued on `stream` (NULL: the whole device). For
 * tools and tests: the launch path never needs it. No-op on the host. */
mla_status mla_device_synchronize(const mla_device *device, void *stream);

/* ---- Packages --------------------------------------------------------- */

/* Reads and checks a .mlapkg file (format version, checksum, manifest). */
mla_status mla_package_load_file(const char *path, mla_package **out);
/* The same from memory; the bytes are copied, so the caller may free them
 * when this returns. */
mla_status mla_package_load_memory(const void *data, size_t size,
                                   mla_package **out);
void mla_package_close(mla_package *package);

/* The manifest's kernel kind ("decode", "prefill", "merge", "append_kv"). */
mla_status mla_package_kind(const mla_package *package, const char **out);
/* Its targets ("host-x86_64", "sm_90a", "gfx942", ...). */
mla_status mla_package_num_targets(const mla_package *package, size_t *out);
mla_status mla_package_target(const mla_package *package, size_t index,
                              const char **out);

/* ---- Kernels ---------------------------------------------------------- */

/* Loads the package's kernel for `target` (NULL: the target the device
 * prefers: host-x86_64 on the host, sm_90a then sm_80 on CUDA, the device's
 * gfx processor on HIP). */
mla_status mla_kernel_load(const mla_device *device, const mla_package *package,
                           const char *target, mla_kernel **out);
void mla_kernel_close(mla_kernel *kernel);

/* The manifest's `kernel` kind, e.g. "decode". */
mla_status mla_kernel_kind(const mla_kernel *kernel, const char **out);
/* The loaded target, e.g. "host-x86_64". */
mla_status mla_kernel_target(const mla_kernel *kernel, const char **out);

/* One manifest argument. */
typedef struct mla_arg_info {
  /* Position in the kernel's parameter list (0-based). */
  int32_t index;
  /* "q", "kv", "scale", ...; owned by the kernel. */
  const char *role;
  /* 1 for a scalar, 0 for a tensor. */
  int32_t is_scalar;
  mla_dtype dtype;
  /* Tensors: the rank and each dim (MLA_DYNAMIC_DIM for '?'); 0 for a
   * scalar. */
  int32_t rank;
  int64_t dims[MLA_MAX_RANK];
} mla_arg_info;

mla_status mla_kernel_num_args(const mla_kernel *kernel, size_t *out);
mla_status mla_kernel_arg(const mla_kernel *kernel, size_t index,
                          mla_arg_info *out);
/* The argument with role `role` (MLA_ERROR_INVALID_ARGUMENT naming the role
 * when the kernel has none). */
mla_status mla_kernel_find_arg(const mla_kernel *kernel, const char *role,
                               mla_arg_info *out);

/* An integer header value of the manifest: "heads", "q_len", "latent_dim",
 * "rope_dim", "page_size" (q_len / page_size 0 = chosen at run time),
 * "qk_dim", "v_dim", "causal", "parts". MLA_ERROR_INVALID_ARGUMENT for another
 * key or one the manifest does not have. */
mla_status mla_kernel_header_int(const mla_kernel *kernel, const char *key,
                                 int64_t *out);
/* A string header value: "kernel", "function", "dtype" (e.g. "bf16"),
 * "target", or "config.NAME" for a `config NAME=VALUE` entry. */
mla_status mla_kernel_header_string(const mla_kernel *kernel, const char *key,
                                    const char **out);

/* ---- Launching -------------------------------------------------------- */

/* A tensor: `data` is a device address (host memory on the host device) of
 * a contiguous row-major array of `dtype` with `rank` dims `shape`. */
typedef struct mla_tensor {
  void *data;
  mla_dtype dtype;
  int32_t rank;
  int64_t shape[MLA_MAX_RANK];
} mla_tensor;

typedef enum mla_arg_kind {
  MLA_ARG_TENSOR = 0,
  /* A floating-point scalar, converted to the manifest's dtype for it. */
  MLA_ARG_F32 = 1,
  /* An integer scalar, for manifest scalars of dtype i32 or i64. */
  MLA_ARG_INT = 2
} mla_arg_kind;

/* An argument given by role; every manifest role exactly once, any order. */
typedef struct mla_arg {
  const char *role;
  mla_arg_kind kind;
  mla_tensor tensor; /* MLA_ARG_TENSOR */
  float f32;         /* MLA_ARG_F32 */
  int64_t i64;       /* MLA_ARG_INT */
} mla_arg;

/* A host-memory copy of a tensor argument (same shape and dtype), by role,
 * for the content checks of a launch on a GPU, whose memory validation
 * never reads. */
typedef struct mla_host_copy {
  const char *role;
  const void *data;
} mla_host_copy;

/* Zero-initialized options (or NULL) are the defaults: validate, the
 * default stream, the kernel's workspace, no host copies. */
typedef struct mla_launch_options {
  /* Non-zero: skip the argument checks that cost time (static dims, null
   * data, kind rules such as seq_lens and block-table contents). Count,
   * kind, dtype, rank, data alignment and size limits are still checked. */
  int32_t skip_validation;
  /* GPU: the CUstream / hipStream_t to enqueue on; NULL = default stream.
   * Ignored by the host. */
  void *stream;
  /* Caller-owned device workspace of workspace_bytes bytes, 256-byte
   * aligned, at least mla_kernel_workspace_bytes; not used by another launch
   * that may run at the same time. NULL: the kernel's reserved workspace
   * (GPU) or a pooled buffer (host). */
  void *workspace;
  size_t workspace_bytes;
  /* GPU decode: host copies of block_table and seq_lens (same shape and
   * dtype) so that validation checks lengths and page indices without
   * reading device memory. Ignored by the host device. */
  const void *host_block_table;
  const void *host_seq_lens;
  /* GPU, any kind: host copies by role (e.g. "cu_seqlens_q" and
   * "cu_seqlens_k" of prefill, "slot_mapping" of append_kv); they take
   * precedence over the two above. Roles the kernel lacks are ignored.
   * Ignored by the host device. */
  const mla_host_copy *host_copies;
  size_t num_host_copies;
} mla_launch_options;

/* Alignment of a caller workspace. */
#define MLA_WORKSPACE_ALIGNMENT 256

/* Checks arguments as a launch would, launching nothing. */
mla_status mla_kernel_validate(const mla_kernel *kernel, const mla_arg *args,
                               size_t num_args,
                               const mla_launch_options *options);

/* Workspace bytes a launch with these argument shapes needs (0 for kernels
 * without workspaces). Only shapes are read: data may be NULL. */
mla_status mla_kernel_workspace_bytes(const mla_kernel *kernel,
                                      const mla_arg *args, size_t num_args,
                                      size_t *out);

/* The shape and dtype of output `role` ("o", "lse"; MLA_ROLE_OUTPUT roles
 * of the kernel's kind) of a launch with these input arguments, written to
 * *out with data NULL: the manifest's dims, each dynamic one taken from an
 * input's dims (decode o: q's dims 0-2, then latent_dim). Only the shapes of
 * the tensor args are read (data may be NULL) and args the output does not
 * depend on may be left out; args without a tensor are ignored. */
mla_status mla_kernel_output_shape(const mla_kernel *kernel, const char *role,
                                   const mla_arg *args, size_t num_args,
                                   mla_tensor *out);

/* Sets aside at least `bytes` of workspace for launches without a caller
 * workspace (GPU: one buffer, grown never shrunk, shared by all launches of
 * the kernel: do not overlap them in time; host: one more pooled buffer). */
mla_status mla_kernel_reserve_workspace(const mla_kernel *kernel, size_t bytes);

/* Validates (unless options->skip_validation) and launches. Host: returns
 * when the outputs are written. GPU: enqueues on options->stream and
 * returns without waiting or allocating (graph-capture safe). Nothing is
 * launched on error. */
mla_status mla_launch(const mla_kernel *kernel, const mla_arg *args,
                      size_t num_args, const mla_launch_options *options);

/* Flags of mla_launch_with_flags. */
/* Skip the launches of the kernel's plan (mla_kernel_plan_launches: the
 * plan of chunks of decode's length-aware schedule, computed from seq_lens
 * alone) and read the plan an earlier launch of this kernel left in the same
 * workspace, as FlashMLA's callers reuse one scheduler metadata for every
 * layer of a decode step. The earlier launch must have had the same
 * seq_lens (batch and values; q, kv, block_table and the outputs may
 * differ), ordered before this one (e.g. the same stream), with no launch of
 * another kernel on that workspace in between; nothing checks this. The
 * workspace is options->workspace or, on GPUs without one, the reserved
 * workspace; on the host without options->workspace (a pooled buffer) the
 * plan is computed as usual. No effect on a kernel without a plan. */
#define MLA_LAUNCH_REUSE_PLAN 1u

/* mla_launch with `flags` (MLA_LAUNCH_* bits, 0: mla_launch itself); an
 * unknown bit is MLA_ERROR_INVALID_ARGUMENT. */
mla_status mla_launch_with_flags(const mla_kernel *kernel, const mla_arg *args,
                                 size_t num_args,
                                 const mla_launch_options *options,
                                 uint32_t flags);

/* The kernel's leading launches that compute a plan from seq_lens alone
 * and that MLA_LAUNCH_REUSE_PLAN skips: 1 for decode's length-aware
 * schedule, 0 for every other kernel. */
mla_status mla_kernel_plan_launches(const mla_kernel *kernel, size_t *out);

/* Convenience launchers for the kernel kinds (MLA_ERROR_UNSUPPORTED on a
 * kernel of another kind). `scale` is passed in the manifest's dtype. */
typedef struct mla_decode_args {
  mla_tensor q;           /* [batch, q_len, heads, latent_dim + rope_dim] */
  mla_tensor kv;          /* [num_pages, page_size, latent_dim + rope_dim] */
  mla_tensor block_table; /* i32 [batch, max_pages_per_seq] */
  mla_tensor seq_lens;    /* i32 [batch] */
  float scale;
  mla_tensor o;   /* [batch, q_len, heads, latent_dim] */
  mla_tensor lse; /* f32 [batch, q_len, heads] */
} mla_decode_args;

typedef struct mla_prefill_args {
  mla_tensor q;            /* [T, heads, qk_dim] */
  mla_tensor k;            /* [Tk, heads, qk_dim] */
  mla_tensor v;            /* [Tk, heads, v_dim] */
  mla_tensor cu_seqlens_q; /* i32 [batch + 1] */
  mla_tensor cu_seqlens_k; /* i32 [batch + 1] */
  float scale;
  mla_tensor o;   /* [T, heads, v_dim] */
  mla_tensor lse; /* f32 [heads, T] */
} mla_prefill_args;

typedef struct mla_merge_args {
  mla_tensor o_parts;   /* f32 [parts, T, heads, v_dim] */
  mla_tensor lse_parts; /* f32 [parts, heads, T] */
  mla_tensor o;         /* [T, heads, v_dim] */
  mla_tensor lse;       /* f32 [heads, T] */
} mla_merge_args;

typedef struct mla_append_kv_args {
  mla_tensor kv_new;       /* [T, latent_dim + rope_dim]: new tokens' rows */
  mla_tensor slot_mapping; /* i32 [T]: page * page_size + offset; -1 skips */
  mla_tensor kv;           /* [num_pages, page_size, row], read and written */
} mla_append_kv_args;

mla_status mla_launch_decode(const mla_kernel *kernel,
                             const mla_decode_args *args,
                             const mla_launch_options *options);
mla_status mla_launch_prefill(const mla_kernel *kernel,
                              const mla_prefill_args *args,
                              const mla_launch_options *options);
mla_status mla_launch_merge(const mla_kernel *kernel,
                            const mla_merge_args *args,
                            const mla_launch_options *options);
mla_status mla_launch_append_kv(const mla_kernel *kernel,
                                const mla_append_kv_args *args,
                                const mla_launch_options *options);

/* ---- Page pool -------------------------------------------------------- *
 * Page indices of one KV page pool kv[num_pages, page_size, row] (memory
 * the caller owns) and per-request block tables. Token t of a request lives
 * in row t % page_size of page pages[t / page_size], its slot is
 * pages[t / page_size] * page_size + t % page_size. Request ids are any
 * int64 the caller picks. Not synchronized. */

/* num_pages >= 1, page_size >= 1, num_pages * page_size <= INT32_MAX. */
mla_status mla_page_pool_create(int64_t num_pages, int64_t page_size,
                                mla_page_pool **out);
void mla_page_pool_destroy(mla_page_pool *pool);

/* Appends `count` (>= 0) tokens to `request` (created if new), taking pages
 * as needed, and writes their slots to slots[0..count) (the slot_mapping of
 * an append_kv launch; NULL allowed when count is 0). When the pool has too
 * few free pages it fails with MLA_ERROR_INVALID_ARGUMENT and changes
 * nothing. */
mla_status mla_page_pool_append_tokens(mla_page_pool *pool, int64_t request,
                                       int64_t count, int32_t *slots);
/* Returns the request's pages to the pool and forgets it. */
mla_status mla_page_pool_free_request(mla_page_pool *pool, int64_t request);

/* Pages outside any request: takes `count` pages into pages[0..count), or
 * none on failure; mla_page_pool_free_pages returns such pages. */
mla_status mla_page_pool_allocate_pages(mla_page_pool *pool, int64_t count,
                                        int32_t *pages);
mla_status mla_page_pool_free_pages(mla_page_pool *pool, const int32_t *pages,
                                    int64_t count);

typedef struct mla_page_pool_info {
  int64_t num_pages;
  int64_t page_size;
  int64_t free_pages;
  int64_t num_requests;
} mla_page_pool_info;

mla_status mla_page_pool_get_info(const mla_page_pool *pool,
                                  mla_page_pool_info *out);

typedef struct mla_request_info {
  /* 0 when the pool does not hold the request. */
  int32_t exists;
  /* Tokens and pages it holds. */
  int64_t length;
  int64_t num_pages;
  /* Tokens it can take without a new page, and tokens it can take now. */
  int64_t tokens_without_new_pages;
  int64_t tokens_that_fit;
} mla_request_info;

mla_status mla_page_pool_request_info(const mla_page_pool *pool,
                                      int64_t request, mla_request_info *out);

/* The most pages any of the requests holds (the narrowest block table). */
mla_status mla_page_pool_max_pages(const mla_page_pool *pool,
                                   const int64_t *requests, size_t count,
                                   int64_t *out);

/* Writes block_table i32 [count, max_pages_per_seq] (entries past a
 * request's pages are 0, a valid page) and seq_lens i32 [count] for the
 * requests (each known to the pool). Either output may be NULL. Fails,
 * writing nothing, for an unknown request or one with more pages. */
mla_status mla_page_pool_export_block_table(
    const mla_page_pool *pool, const int64_t *requests, size_t count,
    int64_t max_pages_per_seq, int32_t *block_table, int32_t *seq_lens);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MLA_RUNTIME_MLA_RUNTIME_H */

/* embed_decode.c - embedding the mla runtime through its C API.
 *
 *   embed_decode DECODE.mlapkg
 *
 * Opens the host device, loads a decode package (bf16 or f32, any head
 * count, latent and rope dims; page size 16 or chosen at run time), builds
 * a small paged KV cache with random contents through a page pool (requests
 * that grow in turns, so their pages interleave), launches decode and checks
 * o and lse against a double-precision reference computed here. Prints the
 * largest errors; exits 0 when they are within tolerance, 1 otherwise.
 *
 * Uses only mla_runtime.h. Build against an installed runtime with this
 * directory's CMakeLists.txt (find_package(mla_runtime CONFIG)), or
 * cc -std=c99 embed_decode.c $(pkg-config --cflags --libs mla_runtime) -lm
 * (the shared library), or link the static archive with a C++ driver. */

#include "mla/runtime/mla_runtime.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_SIZE 16
#define BATCH 3

/* Prints the failed call and the runtime's message; returns 1. */
static int fail(const char *what, mla_status status) {
  fprintf(stderr, "embed_decode: %s failed: %s: %s\n", what,
          mla_status_name(status), mla_last_error());
  return 1;
}

#define CHECK(call)                                                            \
  do {                                                                         \
    mla_status status_ = (call);                                               \
    if (status_ != MLA_OK) {                                                   \
      result = fail(#call, status_);                                           \
      goto done;                                                               \
    }                                                                          \
  } while (0)

/* A small deterministic generator: uniform in [-1, 1). */
static uint64_t rngState = 0x9e3779b97f4a7c15ull;
static float uniform(void) {
  rngState ^= rngState << 13;
  rngState ^= rngState >> 7;
  rngState ^= rngState << 17;
  return (float)((rngState >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

/* bf16 <-> float (round to nearest even). */
static uint16_t toBF16(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}
static float fromBF16(uint16_t value) {
  uint32_t bits = (uint32_t)value << 16;
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}

/* Element i of a bf16 or f32 array, and a store that rounds like the
 * kernel's dtype (returning the stored value). */
static float load(const void *data, mla_dtype dtype, size_t i) {
  return dtype == MLA_DTYPE_BF16 ? fromBF16(((const uint16_t *)data)[i])
                                 : ((const float *)data)[i];
}
static void store(void *data, mla_dtype dtype, size_t i, float value) {
  if (dtype == MLA_DTYPE_BF16)
    ((uint16_t *)data)[i] = toBF16(value);
  else
    ((float *)data)[i] = value;
}

static mla_tensor tensor(void *data, mla_dtype dtype, int rank,
                         const int64_t *shape) {
  mla_tensor t;
  int d;
  memset(&t, 0, sizeof(t));
  t.data = data;
  t.dtype = dtype;
  t.rank = rank;
  for (d = 0; d < rank; ++d)
    t.shape[d] = shape[d];
  return t;
}

int main(int argc, char **argv) {
  int result = 1;
  mla_device *device = NULL;
  mla_package *package = NULL;
  mla_kernel *kernel = NULL;
  mla_page_pool *pool = NULL;
  void *q = NULL, *kv = NULL, *o = NULL;
  float *lse = NULL;
  int32_t *slots = NULL, *blockTable = NULL, *seqLens = NULL;
  mla_device_options deviceOptions;
  mla_arg_info qInfo, tableInfo, lensInfo;
  const char *kind = NULL, *target = NULL;
  int64_t heads, qLen, latent, rope, pageSize, row, maxPages;
  int64_t numPages = 24;
  /* Three requests that grow in turns: +20, +1, +33 tokens, then +17 ... */
  const int64_t turns[][BATCH] = {{20, 1, 33}, {17, 0, 2}, {1, 15, 14}};
  const int64_t requests[BATCH] = {101, 202, 303};
  mla_dtype dtype;
  float scale;
  double maxOError = 0, maxLseError = 0;
  int64_t b, i, h, t, d, turn;

  if (argc != 2) {
    fprintf(stderr, "usage: %s DECODE.mlapkg\n", argv[0]);
    return 2;
  }
  printf("embed_decode: mla runtime %s (package format %u)\n",
         mla_version_string(), (unsigned)mla_package_format_version());

  /* Device, package, kernel. The package may be closed once the kernel is
   * loaded; the kernel keeps what it needs. */
  memset(&deviceOptions, 0, sizeof(deviceOptions));
  deviceOptions.host_threads = 2;
  CHECK(mla_device_open("host", &deviceOptions, &device));
  CHECK(mla_package_load_file(argv[1], &package));
  CHECK(mla_kernel_load(device, package, NULL, &kernel));
  mla_package_close(package);
  package = NULL;

  /* What the kernel is: its kind, header values and argument types. */
  CHECK(mla_kernel_kind(kernel, &kind));
  CHECK(mla_kernel_target(kernel, &target));
  if (strcmp(kind, "decode") != 0) {
    fprintf(stderr, "embed_decode: %s holds a '%s' kernel, not decode\n",
            argv[1], kind);
    goto done;
  }
  CHECK(mla_kernel_header_int(kernel, "heads", &heads));
  CHECK(mla_kernel_header_int(kernel, "q_len", &qLen));
  CHECK(mla_kernel_header_int(kernel, "latent_dim", &latent));
  CHECK(mla_kernel_header_int(kernel, "rope_dim", &rope));
  CHECK(mla_kernel_header_int(kernel, "page_size", &pageSize));
  CHECK(mla_kernel_find_arg(kernel, "q", &qInfo));
  CHECK(mla_kernel_find_arg(kernel, "block_table", &tableInfo));
  CHECK(mla_kernel_find_arg(kernel, "seq_lens", &lensInfo));
  dtype = qInfo.dtype;
  if (qLen == 0)
    qLen = 1; /* chosen at run time */
  if (pageSize == 0)
    pageSize = PAGE_SIZE; /* chosen at run time */
  if (pageSize != PAGE_SIZE ||
      (dtype != MLA_DTYPE_BF16 && dtype != MLA_DTYPE_F32) ||
      tableInfo.dtype != MLA_DTYPE_I32 || lensInfo.dtype != MLA_DTYPE_I32) {
    fprintf(stderr,
            "embed_decode: this example needs page size %d, bf16 or f32 "
            "data and i32 indices (the kernel has page size %lld, %s)\n",
            PAGE_SIZE, (long long)pageSize, mla_dtype_name(dtype));
    goto done;
  }
  row = latent + rope;
  scale = (float)(1.0 / sqrt((double)row));
  printf("embed_decode: %s kernel for %s: %s, %lld heads, q_len %lld, "
         "latent %lld + rope %lld, page size %lld\n",
         kind, target, mla_dtype_name(dtype), (long long)heads, (long long)qLen,
         (long long)latent, (long long)rope, (long long)pageSize);

  /* The KV cache: a pool of pages in caller memory, page indices from the
   * runtime's page pool. Each turn appends tokens to the requests and
   * writes their rows at the slots the pool returns (what an append_kv
   * kernel does on a GPU). */
  kv = calloc((size_t)(numPages * pageSize * row), mla_dtype_size(dtype));
  slots = malloc(64 * sizeof(int32_t));
  if (!kv || !slots) {
    fprintf(stderr, "embed_decode: out of memory\n");
    goto done;
  }
  CHECK(mla_page_pool_create(numPages, pageSize, &pool));
  for (turn = 0; turn < 3; ++turn)
    for (b = 0; b < BATCH; ++b) {
      int64_t count = turns[turn][b];
      CHECK(mla_page_pool_append_tokens(pool, requests[b], count, slots));
      for (t = 0; t < count; ++t)
        for (d = 0; d < row; ++d)
          store(kv, dtype, (size_t)(slots[t] * row + d), uniform());
    }

  /* Block table and lengths for a decode launch over the three requests. */
  CHECK(mla_page_pool_max_pages(pool, requests, BATCH, &maxPages));
  blockTable = malloc((size_t)(BATCH * maxPages) * sizeof(int32_t));
  seqLens = malloc(BATCH * sizeof(int32_t));
  q = malloc((size_t)(BATCH * qLen * heads * row) * mla_dtype_size(dtype));
  o = malloc((size_t)(BATCH * qLen * heads * latent) * mla_dtype_size(dtype));
  lse = malloc((size_t)(BATCH * qLen * heads) * sizeof(float));
  if (!blockTable || !seqLens || !q || !o || !lse) {
    fprintf(stderr, "embed_decode: out of memory\n");
    goto done;
  }
  CHECK(mla_page_pool_export_block_table(pool, requests, BATCH, maxPages,
                                         blockTable, seqLens));
  for (i = 0; i < BATCH * qLen * heads * row; ++i)
    store(q, dtype, (size_t)i, uniform());

  {
    const int64_t qShape[4] = {BATCH, qLen, heads, row};
    const int64_t kvShape[3] = {numPages, pageSize, row};
    const int64_t tableShape[2] = {BATCH, maxPages};
    const int64_t lensShape[1] = {BATCH};
    const int64_t oShape[4] = {BATCH, qLen, heads, latent};
    mla_decode_args args;
    args.q = tensor(q, dtype, 4, qShape);
    args.kv = tensor(kv, dtype, 3, kvShape);
    args.block_table = tensor(blockTable, MLA_DTYPE_I32, 2, tableShape);
    args.seq_lens = tensor(seqLens, MLA_DTYPE_I32, 1, lensShape);
    args.scale = scale;
    args.o = tensor(o, dtype, 4, oShape);
    args.lse = tensor(lse, MLA_DTYPE_F32, 3, oShape);
    /* NULL options: validate, default stream, the kernel's workspace. On
     * the host the call returns when o and lse are written. */
    CHECK(mla_launch_decode(kernel, &args, NULL));
  }

  /* The reference: for query i of request b (length L), keys [0, L - qLen
   * + i]; token t at row t % page of page block_table[b][t / page]. */
  for (b = 0; b < BATCH; ++b)
    for (i = 0; i < qLen; ++i)
      for (h = 0; h < heads; ++h) {
        int64_t visible = seqLens[b] - qLen + i + 1,
                out = (b * qLen + i) * heads + h;
        double maxScore = -INFINITY, sum = 0, refLse;
        double *scores =
            malloc(sizeof(double) * (size_t)(visible > 0 ? visible : 1));
        double *acc = calloc((size_t)latent, sizeof(double));
        if (!scores || !acc) {
          free(scores);
          free(acc);
          fprintf(stderr, "embed_decode: out of memory\n");
          goto done;
        }
        for (t = 0; t < visible; ++t) {
          int64_t slot =
              blockTable[b * maxPages + t / pageSize] * pageSize + t % pageSize;
          double dot = 0;
          for (d = 0; d < row; ++d)
            dot += (double)load(q, dtype, (size_t)(out * row + d)) *
                   load(kv, dtype, (size_t)(slot * row + d));
          scores[t] = dot * scale;
          if (scores[t] > maxScore)
            maxScore = scores[t];
        }
        for (t = 0; t < visible; ++t) {
          int64_t slot =
              blockTable[b * maxPages + t / pageSize] * pageSize + t % pageSize;
          double w = exp(scores[t] - maxScore);
          sum += w;
          for (d = 0; d < latent; ++d)
            acc[d] += w * load(kv, dtype, (size_t)(slot * row + d));
        }
        refLse = visible > 0 ? maxScore + log(sum) : -INFINITY;
        for (d = 0; d < latent; ++d) {
          double ref = visible > 0 ? acc[d] / sum : 0.0;
          double err = fabs(load(o, dtype, (size_t)(out * latent + d)) - ref);
          if (!(err <= maxOError)) /* NaN counts as the largest error */
            maxOError = err;
        }
        if (visible > 0) {
          double err = fabs(lse[out] - refLse);
          if (!(err <= maxLseError))
            maxLseError = err;
        } else if (!(isinf(lse[out]) && lse[out] < 0)) {
          maxLseError = INFINITY;
        }
        free(scores);
        free(acc);
      }

  {
    double oTolerance = dtype == MLA_DTYPE_BF16 ? 2e-2 : 1e-4;
    double lseTolerance = 1e-3;
    printf("embed_decode: lengths %d %d %d, max |o - ref| = %.3g (tolerance "
           "%.0e), max |lse - ref| = %.3g (tolerance %.0e)\n",
           (int)seqLens[0], (int)seqLens[1], (int)seqLens[2], maxOError,
           oTolerance, maxLseError, lseTolerance);
    if (maxOError <= oTolerance && maxLseError <= lseTolerance) {
      printf("embed_decode: ok\n");
      result = 0;
    } else {
      printf("embed_decode: FAILED\n");
    }
  }

done:
  free(q);
  free(kv);
  free(o);
  free(lse);
  free(slots);
  free(blockTable);
  free(seqLens);
  mla_page_pool_destroy(pool);
  mla_kernel_close(kernel);
  mla_package_close(package);
  mla_device_close(device);
  return result;
}

/*===- weft/runtime/CApi.h - C API of the Weft runtime -------------------===*\
|*                                                                            *|
|* A compiled Weft model is an object file that defines                       *|
|*   void weft_entry(void **buffers);   -- runs the model                     *|
|*   extern const char weft_manifest[]; -- describes its buffers              *|
|* The buffers are the entry function's arguments in order (graph inputs and  *|
|* weights) followed by its results, each a dense row-major array.            *|
|* This API loads the weights file, checks inputs and runs the entry.         *|
\*===----------------------------------------------------------------------===*/

#ifndef WEFT_RUNTIME_CAPI_H
#define WEFT_RUNTIME_CAPI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum weft_dtype {
  WEFT_F32 = 0,
  WEFT_F64 = 1,
  WEFT_F16 = 2,
  WEFT_BF16 = 3,
  WEFT_I64 = 4,
  WEFT_I32 = 5,
  WEFT_BOOL = 6
} weft_dtype;

/* A state buffer is optimizer state: zeros at the start, fed back by the
 * runner after each training step. */
typedef enum weft_role {
  WEFT_INPUT = 0,
  WEFT_PARAM = 1,
  WEFT_OUTPUT = 2,
  WEFT_STATE = 3
} weft_role;

/* One buffer of the entry function. In a partitioned model `shape` and
 * `bytes` describe the whole tensor and `local_shape`/`local_bytes` one
 * rank's shard of it, split as `sharding` says (see weft/runtime/ShardLayout.h;
 * "-" for every dim of a whole tensor). */
typedef struct weft_buffer_info {
  const char *name;
  weft_role role;
  weft_dtype dtype;
  int rank;
  const int64_t *shape;
  size_t bytes;
  const int64_t *local_shape;
  size_t local_bytes;
  const char *sharding;
  /* Inputs that index a table: the table's size (values must lie in
   * [-index_bound, index_bound)); 0 for every other buffer. */
  int64_t index_bound;
} weft_buffer_info;

typedef struct weft_model weft_model;

/* Opens a model: parses the manifest and maps the weights file (with
 * `weights_path` NULL, no file: the caller binds every param with
 * weft_model_bind). Returns NULL and writes a one-line message to `error` on
 * failure. */
weft_model *weft_model_open(const char *manifest, const char *weights_path,
                            char *error, size_t error_size);
void weft_model_close(weft_model *model);

/* The device mesh of a partitioned model ("dp=2,tp=2"), or "" when the model
 * runs as one rank. */
const char *weft_model_mesh(const weft_model *model);
/* The groups of mesh axes its collectives use (bit a = mesh axis a), so
 * that their communicators are created at start-up. */
size_t weft_model_num_groups(const weft_model *model);
int64_t weft_model_group(const weft_model *model, size_t i);
/* Makes this process rank `rank` of the mesh (row-major coordinates): its
 * weight shards are used and its outputs allocated. Rank 0 by default. */
int weft_model_set_rank(weft_model *model, int rank, char *error,
                        size_t error_size);

size_t weft_model_num_buffers(const weft_model *model);
const weft_buffer_info *weft_model_buffer(const weft_model *model, size_t i);

/* Binds the data of an input buffer: this rank's shard, local_bytes long
 * (not copied; must outlive the run). */
int weft_model_set_input(weft_model *model, size_t i, const void *data);
/* For an input that indexes a table (index_bound > 0): 0 when every value
 * of `data`, the whole tensor, lies in [-index_bound, index_bound);
 * otherwise -1 with `error` naming the first value outside, which the model
 * would read past its table with. 0 for every other buffer. */
int weft_model_check_indices(const weft_model *model, size_t i,
                             const void *data, char *error, size_t error_size);
/* Binds other memory to a parameter or state buffer (a trainer's writable
 * copy of the weights); local_bytes long, not copied. */
int weft_model_bind(weft_model *model, size_t i, void *data);
/* The data of a parameter or state buffer, as bound. */
void *weft_model_data(weft_model *model, size_t i);
/* A training step's optimizer ("adamw", "sgd"), Adam's betas and the
 * vocabulary its labels index, or "" for another program. */
const char *weft_model_optimizer(const weft_model *model, double *beta1,
                                 double *beta2, int64_t *vocab);
/* The name of a training step's token input (the trainer feeds its batches
 * there), or "" for another program. */
const char *weft_model_token_input(const weft_model *model);
/* The FLOPs of a training step's contractions, over all ranks (0 for
 * another program): what MFU is measured against. */
double weft_model_step_flops(const weft_model *model);
/* The data of an output buffer, valid until the model is closed. */
void *weft_model_output(weft_model *model, size_t i);

/* Runs the entry function once; returns its wall time in seconds, or a
 * negative value (with `error` set) if an input is unbound. */
double weft_model_run(weft_model *model, void (*entry)(void **), char *error,
                      size_t error_size);

size_t weft_dtype_size(weft_dtype dtype);
const char *weft_dtype_name(weft_dtype dtype);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_RUNTIME_CAPI_H */

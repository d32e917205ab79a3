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
 * copy of the weights); local_bytes long, not copied. Its data goes to the
 * device before the next run. */
int weft_model_bind(weft_model *model, size_t i, void *data);
/* The data of a parameter or state buffer in host memory, as bound. After
 * runs that fed outputs back to it on a device of its own, as of the last
 * weft_model_download. */
void *weft_model_data(weft_model *model, size_t i);
/* Declares that after each run, output `output` holds the next value of
 * the parameter or state buffer `target` (an optimizer's update; both of
 * one size and split alike). It takes the target's place when the next
 * run starts or at weft_model_download (a caller who refuses a step, a NaN
 * loss, keeps the state before it): on a device of its own the two trade
 * their device memory, so the training state stays on the device and
 * neither is copied; on the host the output is copied into the target's
 * memory. A parameter still read from the weights file gets a writable
 * copy. 0, or -1 with `error` set. */
int weft_model_feed_back(weft_model *model, size_t output, size_t target,
                         char *error, size_t error_size);
/* Puts the last run's updates in place and brings every parameter and
 * state buffer whose newest value is on the device to its host memory
 * (weft_model_data): before the host reads or writes the state, for a
 * checkpoint or an average of replicas. */
void weft_model_download(weft_model *model);
/* The host memory of parameter or state buffer `i` was written (a loaded
 * checkpoint, an average of replicas): it goes to the device before the
 * next run. -1 after a run whose updates weft_model_download has not put
 * in place yet. */
int weft_model_host_changed(weft_model *model, size_t i);
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
/* The data of an output buffer, valid until the model is closed; an
 * output fed back (weft_model_feed_back) on a device of its own is not
 * copied to the host. */
void *weft_model_output(weft_model *model, size_t i);

/* What the model's device has done since the process started, counted
 * by a device of its own (all zero for the host's): bytes copied from host
 * to device and back, host synchronizations (the host waiting for the
 * device), launches (kernels and library calls), allocations of device
 * memory (not those a cache serves again), CUDA graph replays. */
typedef struct weft_device_stats {
  uint64_t host_to_device_bytes;
  uint64_t device_to_host_bytes;
  uint64_t synchronizations;
  uint64_t launches;
  uint64_t allocations;
  uint64_t graph_replays;
} weft_device_stats;
void weft_model_device_stats(const weft_model *model, weft_device_stats *stats);

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

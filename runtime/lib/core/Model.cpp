//===- Model.cpp - Load a compiled model and run it -----------------------===//
//
// The manifest (JSON the compiler embeds in the object; its schema is
// weft::runtime::Manifest in weft/runtime/Contract.h) lists the entry
// function's buffers and the mesh of a partitioned model. Params live in
// the weights file at the offsets the manifest gives, after a header that
// names the manifest's hash.
//
//===----------------------------------------------------------------------===//

#include "weft/runtime/CApi.h"
#include "weft/runtime/Contract.h"
#include "weft/runtime/Device.h"
#include "weft/runtime/ShardLayout.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>
#include <vector>

using weft::runtime::Device;
using weft::runtime::MeshShape;
using weft::runtime::ShardSpec;

namespace {

struct Buffer {
  std::string name;
  std::vector<int64_t> shape, localShape;
  std::string specText;
  ShardSpec spec;
  weft_buffer_info info{};
  uint64_t offset = 0;         // params: offset of shard 0 in the weights file
  uint64_t shardStride = 0;    // params: bytes between shards
  const void *bound = nullptr; // inputs: caller's data
  void *owned = nullptr;       // outputs, state: host memory of the runtime
  void *device = nullptr;      // the entry's copy, on a device of its own
  // Params and state on a device of its own: whether the device's copy,
  // and the host's, hold the newest value.
  bool deviceCurrent = false, hostCurrent = true;
  // Outputs: fed back to a param or state buffer after each run.
  bool fedBack = false;
};

void *allocateHost(size_t bytes) {
  // aligned_alloc needs a multiple of the alignment.
  size_t rounded = (bytes + 63) / 64 * 64;
  return std::aligned_alloc(64, rounded ? rounded : 64);
}

void setError(char *error, size_t size, const std::string &message) {
  if (error && size)
    snprintf(error, size, "%s", message.c_str());
}

} // namespace

struct weft_model {
  std::vector<std::unique_ptr<Buffer>> buffers;
  MeshShape mesh;
  std::string meshText;
  std::string optimizer;
  std::string tokenInput;
  double stepFlops = 0;
  double beta1 = 0, beta2 = 0;
  int64_t vocab = 0;
  std::vector<int64_t> groups;
  int rank = -1;
  std::unique_ptr<Device> device;
  void *weights = nullptr;
  size_t weightsSize = 0;
  /// The buffers as the host sees them, and as the entry does: the same
  /// pointers when the device shares the host's memory.
  std::vector<void *> argv, deviceArgv;
  /// (output, target) pairs of weft_model_feed_back, and whether the last
  /// run's outputs are still to take their targets' places: done at the
  /// next run or download, so that a caller who refuses a step (a NaN
  /// loss) keeps the state before it.
  std::vector<std::pair<size_t, size_t>> feedback;
  bool feedbackPending = false;
};

namespace {

bool isTrainingState(const Buffer &buffer) {
  return buffer.info.role == WEFT_PARAM || buffer.info.role == WEFT_STATE;
}

/// The last run's fed-back outputs take their targets' places: on the
/// host copied in, on a device of its own traded with them there.
void applyFeedback(weft_model *model) {
  if (!model->feedbackPending)
    return;
  model->feedbackPending = false;
  for (auto [output, target] : model->feedback) {
    Buffer &from = *model->buffers[output], &to = *model->buffers[target];
    if (model->device->sharesHostMemory()) {
      memcpy(model->argv[target], model->argv[output], to.info.local_bytes);
      continue;
    }
    std::swap(from.device, to.device);
    model->deviceArgv[output] = from.device;
    model->deviceArgv[target] = to.device;
    to.deviceCurrent = true;
    to.hostCurrent = false;
  }
}

} // namespace

extern "C" {

weft_model *weft_model_open(const char *manifest, const char *weightsPath,
                            char *error, size_t errorSize) {
  auto model = std::make_unique<weft_model>();
  std::string parseError;
  std::optional<weft::runtime::Manifest> parsed =
      weft::runtime::Manifest::parse(manifest, parseError);
  if (!parsed) {
    setError(error, errorSize, "the executable's manifest " + parseError);
    return nullptr;
  }
  uint64_t weightBytes = 0;
  std::string deviceError;
  model->device = weft::runtime::createDevice(parsed->device, deviceError);
  if (!model->device) {
    setError(error, errorSize,
             "no " + parsed->device + " device: " + deviceError);
    return nullptr;
  }
  model->mesh = parsed->mesh;
  model->groups = parsed->groups;
  if (parsed->training) {
    model->optimizer = parsed->training->optimizer;
    model->beta1 = parsed->training->beta1;
    model->beta2 = parsed->training->beta2;
    model->vocab = parsed->training->vocab;
    model->stepFlops = parsed->training->stepFlops;
    model->tokenInput = parsed->training->tokenInput;
  }
  for (weft::runtime::ManifestBuffer &entry : parsed->buffers) {
    auto buffer = std::make_unique<Buffer>();
    buffer->name = entry.name;
    buffer->shape = entry.shape;
    buffer->specText = entry.sharding;
    // Manifest::parse checked the spec.
    ShardSpec::parse(entry.sharding, entry.shape.size(), buffer->spec);
    weft_buffer_info &info = buffer->info;
    info.role = entry.role;
    info.dtype = entry.dtype;
    size_t count = 1;
    for (int64_t d : buffer->shape)
      count *= d;
    info.bytes = count * weft_dtype_size(info.dtype);
    info.index_bound = entry.indexBound;
    buffer->offset = entry.weightsOffset;
    buffer->shardStride = entry.shardStride;
    model->buffers.push_back(std::move(buffer));
  }
  if (!model->mesh.sizes.empty())
    model->meshText = model->mesh.describe();
  for (auto &buffer : model->buffers) {
    buffer->localShape = buffer->spec.localShape(buffer->shape, model->mesh);
    size_t count = 1;
    for (int64_t d : buffer->localShape)
      count *= d;
    buffer->info.local_bytes = count * weft_dtype_size(buffer->info.dtype);
    if (buffer->info.role == WEFT_PARAM)
      weightBytes = std::max<uint64_t>(
          weightBytes,
          buffer->offset +
              (buffer->spec.numShards(model->mesh) - 1) * buffer->shardStride +
              buffer->info.local_bytes);
  }
  for (auto &buffer : model->buffers) {
    buffer->info.name = buffer->name.c_str();
    buffer->info.rank = int(buffer->shape.size());
    buffer->info.shape = buffer->shape.data();
    buffer->info.local_shape = buffer->localShape.data();
    buffer->info.sharding = buffer->specText.c_str();
  }
  if (weightBytes && weightsPath) {
    int fd = open(weightsPath, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
      setError(error, errorSize,
               std::string("cannot open weights file '") + weightsPath + "'");
      if (fd >= 0)
        close(fd);
      return nullptr;
    }
    model->weightsSize = st.st_size;
    model->weights = model->weightsSize ? mmap(nullptr, model->weightsSize,
                                               PROT_READ, MAP_PRIVATE, fd, 0)
                                        : MAP_FAILED;
    close(fd);
    if (model->weights == MAP_FAILED) {
      model->weights = nullptr;
      setError(error, errorSize,
               std::string("cannot map weights file '") + weightsPath + "'");
      return nullptr;
    }
    weft::runtime::WeightsHeader header;
    if (!weft::runtime::WeightsHeader::read(model->weights, model->weightsSize,
                                            header)) {
      setError(error, errorSize,
               std::string("'") + weightsPath + "' is not a Weft weights file");
      weft_model_close(model.release());
      return nullptr;
    }
    if (header.manifestHash != weft::runtime::manifestHash(manifest) ||
        header.fileBytes != model->weightsSize ||
        weightBytes > model->weightsSize) {
      setError(error, errorSize,
               std::string("weights file '") + weightsPath +
                   "' does not belong to this executable (or is truncated)");
      weft_model_close(model.release());
      return nullptr;
    }
  }
  model->argv.assign(model->buffers.size(), nullptr);
  model->deviceArgv.assign(model->buffers.size(), nullptr);
  if (!model->device->sharesHostMemory())
    for (size_t i = 0; i < model->buffers.size(); ++i) {
      Buffer &buffer = *model->buffers[i];
      model->deviceArgv[i] = buffer.device =
          model->device->allocate(buffer.info.local_bytes);
      if (!buffer.device) {
        setError(error, errorSize,
                 "cannot allocate " + std::to_string(buffer.info.local_bytes) +
                     " bytes of " + model->device->name() +
                     " memory for buffer '" + buffer.name + "'");
        weft_model_close(model.release());
        return nullptr;
      }
      // The compiled kernels assume it (weft-gpu-assume-alignment).
      if (reinterpret_cast<uintptr_t>(buffer.device) %
          weft::runtime::kDeviceBufferAlignment) {
        setError(error, errorSize,
                 std::string("the ") + model->device->name() +
                     " device gave buffer '" + buffer.name +
                     "' memory not aligned to " +
                     std::to_string(weft::runtime::kDeviceBufferAlignment) +
                     " bytes");
        weft_model_close(model.release());
        return nullptr;
      }
    }
  if (weft_model_set_rank(model.get(), 0, error, errorSize) != 0) {
    weft_model_close(model.release());
    return nullptr;
  }
  return model.release();
}

const char *weft_model_mesh(const weft_model *model) {
  return model->meshText.c_str();
}

size_t weft_model_num_groups(const weft_model *model) {
  return model->groups.size();
}

int64_t weft_model_group(const weft_model *model, size_t i) {
  return i < model->groups.size() ? model->groups[i] : 0;
}

int weft_model_set_rank(weft_model *model, int rank, char *error,
                        size_t errorSize) {
  if (rank < 0 || rank >= model->mesh.numRanks()) {
    setError(error, errorSize,
             "rank " + std::to_string(rank) + " is outside the mesh");
    return -1;
  }
  if (rank == model->rank)
    return 0;
  model->rank = rank;
  std::vector<int64_t> coordinates = model->mesh.coordinates(rank);
  for (size_t i = 0; i < model->buffers.size(); ++i) {
    Buffer &buffer = *model->buffers[i];
    if (buffer.info.role == WEFT_PARAM) {
      int64_t shard = buffer.spec.shardIndex(coordinates, model->mesh);
      model->argv[i] = model->weights
                           ? static_cast<char *>(model->weights) +
                                 buffer.offset + shard * buffer.shardStride
                           : nullptr;
      buffer.deviceCurrent = false;
    } else if (buffer.info.role == WEFT_OUTPUT && !buffer.owned) {
      model->argv[i] = buffer.owned = allocateHost(buffer.info.local_bytes);
    } else if (buffer.info.role == WEFT_STATE && !buffer.owned) {
      model->argv[i] = buffer.owned = allocateHost(buffer.info.local_bytes);
      memset(buffer.owned, 0, buffer.info.local_bytes);
    }
  }
  return 0;
}

void weft_model_close(weft_model *model) {
  if (!model)
    return;
  for (auto &buffer : model->buffers) {
    std::free(buffer->owned);
    if (buffer->device)
      model->device->deallocate(buffer->device);
  }
  if (model->weights)
    munmap(model->weights, model->weightsSize);
  delete model;
}

size_t weft_model_num_buffers(const weft_model *model) {
  return model->buffers.size();
}

const weft_buffer_info *weft_model_buffer(const weft_model *model, size_t i) {
  return i < model->buffers.size() ? &model->buffers[i]->info : nullptr;
}

int weft_model_set_input(weft_model *model, size_t i, const void *data) {
  if (i >= model->buffers.size() || model->buffers[i]->info.role != WEFT_INPUT)
    return -1;
  model->buffers[i]->bound = data;
  model->argv[i] = const_cast<void *>(data);
  return 0;
}

int weft_model_check_indices(const weft_model *model, size_t i,
                             const void *data, char *error, size_t error_size) {
  if (i >= model->buffers.size())
    return 0;
  const weft_buffer_info &info = model->buffers[i]->info;
  if (info.index_bound <= 0 ||
      (info.dtype != WEFT_I64 && info.dtype != WEFT_I32))
    return 0;
  size_t count = info.bytes / weft_dtype_size(info.dtype);
  for (size_t k = 0; k < count; ++k) {
    int64_t value;
    if (info.dtype == WEFT_I64) {
      memcpy(&value, static_cast<const char *>(data) + 8 * k, 8);
    } else {
      int32_t narrow;
      memcpy(&narrow, static_cast<const char *>(data) + 4 * k, 4);
      value = narrow;
    }
    if (value >= -info.index_bound && value < info.index_bound)
      continue;
    std::string position;
    size_t rest = k;
    for (int d = info.rank - 1; d >= 0; --d) {
      position = std::to_string(rest % info.shape[d]) +
                 (position.empty() ? "" : ", ") + position;
      rest /= info.shape[d];
    }
    setError(error, error_size,
             std::string("input '") + info.name + "' holds " +
                 std::to_string(value) + " at [" + position +
                 "], outside the " + std::to_string(info.index_bound) +
                 " rows of the table it indexes");
    return -1;
  }
  return 0;
}

int weft_model_bind(weft_model *model, size_t i, void *data) {
  if (i >= model->buffers.size() ||
      (model->buffers[i]->info.role != WEFT_PARAM &&
       model->buffers[i]->info.role != WEFT_STATE))
    return -1;
  model->argv[i] = data;
  model->buffers[i]->deviceCurrent = false;
  model->buffers[i]->hostCurrent = true;
  return 0;
}

void *weft_model_data(weft_model *model, size_t i) {
  return i < model->argv.size() ? model->argv[i] : nullptr;
}

int weft_model_feed_back(weft_model *model, size_t output, size_t target,
                         char *error, size_t errorSize) {
  size_t count = model->buffers.size();
  if (output >= count || target >= count ||
      model->buffers[output]->info.role != WEFT_OUTPUT ||
      !isTrainingState(*model->buffers[target])) {
    setError(error, errorSize,
             "weft_model_feed_back: buffer " + std::to_string(output) +
                 " is no output or buffer " + std::to_string(target) +
                 " no parameter or state");
    return -1;
  }
  Buffer &from = *model->buffers[output], &to = *model->buffers[target];
  if (from.info.local_bytes != to.info.local_bytes ||
      from.specText != to.specText || from.fedBack) {
    setError(
        error, errorSize,
        "output '" + from.name + "' cannot be fed back to '" + to.name + "': " +
            (from.fedBack ? std::string("it is fed back already")
                          : "it is split as '" + from.specText +
                                "' and the target as '" + to.specText + "'"));
    return -1;
  }
  // Its newest value comes back to host memory that must be writable.
  const char *mapped = static_cast<const char *>(model->weights);
  const char *data = static_cast<const char *>(model->argv[target]);
  if (!data ||
      (mapped && data >= mapped && data < mapped + model->weightsSize)) {
    if (!to.owned)
      to.owned = allocateHost(to.info.local_bytes);
    if (data)
      memcpy(to.owned, data, to.info.local_bytes);
    else
      memset(to.owned, 0, to.info.local_bytes);
    model->argv[target] = to.owned;
  }
  from.fedBack = true;
  model->feedback.emplace_back(output, target);
  return 0;
}

void weft_model_download(weft_model *model) {
  applyFeedback(model);
  if (model->device->sharesHostMemory())
    return;
  for (size_t i = 0; i < model->buffers.size(); ++i) {
    Buffer &buffer = *model->buffers[i];
    if (!isTrainingState(buffer) || buffer.hostCurrent)
      continue;
    model->device->copyToHost(model->argv[i], buffer.device,
                              buffer.info.local_bytes);
    buffer.hostCurrent = true;
  }
  model->device->synchronize();
}

int weft_model_host_changed(weft_model *model, size_t i) {
  // A write to host memory the last run's update has not reached yet.
  if (i >= model->buffers.size() || !isTrainingState(*model->buffers[i]) ||
      model->feedbackPending)
    return -1;
  model->buffers[i]->deviceCurrent = false;
  model->buffers[i]->hostCurrent = true;
  return 0;
}

double weft_model_step_flops(const weft_model *model) {
  return model->stepFlops;
}

const char *weft_model_optimizer(const weft_model *model, double *beta1,
                                 double *beta2, int64_t *vocab) {
  if (vocab)
    *vocab = model->vocab;
  if (beta1)
    *beta1 = model->beta1;
  if (beta2)
    *beta2 = model->beta2;
  return model->optimizer.c_str();
}

const char *weft_model_token_input(const weft_model *model) {
  return model->tokenInput.c_str();
}

void *weft_model_output(weft_model *model, size_t i) {
  if (i >= model->buffers.size() || model->buffers[i]->info.role != WEFT_OUTPUT)
    return nullptr;
  return model->buffers[i]->owned;
}

void weft_model_device_stats(const weft_model *model,
                             weft_device_stats *stats) {
  *stats = model->device->stats();
}

double weft_model_run(weft_model *model, void (*entry)(void **), char *error,
                      size_t errorSize) {
  for (auto &buffer : model->buffers)
    if (buffer->info.role == WEFT_INPUT && !buffer->bound) {
      setError(error, errorSize,
               "input '" + buffer->name + "' has no data bound");
      return -1;
    }
  auto start = std::chrono::steady_clock::now();
  applyFeedback(model);
  if (model->device->sharesHostMemory()) {
    entry(model->argv.data());
  } else {
    // The inputs go to the device each run, params and state only when
    // the host's copy is newer; the outputs come back, but those fed back
    // stay to trade places with their targets on the device.
    for (size_t i = 0; i < model->buffers.size(); ++i) {
      Buffer &buffer = *model->buffers[i];
      if (buffer.info.role == WEFT_OUTPUT ||
          (isTrainingState(buffer) && buffer.deviceCurrent))
        continue;
      model->device->copyFromHost(buffer.device, model->argv[i],
                                  buffer.info.local_bytes);
      buffer.deviceCurrent = true;
    }
    entry(model->deviceArgv.data());
    for (auto &buffer : model->buffers)
      if (buffer->info.role == WEFT_OUTPUT && !buffer->fedBack)
        model->device->copyToHost(buffer->owned, buffer->device,
                                  buffer->info.local_bytes);
  }
  model->feedbackPending = !model->feedback.empty();
  model->device->synchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

} // extern "C"

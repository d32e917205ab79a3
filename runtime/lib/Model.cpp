//===- Model.cpp - Load a compiled model and run it -----------------------===//
//
// The manifest (a text the compiler embeds in the object) lists the entry
// function's buffers, one per line, after the mesh of a partitioned model:
//   weft-manifest 2
//   mesh <n> <name> <size>...          (partitioned models only)
//   groups <n> <axes mask>...          (partitioned models only)
//   optimizer <name> <beta1> <beta2> <vocab> <flops>   (training steps only;
//             flops: the whole step's contraction FLOPs over all ranks)
//   tokens <name>                      (training steps: the token input)
//   buffer <input|param|state|output> <name> <dtype> <rank> <global dims...>
//          <sharding> [<offset> <shard stride>]
// The sharding is a ShardSpec ("*" for a scalar). Params carry the byte
// offset of their first shard in the weights file and the distance between
// shards; the file starts with a 64-byte header: "WEFTWGT1", the manifest's
// FNV-1a hash, the file size.
//
//===----------------------------------------------------------------------===//

#include "weft/runtime/CApi.h"
#include "weft/runtime/Device.h"
#include "weft/runtime/ShardLayout.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <sstream>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
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
  void *owned = nullptr;       // outputs: runtime memory
};

uint64_t fnv1a(const char *text) {
  uint64_t h = 1469598103934665603ull;
  for (const char *p = text; *p; ++p)
    h = (h ^ uint8_t(*p)) * 1099511628211ull;
  return h;
}

std::string unescape(const std::string &s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out += char(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

bool parseDtype(const std::string &s, weft_dtype &dtype) {
  for (int d = WEFT_F32; d <= WEFT_BOOL; ++d)
    if (s == weft_dtype_name(weft_dtype(d))) {
      dtype = weft_dtype(d);
      return true;
    }
  return false;
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
  std::unique_ptr<Device> device = weft::runtime::createCpuDevice();
  void *weights = nullptr;
  size_t weightsSize = 0;
  std::vector<void *> argv;
};

extern "C" {

size_t weft_dtype_size(weft_dtype dtype) {
  switch (dtype) {
  case WEFT_F64:
  case WEFT_I64:
    return 8;
  case WEFT_F32:
  case WEFT_I32:
    return 4;
  case WEFT_F16:
  case WEFT_BF16:
    return 2;
  case WEFT_BOOL:
    return 1;
  }
  return 0;
}

const char *weft_dtype_name(weft_dtype dtype) {
  static const char *names[] = {"f32", "f64", "f16", "bf16",
                                "i64", "i32", "i1"};
  return dtype >= WEFT_F32 && dtype <= WEFT_BOOL ? names[dtype] : "?";
}

weft_model *weft_model_open(const char *manifest, const char *weightsPath,
                            char *error, size_t errorSize) {
  auto model = std::make_unique<weft_model>();
  std::istringstream lines(manifest);
  std::string line;
  if (!std::getline(lines, line) || line != "weft-manifest 2") {
    setError(error, errorSize, "the executable's manifest is not version 2");
    return nullptr;
  }
  uint64_t weightBytes = 0;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string keyword;
    fields >> keyword;
    if (keyword == "optimizer") {
      fields >> model->optimizer >> model->beta1 >> model->beta2 >>
          model->vocab >> model->stepFlops;
      continue;
    }
    if (keyword == "tokens") {
      std::string name;
      fields >> name;
      model->tokenInput = unescape(name);
      continue;
    }
    if (keyword == "mesh" || keyword == "groups") {
      size_t count = 0;
      fields >> count;
      for (size_t i = 0; i < count && fields; ++i) {
        if (keyword == "groups") {
          int64_t mask = 0;
          fields >> mask;
          model->groups.push_back(mask);
          continue;
        }
        std::string name;
        int64_t size = 0;
        fields >> name >> size;
        model->mesh.names.push_back(unescape(name));
        model->mesh.sizes.push_back(size);
      }
      if (!fields) {
        setError(error, errorSize, "malformed manifest line: " + line);
        return nullptr;
      }
      continue;
    }
    std::string role, name, dtype;
    int rank = 0;
    fields >> role >> name >> dtype >> rank;
    auto buffer = std::make_unique<Buffer>();
    buffer->name = unescape(name);
    buffer->shape.resize(rank);
    for (int64_t &d : buffer->shape)
      fields >> d;
    fields >> buffer->specText;
    weft_buffer_info &info = buffer->info;
    info.role = role == "input"   ? WEFT_INPUT
                : role == "param" ? WEFT_PARAM
                : role == "state" ? WEFT_STATE
                                  : WEFT_OUTPUT;
    if (keyword != "buffer" || !parseDtype(dtype, info.dtype) ||
        (role != "input" && role != "param" && role != "output" &&
         role != "state") ||
        !fields ||
        !ShardSpec::parse(buffer->specText == "*" ? "" : buffer->specText, rank,
                          buffer->spec)) {
      setError(error, errorSize, "malformed manifest line: " + line);
      return nullptr;
    }
    size_t count = 1;
    for (int64_t d : buffer->shape)
      count *= d;
    info.bytes = count * weft_dtype_size(info.dtype);
    if (info.role == WEFT_PARAM)
      fields >> buffer->offset >> buffer->shardStride;
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
  if (weightBytes) {
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
    const char *header = static_cast<const char *>(model->weights);
    uint64_t hash, size;
    if (model->weightsSize < 64 || memcmp(header, "WEFTWGT1", 8) != 0) {
      setError(error, errorSize,
               std::string("'") + weightsPath + "' is not a Weft weights file");
      weft_model_close(model.release());
      return nullptr;
    }
    memcpy(&hash, header + 8, 8);
    memcpy(&size, header + 16, 8);
    if (hash != fnv1a(manifest) || size != model->weightsSize ||
        weightBytes > model->weightsSize) {
      setError(error, errorSize,
               std::string("weights file '") + weightsPath +
                   "' does not belong to this executable (or is truncated)");
      weft_model_close(model.release());
      return nullptr;
    }
  }
  model->argv.assign(model->buffers.size(), nullptr);
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
      model->argv[i] = static_cast<char *>(model->weights) + buffer.offset +
                       shard * buffer.shardStride;
    } else if (buffer.info.role == WEFT_OUTPUT && !buffer.owned) {
      model->argv[i] = buffer.owned =
          model->device->allocate(buffer.info.local_bytes);
    } else if (buffer.info.role == WEFT_STATE && !buffer.owned) {
      model->argv[i] = buffer.owned =
          model->device->allocate(buffer.info.local_bytes);
      memset(buffer.owned, 0, buffer.info.local_bytes);
    }
  }
  return 0;
}

void weft_model_close(weft_model *model) {
  if (!model)
    return;
  for (auto &buffer : model->buffers)
    if (buffer->owned)
      model->device->deallocate(buffer->owned);
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

int weft_model_bind(weft_model *model, size_t i, void *data) {
  if (i >= model->buffers.size() ||
      (model->buffers[i]->info.role != WEFT_PARAM &&
       model->buffers[i]->info.role != WEFT_STATE))
    return -1;
  model->argv[i] = data;
  return 0;
}

void *weft_model_data(weft_model *model, size_t i) {
  return i < model->argv.size() ? model->argv[i] : nullptr;
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

double weft_model_run(weft_model *model, void (*entry)(void **), char *error,
                      size_t errorSize) {
  for (auto &buffer : model->buffers)
    if (buffer->info.role == WEFT_INPUT && !buffer->bound) {
      setError(error, errorSize,
               "input '" + buffer->name + "' has no data bound");
      return -1;
    }
  auto start = std::chrono::steady_clock::now();
  entry(model->argv.data());
  model->device->synchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

} // extern "C"

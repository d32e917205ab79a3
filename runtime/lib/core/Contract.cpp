//===- Contract.cpp - What the compiler and the runtime agree on ----------===//

#include "weft/runtime/Contract.h"

#include "core/Json.h"

#include <cstring>

namespace weft::runtime {

namespace {

constexpr const char *kDtypeNames[] = {"f32", "f64", "f16", "bf16",
                                       "i64", "i32", "i1"};
constexpr const char *kRoleNames[] = {"input", "param", "output", "state"};
constexpr const char *kGradSyncNames[] = {"library", "ring", "tree", "ps",
                                          "hierarchical"};
constexpr char kWeightsMagic[8] = {'W', 'E', 'F', 'T', 'W', 'G', 'T', '1'};

std::string jsonNumber(double value) {
  char text[32];
  snprintf(text, sizeof(text), "%.17g", value);
  return text;
}

template <typename T> std::string jsonIntegers(const std::vector<T> &values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i)
    text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

/// Reads the manifest's members, each checked for its type.
class Reader {
public:
  explicit Reader(std::string &error) : error(error) {}

  bool fail(const std::string &message) {
    error = "is malformed: " + message;
    return false;
  }
  bool member(const JsonValue &object, const char *key, JsonValue::Kind kind,
              const JsonValue *&value, bool optional = false) {
    value = object.get(key);
    if (!value)
      return optional || fail(std::string("no '") + key + "'");
    return value->kind == kind ||
           fail(std::string("'") + key + "' has the " + "wrong type");
  }
  bool integer(const JsonValue &object, const char *key, int64_t &out) {
    const JsonValue *value;
    if (!member(object, key, JsonValue::Kind::Number, value))
      return false;
    out = value->asInt();
    return double(out) == value->number ||
           fail(std::string("'") + key + "' is not an integer");
  }
  bool number(const JsonValue &object, const char *key, double &out) {
    const JsonValue *value;
    if (!member(object, key, JsonValue::Kind::Number, value))
      return false;
    out = value->number;
    return true;
  }
  bool string(const JsonValue &object, const char *key, std::string &out) {
    const JsonValue *value;
    if (!member(object, key, JsonValue::Kind::String, value))
      return false;
    out = value->string;
    return true;
  }
  bool integers(const JsonValue &object, const char *key,
                std::vector<int64_t> &out) {
    const JsonValue *value;
    if (!member(object, key, JsonValue::Kind::Array, value))
      return false;
    for (const JsonValue &item : value->array) {
      if (item.kind != JsonValue::Kind::Number ||
          double(item.asInt()) != item.number)
        return fail(std::string("'") + key + "' holds a non-integer");
      out.push_back(item.asInt());
    }
    return true;
  }

private:
  std::string &error;
};

} // namespace

std::optional<weft_dtype> parseDtype(const std::string &name) {
  for (int d = WEFT_F32; d <= WEFT_BOOL; ++d)
    if (name == kDtypeNames[d])
      return weft_dtype(d);
  return std::nullopt;
}

const char *gradSyncName(GradSync sync) { return kGradSyncNames[int(sync)]; }

std::optional<GradSync> parseGradSync(const std::string &name) {
  for (int s = 0; s <= int(GradSync::Hierarchical); ++s)
    if (name == kGradSyncNames[s])
      return GradSync(s);
  return std::nullopt;
}

std::string Manifest::toJson() const {
  std::string json = "{\"format\": \"weft-manifest\", \"version\": " +
                     std::to_string(kManifestVersion) +
                     ",\n \"device\": " + jsonQuote(device) + ", \"mesh\": [";
  for (size_t i = 0; i < mesh.names.size(); ++i)
    json += std::string(i ? ", " : "") +
            "{\"name\": " + jsonQuote(mesh.names[i]) +
            ", \"size\": " + std::to_string(mesh.sizes[i]) + "}";
  json += "],\n \"groups\": " + jsonIntegers(groups);
  json += ",\n \"grad_sync\": {\"algorithm\": " +
          jsonQuote(gradSyncName(gradSync)) +
          ", \"axes\": " + std::to_string(gradSyncAxes) + "}";
  json += ",\n \"dp_sync\": {\"every\": " + std::to_string(dpSyncEvery) +
          ", \"axes\": " + std::to_string(dpSyncAxes) + "}";
  if (training)
    json +=
        ",\n \"training\": {\"optimizer\": " + jsonQuote(training->optimizer) +
        ", \"beta1\": " + jsonNumber(training->beta1) +
        ", \"beta2\": " + jsonNumber(training->beta2) +
        ", \"vocab\": " + std::to_string(training->vocab) +
        ", \"step_flops\": " + jsonNumber(training->stepFlops) +
        ", \"token_input\": " + jsonQuote(training->tokenInput) + "}";
  json += ",\n \"buffers\": [";
  for (size_t i = 0; i < buffers.size(); ++i) {
    const ManifestBuffer &b = buffers[i];
    json += std::string(i ? ",\n  " : "\n  ") +
            "{\"role\": " + jsonQuote(kRoleNames[b.role]) +
            ", \"name\": " + jsonQuote(b.name) +
            ", \"dtype\": " + jsonQuote(kDtypeNames[b.dtype]) +
            ", \"shape\": " + jsonIntegers(b.shape) +
            ", \"sharding\": " + jsonQuote(b.sharding);
    if (b.role == WEFT_PARAM)
      json += ", \"weights_offset\": " + std::to_string(b.weightsOffset) +
              ", \"shard_stride\": " + std::to_string(b.shardStride);
    if (b.indexBound > 0)
      json += ", \"index_bound\": " + std::to_string(b.indexBound);
    json += "}";
  }
  return json + "]}\n";
}

std::optional<Manifest> Manifest::parse(const std::string &json,
                                        std::string &error) {
  JsonValue root;
  std::string jsonError;
  if (!parseJson(json, root, jsonError) ||
      root.kind != JsonValue::Kind::Object) {
    error = "is not a JSON object (written by a Weft older than manifest "
            "version 3?)";
    return std::nullopt;
  }
  Reader read(error);
  std::string format;
  int64_t version = 0;
  if (!read.string(root, "format", format) ||
      !read.integer(root, "version", version))
    return std::nullopt;
  if (format != "weft-manifest") {
    read.fail("its format is '" + format + "', not 'weft-manifest'");
    return std::nullopt;
  }
  if (version != kManifestVersion) {
    error = "is version " + std::to_string(version) +
            " and this runtime reads version " +
            std::to_string(kManifestVersion) +
            ": compile the model with this Weft";
    return std::nullopt;
  }
  Manifest manifest;
  const JsonValue *mesh, *buffers, *training, *gradSync, *dpSync;
  if (!read.string(root, "device", manifest.device))
    return std::nullopt;
  if (manifest.device != kCpuDevice && manifest.device != kCudaDevice &&
      manifest.device != kEmulatedCudaDevice) {
    read.fail("its device is '" + manifest.device +
              "', not cpu, cuda or cuda-emulation");
    return std::nullopt;
  }
  if (!read.member(root, "mesh", JsonValue::Kind::Array, mesh) ||
      !read.integers(root, "groups", manifest.groups) ||
      !read.member(root, "grad_sync", JsonValue::Kind::Object, gradSync,
                   /*optional=*/true) ||
      !read.member(root, "dp_sync", JsonValue::Kind::Object, dpSync,
                   /*optional=*/true) ||
      !read.member(root, "buffers", JsonValue::Kind::Array, buffers) ||
      !read.member(root, "training", JsonValue::Kind::Object, training,
                   /*optional=*/true))
    return std::nullopt;
  for (const JsonValue &axis : mesh->array) {
    std::string name;
    int64_t size;
    if (axis.kind != JsonValue::Kind::Object ||
        !read.string(axis, "name", name) || !read.integer(axis, "size", size))
      return std::nullopt;
    if (size < 1) {
      read.fail("mesh axis '" + name + "' has size " + std::to_string(size));
      return std::nullopt;
    }
    manifest.mesh.names.push_back(name);
    manifest.mesh.sizes.push_back(size);
  }
  if (gradSync) {
    std::string algorithm;
    if (!read.string(*gradSync, "algorithm", algorithm) ||
        !read.integer(*gradSync, "axes", manifest.gradSyncAxes))
      return std::nullopt;
    std::optional<GradSync> sync = parseGradSync(algorithm);
    if (!sync) {
      read.fail("its grad_sync algorithm is '" + algorithm +
                "', not library, ring, tree, ps or hierarchical");
      return std::nullopt;
    }
    manifest.gradSync = *sync;
  }
  if (dpSync) {
    if (!read.integer(*dpSync, "every", manifest.dpSyncEvery) ||
        !read.integer(*dpSync, "axes", manifest.dpSyncAxes))
      return std::nullopt;
    if (manifest.dpSyncEvery < 1) {
      read.fail("its dp_sync is every " + std::to_string(manifest.dpSyncEvery) +
                " steps");
      return std::nullopt;
    }
  }
  if (training) {
    ManifestTraining t;
    if (!read.string(*training, "optimizer", t.optimizer) ||
        !read.number(*training, "beta1", t.beta1) ||
        !read.number(*training, "beta2", t.beta2) ||
        !read.integer(*training, "vocab", t.vocab) ||
        !read.number(*training, "step_flops", t.stepFlops) ||
        !read.string(*training, "token_input", t.tokenInput))
      return std::nullopt;
    manifest.training = std::move(t);
  }
  for (const JsonValue &item : buffers->array) {
    ManifestBuffer b;
    std::string role, dtype;
    if (item.kind != JsonValue::Kind::Object ||
        !read.string(item, "role", role) ||
        !read.string(item, "name", b.name) ||
        !read.string(item, "dtype", dtype) ||
        !read.integers(item, "shape", b.shape) ||
        !read.string(item, "sharding", b.sharding))
      return std::nullopt;
    std::optional<weft_dtype> parsed = parseDtype(dtype);
    if (!parsed) {
      read.fail("buffer '" + b.name + "' has the unknown dtype '" + dtype +
                "'");
      return std::nullopt;
    }
    b.dtype = *parsed;
    int roleIndex = 0;
    while (roleIndex < 4 && role != kRoleNames[roleIndex])
      ++roleIndex;
    if (roleIndex == 4) {
      read.fail("buffer '" + b.name + "' has the unknown role '" + role + "'");
      return std::nullopt;
    }
    b.role = weft_role(roleIndex);
    for (int64_t d : b.shape)
      if (d < 0) {
        read.fail("buffer '" + b.name + "' has a negative dim");
        return std::nullopt;
      }
    ShardSpec spec;
    if (!ShardSpec::parse(b.sharding, b.shape.size(), spec) ||
        !spec.fits(manifest.mesh)) {
      read.fail("buffer '" + b.name + "' has the bad sharding '" + b.sharding +
                "'");
      return std::nullopt;
    }
    for (size_t d = 0; d < spec.dims.size(); ++d)
      if (spec.dims[d].zigzag &&
          b.shape[d] % (2 * manifest.mesh.sizes[spec.dims[d].axes[0]]) != 0) {
        read.fail("buffer '" + b.name + "' has the sharding '" + b.sharding +
                  "', but its dim " + std::to_string(d) +
                  " does not split into two chunks per rank");
        return std::nullopt;
      }
    if (b.role == WEFT_PARAM) {
      int64_t offset, stride;
      if (!read.integer(item, "weights_offset", offset) ||
          !read.integer(item, "shard_stride", stride))
        return std::nullopt;
      if (offset < 0 || stride < 0) {
        read.fail("buffer '" + b.name + "' has a negative weights offset");
        return std::nullopt;
      }
      b.weightsOffset = uint64_t(offset);
      b.shardStride = uint64_t(stride);
    }
    if (item.get("index_bound") &&
        (!read.integer(item, "index_bound", b.indexBound) || b.indexBound < 1 ||
         b.role != WEFT_INPUT)) {
      read.fail("buffer '" + b.name + "' has a bad 'index_bound'");
      return std::nullopt;
    }
    manifest.buffers.push_back(std::move(b));
  }
  return manifest;
}

void WeightsHeader::write(char (&header)[kWeightsHeaderBytes]) const {
  memset(header, 0, sizeof(header));
  memcpy(header, kWeightsMagic, sizeof(kWeightsMagic));
  memcpy(header + 8, &manifestHash, 8);
  memcpy(header + 16, &fileBytes, 8);
}

bool WeightsHeader::read(const void *data, uint64_t size,
                         WeightsHeader &header) {
  const char *bytes = static_cast<const char *>(data);
  if (size < kWeightsHeaderBytes ||
      memcmp(bytes, kWeightsMagic, sizeof(kWeightsMagic)) != 0)
    return false;
  memcpy(&header.manifestHash, bytes + 8, 8);
  memcpy(&header.fileBytes, bytes + 16, 8);
  return true;
}

uint64_t manifestHash(const std::string &manifest) {
  uint64_t h = 1469598103934665603ull;
  for (char c : manifest)
    h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return h;
}

} // namespace weft::runtime

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
  return dtype >= WEFT_F32 && dtype <= WEFT_BOOL
             ? weft::runtime::kDtypeNames[dtype]
             : "?";
}

} // extern "C"

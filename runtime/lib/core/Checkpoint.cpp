//===- Checkpoint.cpp - Sharded training checkpoints ----------------------===//

#include "weft/runtime/Checkpoint.h"
#include "core/Json.h"
#include "weft/runtime/ShardLayout.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <unistd.h>

namespace fs = std::filesystem;

namespace weft::runtime {
namespace {

constexpr const char *formatName = "weft-checkpoint/2";

std::string hex32(uint32_t value) {
  char text[9];
  snprintf(text, sizeof(text), "%08x", value);
  return text;
}

/// What the index records of each rank file, and checks on load.
struct FileDigest {
  int64_t bytes = 0;
  int64_t crc = 0;
};

constexpr const char *indexChecksumKey = "\"index_crc32\": \"";

/// Where the eight digits of the index's checksum are in `text` (npos when
/// it has none).
size_t indexChecksumAt(const std::string &text) {
  size_t at = text.rfind(indexChecksumKey);
  if (at == std::string::npos ||
      at + strlen(indexChecksumKey) + 8 > text.size())
    return std::string::npos;
  return at + strlen(indexChecksumKey);
}

uint32_t indexChecksum(std::string text, size_t digitsAt) {
  text.replace(digitsAt, 8, "00000000");
  return crc32(0, text.data(), text.size());
}

const char *safetensorsDtype(weft_dtype dtype) {
  static const char *names[] = {"F32", "F64", "F16", "BF16",
                                "I64", "I32", "BOOL"};
  return names[dtype];
}

std::string stepName(int64_t step) {
  char name[32];
  snprintf(name, sizeof(name), "step-%07lld", static_cast<long long>(step));
  return name;
}

std::string rankFile(int64_t rank) {
  char name[40];
  snprintf(name, sizeof(name), "rank-%05lld.safetensors",
           static_cast<long long>(rank));
  return name;
}

std::string shapeJson(const int64_t *shape, int rank) {
  std::string text = "[";
  for (int d = 0; d < rank; ++d)
    text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + "]";
}

/// Whether the rank at `coords` writes its shard: it is at coordinate 0 of
/// every mesh axis the spec does not split (the replicas' first).
/// Which ranks hold each tensor: every rank's names, gathered. With
/// pipeline parallelism the ranks of different stages hold different
/// tensors (and a tied one is held by two stages).
using Holders = std::map<std::string, std::vector<int64_t>>;

Holders gatherHolders(Communicator &everyone,
                      const std::vector<CheckpointTensor> &tensors) {
  std::string names;
  for (const CheckpointTensor &tensor : tensors)
    names += std::string(tensor.info->name) + "\n";
  int64_t length = int64_t(names.size());
  std::vector<int64_t> lengths(everyone.size());
  everyone.allGather(&length, lengths.data(), 1, WEFT_I64);
  int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  names.resize(longest, '\0');
  std::vector<char> all(longest * everyone.size());
  everyone.allGather(names.data(), all.data(), longest, WEFT_BOOL);
  Holders holders;
  for (int64_t r = 0; r < everyone.size(); ++r) {
    std::istringstream list(std::string(all.data() + r * longest, lengths[r]));
    for (std::string name; std::getline(list, name);)
      holders[name].push_back(r);
  }
  return holders;
}

/// The rank whose file stores each shard of a tensor: the first holder of
/// that shard (the one at coordinate 0 of every axis it is replicated on).
std::map<int64_t, int64_t> shardOwners(const ShardSpec &spec,
                                       const std::vector<int64_t> &holders,
                                       const MeshShape &mesh) {
  std::map<int64_t, int64_t> owners;
  for (int64_t rank : holders)
    owners.try_emplace(
        mesh.sizes.empty() ? 0 : spec.shardIndex(mesh.coordinates(rank), mesh),
        rank);
  return owners;
}

bool ownsShard(const ShardSpec &spec, const std::vector<int64_t> &holders,
               const World &world) {
  for (auto [shard, owner] : shardOwners(spec, holders, world.mesh))
    if (owner == world.rank)
      return true;
  return false;
}

/// Writes the pieces to `path` and flushes it to disk; `digest`, when
/// given, gets their size and checksum.
bool writeDurably(const std::string &path,
                  const std::vector<std::pair<const void *, size_t>> &pieces,
                  std::string &error, FileDigest *digest = nullptr) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    error = "cannot write '" + path + "': " + strerror(errno);
    return false;
  }
  uint32_t crc = 0;
  int64_t total = 0;
  for (auto [data, size] : pieces) {
    crc = crc32(crc, data, size);
    total += int64_t(size);
    const char *p = static_cast<const char *>(data);
    while (size > 0) {
      ssize_t n = write(fd, p, size);
      if (n < 0) {
        error = "cannot write '" + path + "': " + strerror(errno);
        close(fd);
        return false;
      }
      p += n;
      size -= size_t(n);
    }
  }
  bool synced = fsync(fd) == 0;
  if (!synced)
    error = "cannot flush '" + path + "' to disk: " + strerror(errno);
  close(fd);
  if (digest)
    *digest = {total, int64_t(crc)};
  return synced;
}

void syncDirectory(const std::string &path) {
  int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}

/// The safetensors file of this rank's owned shards.
bool writeRankFile(const std::string &path, const World &world,
                   const std::vector<CheckpointTensor> &tensors,
                   const Holders &holders, FileDigest &digest,
                   std::string &error) {
  std::string header = "{\"__metadata__\": {\"format\": \"weft\"}";
  std::vector<std::pair<const void *, size_t>> pieces;
  size_t offset = 0;
  for (const CheckpointTensor &tensor : tensors) {
    const weft_buffer_info *info = tensor.info;
    if (!ownsShard(bufferSpec(info), holders.at(info->name), world))
      continue;
    header += ", " + jsonQuote(info->name) + ": {\"dtype\": \"" +
              safetensorsDtype(info->dtype) +
              "\", \"shape\": " + shapeJson(info->local_shape, info->rank) +
              ", \"data_offsets\": [" + std::to_string(offset) + ", " +
              std::to_string(offset + info->local_bytes) + "]}";
    pieces.emplace_back(tensor.data, info->local_bytes);
    offset += info->local_bytes;
  }
  header += "}";
  // The data starts 8-byte aligned, as safetensors recommends.
  header.append((8 - header.size() % 8) % 8, ' ');
  uint64_t headerSize = header.size(); // little-endian on every target here
  pieces.insert(pieces.begin(),
                {{&headerSize, 8}, {header.data(), header.size()}});
  return writeDurably(path, pieces, error, &digest);
}

/// The index entries of the tensors whose first holder is this rank.
std::string indexEntries(const World &world,
                         const std::vector<CheckpointTensor> &tensors,
                         const Holders &holders) {
  std::ostringstream out;
  for (const CheckpointTensor &tensor : tensors) {
    const weft_buffer_info *info = tensor.info;
    const std::vector<int64_t> &held = holders.at(info->name);
    if (held.empty() || held.front() != world.rank)
      continue;
    ShardSpec spec = bufferSpec(info);
    out << ",\n    " << jsonQuote(info->name) << ": {\"role\": \""
        << (info->role == WEFT_PARAM ? "param" : "optimizer-state")
        << "\", \"dtype\": \"" << safetensorsDtype(info->dtype)
        << "\", \"shape\": " << shapeJson(info->shape, info->rank)
        << ", \"sharding\": " << jsonQuote(spec.str()) << ", \"shards\": [";
    bool first = true;
    for (auto [shard, owner] : shardOwners(spec, held, world.mesh)) {
      out << (first ? "" : ", ") << "{\"file\": \"" << rankFile(owner)
          << "\", \"shard\": " << shard << "}";
      first = false;
    }
    out << "]}";
  }
  return out.str();
}

/// Every rank's entries and file digest, in an index on rank 0 (empty
/// elsewhere).
std::string indexJson(const CheckpointState &state, const World &world,
                      Communicator &everyone, const std::string &entries,
                      const FileDigest &digest) {
  int64_t mine[2] = {digest.bytes, digest.crc};
  std::vector<int64_t> digests(2 * everyone.size());
  everyone.allGather(mine, digests.data(), 2, WEFT_I64);
  int64_t length = int64_t(entries.size());
  std::vector<int64_t> lengths(everyone.size());
  everyone.allGather(&length, lengths.data(), 1, WEFT_I64);
  int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  std::string padded = entries;
  padded.resize(longest, '\0');
  std::vector<char> all(longest * everyone.size());
  everyone.allGather(padded.data(), all.data(), longest, WEFT_BOOL);
  if (world.rank != 0)
    return "";
  std::string tensors;
  for (int64_t r = 0; r < everyone.size(); ++r)
    tensors.append(all.data() + r * longest, lengths[r]);
  std::ostringstream out;
  out << "{\n  \"format\": \"" << formatName
      << "\",\n  \"step\": " << state.step << ",\n  \"seed\": " << state.seed
      << ",\n  \"mesh\": " << jsonQuote(world.mesh.describe())
      << ",\n  \"files\": {";
  for (int64_t r = 0; r < everyone.size(); ++r)
    out << (r ? ",\n    " : "\n    ") << "\"" << rankFile(r)
        << "\": {\"bytes\": " << digests[2 * r] << ", \"crc32\": \""
        << hex32(uint32_t(digests[2 * r + 1])) << "\"}";
  out << "\n  },\n  \"tensors\": {" << tensors.substr(tensors.empty() ? 0 : 1)
      << "\n  },\n  " << indexChecksumKey << "00000000\"\n}\n";
  std::string text = out.str();
  sealIndex(text);
  return text;
}

/// Agrees over every rank: true when `ok` holds on all of them.
bool allAgree(Communicator &everyone, bool ok) {
  int32_t failed = ok ? 0 : 1;
  everyone.allReduce(&failed, 1, WEFT_I32, ReduceOp::Max);
  return failed == 0;
}

bool readFile(const std::string &path, std::string &contents) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return false;
  std::ostringstream buffer;
  buffer << file.rdbuf();
  contents = buffer.str();
  return true;
}

/// A rank file's header and data, read once per load.
struct RankFile {
  JsonValue header;
  std::string bytes;
  size_t dataStart = 0;
};

/// Reads a rank file and checks it against the index's digest of it.
bool openRankFile(const std::string &path, const JsonValue *digest,
                  RankFile &file, std::string &error) {
  if (!readFile(path, file.bytes)) {
    error = "cannot read '" + path + "'";
    return false;
  }
  const JsonValue *bytes = digest ? digest->get("bytes") : nullptr;
  const JsonValue *crc = digest ? digest->get("crc32") : nullptr;
  if (!bytes || !crc) {
    error = "the index has no size and CRC-32 of '" + path + "'";
    return false;
  }
  if (int64_t(file.bytes.size()) != bytes->asInt()) {
    error =
        "'" + path + "' is " +
        (int64_t(file.bytes.size()) < bytes->asInt() ? "truncated" : "longer") +
        ": it has " + std::to_string(file.bytes.size()) +
        " bytes, the index says " + std::to_string(bytes->asInt());
    return false;
  }
  std::string actual = hex32(crc32(0, file.bytes.data(), file.bytes.size()));
  if (actual != crc->string) {
    error = "'" + path + "' is corrupt: its CRC-32 is " + actual +
            ", the index says " + crc->string;
    return false;
  }
  uint64_t headerSize = 0;
  if (file.bytes.size() < 8) {
    error = "'" + path + "' is not a safetensors file";
    return false;
  }
  memcpy(&headerSize, file.bytes.data(), 8);
  if (headerSize > file.bytes.size() - 8) {
    error = "'" + path + "' is truncated: its header needs " +
            std::to_string(headerSize + 8) + " bytes, the file has " +
            std::to_string(file.bytes.size());
    return false;
  }
  std::string message;
  if (!parseJson(file.bytes.substr(8, headerSize), file.header, message) ||
      file.header.kind != JsonValue::Kind::Object) {
    error = "'" + path + "' has a malformed header: " + message;
    return false;
  }
  file.dataStart = 8 + headerSize;
  return true;
}

std::vector<int64_t> intList(const JsonValue *value) {
  std::vector<int64_t> list;
  if (value && value->kind == JsonValue::Kind::Array)
    for (const JsonValue &item : value->array)
      list.push_back(item.asInt());
  return list;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t d = 0; d < shape.size(); ++d)
    text += (d ? "," : "") + std::to_string(shape[d]);
  return text + "]";
}

} // namespace

uint32_t crc32(uint32_t crc, const void *data, size_t size) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> entries;
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int bit = 0; bit < 8; ++bit)
        c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
      entries[i] = c;
    }
    return entries;
  }();
  const uint8_t *bytes = static_cast<const uint8_t *>(data);
  crc = ~crc;
  for (size_t i = 0; i < size; ++i)
    crc = table[(crc ^ bytes[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

bool sealIndex(std::string &index) {
  size_t digitsAt = indexChecksumAt(index);
  if (digitsAt == std::string::npos)
    return false;
  index.replace(digitsAt, 8, hex32(indexChecksum(index, digitsAt)));
  return true;
}

bool saveCheckpoint(const std::string &dir, const CheckpointState &state,
                    const World &world, Communicator &everyone,
                    const std::vector<CheckpointTensor> &tensors,
                    std::string &error,
                    const std::function<bool(int64_t rank)> &from) {
  std::string name = stepName(state.step);
  fs::path temp = fs::path(dir) / ("." + name + ".tmp");
  fs::path final = fs::path(dir) / name;
  std::error_code ec;
  if (world.rank == 0) {
    fs::create_directories(dir, ec);
    fs::remove_all(temp, ec);
    ec.clear();
    fs::create_directories(temp, ec);
    if (ec)
      error = "cannot create the checkpoint directory '" + temp.string() +
              "': " + ec.message();
  }
  if (!allAgree(everyone, !ec))
    return false;
  Holders holders = gatherHolders(everyone, tensors);
  if (from)
    for (auto &[tensor, ranks] : holders)
      ranks.erase(std::remove_if(ranks.begin(), ranks.end(),
                                 [&](int64_t rank) { return !from(rank); }),
                  ranks.end());
  FileDigest digest;
  bool ok = writeRankFile((temp / rankFile(world.rank)).string(), world,
                          tensors, holders, digest, error);
  // A save that fails leaves no partial directory behind to fill the disk.
  auto discard = [&] {
    if (world.rank == 0) {
      fs::remove_all(temp, ec);
      fs::remove(fs::path(dir) / ".latest.tmp", ec);
    }
  };
  if (!allAgree(everyone, ok)) {
    discard();
    return false;
  }
  std::string index = indexJson(state, world, everyone,
                                indexEntries(world, tensors, holders), digest);
  if (world.rank == 0) {
    ok = writeDurably((temp / "index.json").string(),
                      {{index.data(), index.size()}}, error);
    syncDirectory(temp.string());
    if (ok) {
      fs::remove_all(final, ec);
      fs::rename(temp, final, ec);
      std::string latest = name + "\n";
      fs::path latestTemp = fs::path(dir) / ".latest.tmp";
      ok = !ec && writeDurably(latestTemp.string(),
                               {{latest.data(), latest.size()}}, error);
      if (ok)
        fs::rename(latestTemp, fs::path(dir) / "latest", ec);
      if (ec) {
        ok = false;
        error = "cannot publish checkpoint '" + final.string() +
                "': " + ec.message();
      }
      syncDirectory(dir);
    }
  }
  if (!allAgree(everyone, ok)) {
    discard();
    return false;
  }
  return true;
}

std::vector<std::string> resumableCheckpoints(const std::string &dir) {
  std::ifstream latest(fs::path(dir) / "latest");
  std::string newest;
  if (!(latest >> newest) || newest.find('/') != std::string::npos)
    newest.clear();
  std::vector<std::string> names;
  std::error_code ec;
  for (const fs::directory_entry &entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("step-", 0) == 0 && name != newest && entry.is_directory())
      names.push_back(name);
  }
  // Zero-padded steps sort as numbers.
  std::sort(names.rbegin(), names.rend());
  if (!newest.empty())
    names.insert(names.begin(), newest);
  std::vector<std::string> paths;
  for (const std::string &name : names)
    paths.push_back((fs::path(dir) / name).string());
  return paths;
}

bool loadCheckpoint(const std::string &path, const World &world,
                    const std::vector<CheckpointTensor> &tensors,
                    CheckpointState &state, std::string &error) {
  std::string text, message;
  JsonValue index;
  std::string indexPath = (fs::path(path) / "index.json").string();
  if (!readFile(indexPath, text)) {
    error = "cannot read checkpoint '" + path + "' (no index.json)";
    return false;
  }
  size_t digitsAt = indexChecksumAt(text);
  if (digitsAt == std::string::npos) {
    error = "'" + indexPath + "' has no checksum (index_crc32): it is not a " +
            formatName + " index";
    return false;
  }
  std::string recorded = text.substr(digitsAt, 8);
  std::string actual = hex32(indexChecksum(text, digitsAt));
  if (actual != recorded) {
    error = "'" + indexPath + "' is corrupt: its CRC-32 is " + actual +
            ", it records " + recorded;
    return false;
  }
  const JsonValue *format, *step, *seed, *meshText, *digests, *entries;
  MeshShape savedMesh;
  if (!parseJson(text, index, message) || !(format = index.get("format")) ||
      format->string != formatName || !(step = index.get("step")) ||
      !(seed = index.get("seed")) || !(meshText = index.get("mesh")) ||
      !MeshShape::parse(meshText->string, savedMesh) ||
      !(digests = index.get("files")) || !(entries = index.get("tensors"))) {
    error = "'" + indexPath + "' is not a " + formatName + " index" +
            (message.empty() ? "" : ": " + message);
    return false;
  }
  // A seed is below 2^64 and a step is a count.
  if (step->asInt() < 0 || !(seed->number >= 0 && seed->number < 1.8e19)) {
    error = "'" + indexPath + "' has a bad step or seed";
    return false;
  }
  state.step = step->asInt();
  state.seed = static_cast<uint64_t>(seed->number);

  std::map<std::string, RankFile> files;
  std::vector<char> global;
  for (const CheckpointTensor &tensor : tensors) {
    const weft_buffer_info *info = tensor.info;
    std::string name = info->name;
    const JsonValue *entry = entries->get(name);
    if (!entry) {
      error = "checkpoint '" + path + "' has no tensor '" + name + "'";
      return false;
    }
    std::vector<int64_t> shape(info->shape, info->shape + info->rank);
    const JsonValue *dtype = entry->get("dtype");
    std::vector<int64_t> savedShape = intList(entry->get("shape"));
    if (!dtype || dtype->string != safetensorsDtype(info->dtype) ||
        savedShape != shape) {
      error = "tensor '" + name + "' is " + (dtype ? dtype->string : "?") +
              " " + shapeText(savedShape) + " in checkpoint '" + path +
              "' but " + safetensorsDtype(info->dtype) + " " +
              shapeText(shape) + " in the model";
      return false;
    }
    const JsonValue *sharding = entry->get("sharding");
    const JsonValue *shards = entry->get("shards");
    ShardSpec savedSpec;
    if (!sharding || !shards ||
        !ShardSpec::parse(sharding->string, shape.size(), savedSpec) ||
        !savedSpec.fits(savedMesh)) {
      error =
          "tensor '" + name + "' has a malformed entry in '" + indexPath + "'";
      return false;
    }
    std::vector<int64_t> savedLocal = savedSpec.localShape(shape, savedMesh);
    size_t elementSize = weft_dtype_size(info->dtype);
    size_t savedBytes = elementSize;
    for (int64_t size : savedLocal)
      savedBytes *= size_t(size);
    global.assign(info->bytes, 0);
    std::set<int64_t> covered;
    for (const JsonValue &shard : shards->array) {
      const JsonValue *file = shard.get("file");
      const JsonValue *which = shard.get("shard");
      if (!file || !which || file->string.find('/') != std::string::npos ||
          which->asInt() < 0 ||
          which->asInt() >= savedSpec.numShards(savedMesh) ||
          !covered.insert(which->asInt()).second) {
        error = "tensor '" + name + "' has a malformed shard in '" + indexPath +
                "'";
        return false;
      }
      auto [it, fresh] = files.try_emplace(file->string);
      if (fresh && !openRankFile((fs::path(path) / file->string).string(),
                                 digests->get(file->string), it->second, error))
        return false;
      const RankFile &rankFile = it->second;
      const JsonValue *stored = rankFile.header.get(name);
      std::vector<int64_t> offsets =
          intList(stored ? stored->get("data_offsets") : nullptr);
      if (!stored || intList(stored->get("shape")) != savedLocal ||
          offsets.size() != 2 ||
          offsets[1] - offsets[0] != int64_t(savedBytes) ||
          rankFile.dataStart + size_t(offsets[1]) > rankFile.bytes.size()) {
        error = "'" + file->string + "' of checkpoint '" + path +
                "' does not hold shard " + std::to_string(which->asInt()) +
                " of tensor '" + name + "' as its index says";
        return false;
      }
      savedSpec.insert(rankFile.bytes.data() + rankFile.dataStart + offsets[0],
                       global.data(), shape, elementSize, which->asInt(),
                       savedMesh);
    }
    if (int64_t(covered.size()) != savedSpec.numShards(savedMesh)) {
      error = "checkpoint '" + path + "' has " +
              std::to_string(covered.size()) + " of the " +
              std::to_string(savedSpec.numShards(savedMesh)) +
              " shards of tensor '" + name + "'";
      return false;
    }
    ShardSpec spec = bufferSpec(info);
    spec.extract(global.data(), tensor.data, shape, elementSize,
                 spec.shardIndex(world.coordinates, world.mesh), world.mesh);
  }
  return true;
}

} // namespace weft::runtime

//===- Checkpoint.h - Sharded training checkpoints --------------*- C++ -*-===//
//
// A checkpoint is a directory `<dir>/step-NNNNNNN` holding one safetensors
// file per rank that owns a shard (`rank-NNNNN.safetensors`, the rank's
// local shard of each tensor under the tensor's name) and `index.json`,
// which records the mesh, the step, the seed, each rank file's size and
// CRC-32 and, per tensor, its role, dtype, global shape, sharding spec and
// which file holds which shard; the index ends with a CRC-32 of itself. A
// replicated shard is written once, by the rank at coordinate 0 of every
// axis that does not split it.
//
// Saving is atomic: the ranks write into `.step-NNNNNNN.tmp`, agree that
// every file is on disk, and rank 0 renames the directory and then points
// `<dir>/latest` at it (temp file + rename). A run killed mid-save, or a
// save that fails (a full disk), leaves the previous checkpoint and
// `latest` as they were.
//
// Loading checks every file it reads against the index's checksums,
// assembles each global tensor from the shards named in the index and
// keeps this rank's shard under the current sharding, so a checkpoint
// saved under one mesh loads under another.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_CHECKPOINT_H
#define WEFT_RUNTIME_CHECKPOINT_H

#include "weft/runtime/CApi.h"
#include "weft/runtime/Collectives.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace weft::runtime {

/// One tensor of a checkpoint: its buffer (name, role, dtype, shapes and
/// sharding) and this rank's shard of it, local_bytes long.
struct CheckpointTensor {
  const weft_buffer_info *info;
  void *data;
};

struct CheckpointState {
  int64_t step = 0;
  uint64_t seed = 0;
};

/// Saves `tensors` as `<dir>/step-NNNNNNN`. Collective: every rank of
/// `everyone` calls it; all of them fail or none does. `error` says why on
/// the ranks that failed, and is empty on those that stopped only because
/// another did. `from`, when given, picks the ranks whose copies are
/// stored: one local-SGD replica's model, before the replicas average.
bool saveCheckpoint(const std::string &dir, const CheckpointState &state,
                    const World &world, Communicator &everyone,
                    const std::vector<CheckpointTensor> &tensors,
                    std::string &error,
                    const std::function<bool(int64_t rank)> &from = nullptr);

/// CRC-32 (zlib's) of `size` bytes, continued from `crc`: the checksum the
/// index records of each rank file.
uint32_t crc32(uint32_t crc, const void *data, size_t size);

/// Writes an index's own checksum into its "index_crc32" digits: the
/// CRC-32 of the text with those digits as zeros. False when it has none.
bool sealIndex(std::string &index);

/// The checkpoints of `<dir>` to resume from, best first: the one
/// `<dir>/latest` points at, then every other `step-NNNNNNN`, newest first.
std::vector<std::string> resumableCheckpoints(const std::string &dir);

/// Fills this rank's shard of every tensor from checkpoint `path` (a
/// `step-NNNNNNN` directory). Errors name the checkpoint and the tensor.
bool loadCheckpoint(const std::string &path, const World &world,
                    const std::vector<CheckpointTensor> &tensors,
                    CheckpointState &state, std::string &error);

} // namespace weft::runtime

#endif // WEFT_RUNTIME_CHECKPOINT_H

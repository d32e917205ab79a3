//===- CheckpointFuzzer.cpp - Fuzzes the checkpoint reader ----------------===//
//
// An input is a checkpoint: its index.json, then rank-00000.safetensors,
// rank-00001.safetensors... (FuzzInput.h's separator between files). The
// harness fills in what a mutation could not keep consistent by chance:
// "@BYTES<k>@" and "@CRC<k>@" in the index become the size and CRC-32 of
// file k, and the index's own checksum is recomputed, so that mutations
// reach the JSON and safetensors parsing behind the checksums (the
// checksum checks themselves are reached by inputs without placeholders).
//
// The model is fixed: "w" (f32 [4, 6], split over tp on dim 1: "-,0") and "b"
// (f32 [6], replicated), loaded as rank 1 of mesh tp=2.
//
//===----------------------------------------------------------------------===//

#include "FuzzInput.h"
#include "weft/runtime/Checkpoint.h"
#include "weft/runtime/ShardLayout.h"

#include <cstdio>
#include <filesystem>

namespace {

using namespace weft::runtime;

void substitute(std::string &text, const std::string &from,
                const std::string &to) {
  for (size_t at = 0; (at = text.find(from, at)) != std::string::npos;
       at += to.size())
    text.replace(at, from.size(), to);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<std::string> files = weft::fuzz::splitFiles(data, size);
  std::string dir = weft::fuzz::scratchDirectory() + "/checkpoint";
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);
  std::string &index = files[0];
  for (size_t k = 1; k < files.size() && k <= 8; ++k) {
    char name[40], crc[9];
    snprintf(name, sizeof(name), "checkpoint/rank-%05zu.safetensors", k - 1);
    weft::fuzz::writeScratchFile(name, files[k].data(), files[k].size());
    snprintf(crc, sizeof(crc), "%08x",
             crc32(0, files[k].data(), files[k].size()));
    substitute(index, "@BYTES" + std::to_string(k - 1) + "@",
               std::to_string(files[k].size()));
    substitute(index, "@CRC" + std::to_string(k - 1) + "@", crc);
  }
  sealIndex(index);
  weft::fuzz::writeScratchFile("checkpoint/index.json", index.data(),
                               index.size());

  MeshShape mesh{{"tp"}, {2}};
  World world(mesh, 1, [](const std::vector<int> &) {
    return createSingleRankCommunicator();
  });
  static const int64_t wShape[] = {4, 6}, wLocal[] = {4, 3}, bShape[] = {6};
  weft_buffer_info w{"w", WEFT_PARAM, WEFT_F32, 2,     wShape,
                     96,  wLocal,     48,       "-,0", 0};
  weft_buffer_info b{"b", WEFT_PARAM, WEFT_F32, 1,   bShape,
                     24,  bShape,     24,       "-", 0};
  std::vector<float> wData(12), bData(6);
  std::vector<CheckpointTensor> tensors{{&w, wData.data()}, {&b, bData.data()}};
  CheckpointState state;
  std::string error;
  loadCheckpoint(dir, world, tensors, state, error);
  weft::fuzz::report(error);
  return 0;
}

//===- ModelOpenFuzzer.cpp - Fuzzes the manifest and weights readers ------===//
//
// An input is an executable's manifest, then its weights file (FuzzInput.h's
// separator between them), opened as weft_model_open does at start-up.
// A weights file that starts with a valid header gets the manifest's hash
// and its own size written into it, so that mutations reach the checks
// behind them. The manifest is the compiler's and its sizes are trusted:
// the harness skips manifests whose buffers would not fit in the fuzzer's
// memory limit.
//
//===----------------------------------------------------------------------===//

#include "FuzzInput.h"
#include "weft/runtime/CApi.h"
#include "weft/runtime/Contract.h"

#include <cstring>

using namespace weft::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<std::string> files = weft::fuzz::splitFiles(data, size);
  const std::string &manifest = files[0];
  std::string weights = files.size() > 1 ? files[1] : std::string();
  std::string error;
  std::optional<Manifest> parsed = Manifest::parse(manifest, error);
  if (parsed) {
    constexpr double limit = 64 << 20;
    for (const ManifestBuffer &buffer : parsed->buffers) {
      double bytes = 8;
      for (int64_t d : buffer.shape)
        bytes *= double(d);
      if (bytes > limit)
        return 0;
    }
  }
  WeightsHeader header;
  if (WeightsHeader::read(weights.data(), weights.size(), header)) {
    header.manifestHash = manifestHash(manifest);
    header.fileBytes = weights.size();
    char bytes[kWeightsHeaderBytes];
    header.write(bytes);
    memcpy(weights.data(), bytes, kWeightsHeaderBytes);
  }
  std::string path = weft::fuzz::writeScratchFile(
      "model.weights", weights.data(), weights.size());
  char message[512] = "";
  if (weft_model *model = weft_model_open(manifest.c_str(), path.c_str(),
                                          message, sizeof(message)))
    weft_model_close(model);
  weft::fuzz::report(message);
  return 0;
}

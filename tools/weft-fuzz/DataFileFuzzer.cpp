//===- DataFileFuzzer.cpp - Fuzzes the readers of data files --------------===//
//
// An input's first byte picks the reader, the rest is the file: 0 a .npy
// tensor (--input), 1 an ONNX TensorProto .pb, 2 a token file (--data),
// from which windows of 17 tokens are read at offsets drawn from the file.
//
//===----------------------------------------------------------------------===//

#include "FuzzInput.h"
#include "weft/runtime/TensorFiles.h"
#include "weft/runtime/TokenFile.h"

using namespace weft::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  std::string error;
  switch (data[0] % 3) {
  case 0:
  case 1: {
    std::string path = weft::fuzz::writeScratchFile(
        data[0] % 3 ? "tensor.pb" : "tensor.npy", data + 1, size - 1);
    TensorData tensor;
    readTensorFile(path, tensor, error);
    break;
  }
  default: {
    std::string path =
        weft::fuzz::writeScratchFile("corpus.tokens", data + 1, size - 1);
    TokenFile tokens;
    if (!tokens.open(path, error) || tokens.count() < 18)
      break;
    std::vector<uint16_t> window(17);
    for (size_t i = 1; i + 1 < size && i < 16; i += 2) {
      size_t first = (size_t(data[i]) << 8 | data[i + 1]) %
                     (tokens.count() - window.size());
      tokens.read(first, window, 256, error);
    }
  }
  }
  weft::fuzz::report(error);
  return 0;
}

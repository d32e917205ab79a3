//===- TensorFiles.h - numpy .npy and ONNX .pb tensor files -----*- C++ -*-===//

#ifndef WEFT_RUNTIME_TENSORFILES_H
#define WEFT_RUNTIME_TENSORFILES_H

#include "weft/runtime/CApi.h"
#include "weft/runtime/ShardLayout.h"

#include <cstdint>
#include <string>
#include <vector>

namespace weft::runtime {

struct TensorData {
  weft_dtype dtype = WEFT_F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes; // row-major, little-endian
};

/// Reads a .npy (C order) or ONNX TensorProto .pb file, chosen by the
/// extension. Returns false and sets `error` (one line) on failure.
bool readTensorFile(const std::string &path, TensorData &out,
                    std::string &error);

/// Writes a .npy file (bf16 is not a numpy type: use another dtype).
bool writeNpy(const std::string &path, const TensorData &tensor,
              std::string &error);

std::string shapeString(const std::vector<int64_t> &shape);

/// Reads input `index` of `model` from the tensor file `path`, checks its
/// dtype, shape and index bounds, and binds this rank's shard of it (kept
/// in `storage`, which must outlive the runs). Returns false and sets
/// `error` (one line naming the input) on failure.
bool bindInputFile(weft_model *model, size_t index, const std::string &path,
                   const std::vector<int64_t> &coordinates,
                   const MeshShape &mesh, std::vector<uint8_t> &storage,
                   std::string &error);

} // namespace weft::runtime

#endif // WEFT_RUNTIME_TENSORFILES_H

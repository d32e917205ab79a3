//===- Executable.h - The executable ABI every target writes ----*- C++ -*-===//
//
// What a compiled program is to the runtime, whatever the target: the
// entry `weft_entry(void **buffers)` taking the buffers in manifest order,
// the manifest (weft/runtime/Contract.h), the weights file laid out from
// the entry's params, the table of a pipeline's programs, and the host
// object that carries them.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_TARGET_EXECUTABLE_EXECUTABLE_H
#define WEFT_TARGET_EXECUTABLE_EXECUTABLE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include "weft/runtime/Contract.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace llvm {
class LLVMContext;
class Module;
} // namespace llvm

namespace weft {

/// One buffer of the compiled entry: an argument of `main` or a result.
struct EntryBuffer {
  /// State: optimizer state, zeros at the start, fed back by the runner.
  enum class Role { Input, Param, State, Output };
  Role role;
  std::string name;
  /// What the entry function sees: one rank's shard in a partitioned model.
  mlir::RankedTensorType type;
  /// The whole tensor, and how it is split (the runtime's spec, "-" per
  /// whole dim; see runtime/include/weft/runtime/ShardLayout.h).
  std::vector<int64_t> globalShape;
  std::string spec;
  int64_t numShards = 1;
  /// Params: where shard 0 starts in the weights file, and the distance
  /// between consecutive shards (each 64-byte aligned).
  uint64_t weightsOffset = 0;
  uint64_t shardStride = 0;
  /// Inputs that index a table: the table's size (weft.index_bound), or 0.
  int64_t indexBound = 0;
  /// Params the program updates (it has an output "param:<name>").
  bool trains = false;

  uint64_t localBytes() const;
};

/// The device mesh of a partitioned model, for the manifest.
struct EntryMesh {
  std::vector<std::string> names;
  std::vector<int64_t> sizes;
  /// The groups of mesh axes its collectives run over (bit a = axis a).
  std::vector<int64_t> groupMasks;
  /// The context axis when the dims it splits lie in head/tail chunk pairs.
  std::optional<int64_t> zigzagAxis;
};

/// The buffers of `func` in entry order (arguments, then results). Params
/// get offsets in a weights file laid out 64-byte aligned after a 64-byte
/// header, every distinct shard once; `weightsBytes` is the file's size.
/// In a partitioned module (with `mesh`) the `weft.sharding` attributes
/// give the global shapes; an unreadable one is an error.
mlir::FailureOr<std::vector<EntryBuffer>> describeEntry(mlir::func::FuncOp func,
                                                        const EntryMesh *mesh,
                                                        uint64_t &weightsBytes);

/// The mesh of a partitioned module (its shard.grid and the axes groups of
/// its collectives), or std::nullopt.
std::optional<EntryMesh> describeMesh(mlir::ModuleOp module);

/// The manifest the runtime reads (weft/runtime/Contract.h), as JSON, for
/// an executable whose kernels run on `device`, whose all-reduces over
/// the mesh axes in `gradSyncAxes` run by `gradSync`, and whose replicas
/// over `dpSyncAxes` average every `dpSyncEvery` steps. A training step also
/// records its optimizer (`weft.optimizer` on `func`).
std::string
buildManifest(mlir::func::FuncOp func, const std::vector<EntryBuffer> &buffers,
              const EntryMesh *mesh, llvm::StringRef device,
              runtime::GradSync gradSync = runtime::GradSync::Library,
              int64_t gradSyncAxes = 0, int64_t dpSyncEvery = 1,
              int64_t dpSyncAxes = 0);

/// Translates the lowered module to LLVM IR, adds `weft_entry` (unpacking an
/// array of buffer pointers into the memref arguments of `entryName`) and
/// the `weft_manifest` string, and optimizes at `optLevel`. Both names end
/// in `symbolSuffix` (a pipeline rank's program: "_pp1"); every other
/// definition is internal.
std::unique_ptr<llvm::Module>
translateToLLVMIR(mlir::ModuleOp module, llvm::LLVMContext &context,
                  llvm::StringRef entryName,
                  const std::vector<EntryBuffer> &buffers,
                  const std::string &manifest, unsigned optLevel,
                  std::string &error, llvm::StringRef symbolSuffix = "");

/// An object's worth of LLVM IR naming the programs of a pipeline's ranks:
/// `weft_pipeline_programs` (their number), `weft_pipeline_entries` and
/// `weft_pipeline_manifests` (rank r's `weft_entry_pp<r>` and
/// `weft_manifest_pp<r>`).
std::unique_ptr<llvm::Module> pipelineTable(llvm::LLVMContext &context,
                                            int64_t programs, unsigned optLevel,
                                            std::string &error);

/// Writes a native object file for the host CPU.
bool emitObjectFile(llvm::Module &module, llvm::StringRef path,
                    unsigned optLevel, std::string &error);

} // namespace weft

#endif // WEFT_TARGET_EXECUTABLE_EXECUTABLE_H

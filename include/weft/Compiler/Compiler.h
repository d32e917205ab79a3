//===- Compiler.h - Weft as a library -------------------------*- C++ -*-===//
//-*-===//
//
// The one entry point of the compiler. `weftc` and `weft-plan` are command
// lines over it, and the Python package calls it the same way: options in
// a plain struct, what the compiler says through a callback, and the result
// (files written, the plan chosen, a structured report) as a value.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_COMPILER_COMPILER_H
#define WEFT_COMPILER_COMPILER_H

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace weft {

/// Receives every message of a compilation, one line each: errors (the
/// first says why it failed), warnings, and remarks saying what the
/// compiler chose on the user's behalf.
using DiagnosticCallback =
    std::function<void(mlir::DiagnosticSeverity, const std::string &)>;

enum class ProgramKind {
  Forward,   // the model
  Train,     // loss, gradients and the optimizer update
  Gradients, // the cross-entropy loss and its parameter gradients
};

enum class EmitKind {
  Passes,     // the textual pass pipelines, nothing compiled
  Schedule,   // the pipeline schedule and its stages (needs a pp axis)
  MLIR,       // weft IR after the weft passes and partitioning
  LLVM,       // LLVM IR
  Object,     // an object file and its weights file
  Executable, // an executable and its weights file (one per pp rank)
};

struct CompileOptions {
  /// The model: .onnx, .onnxtxt (text protobuf) or .mlir.
  std::string model;
  /// Bindings of symbolic dimensions: "batch=8".
  std::vector<std::string> dims;
  ProgramKind program = ProgramKind::Forward;

  // A training step (ProgramKind::Train or Gradients).
  std::string optimizer = "adamw";
  /// The input holding the token ids (default: the only integer input).
  std::string tokenInput;
  double weightDecay = 0.1;
  double clipNorm = 1.0; // 0: off
  std::string precision = "f32";
  /// f32 GEMMs may multiply as TF32 (10 mantissa bits, f32 accumulation)
  /// on a GPU's tensor cores; the CPU target multiplies in f32 anyway.
  bool allowTf32 = false;
  std::string recompute = "none";
  int64_t gradAccum = 1;
  unsigned zero = 0;
  /// Glob patterns of parameter names that do not train, and (when not
  /// empty) of the only ones that do.
  std::vector<std::string> freeze, trainOnly;

  // Partitioning.
  std::string mesh; // "dp=2,tp=2"; empty: one rank
  std::vector<std::string> parallel;
  bool sequenceParallel = false;
  /// With the cp strategy: how attention runs over the cp axis, "ring"
  /// (key/value chunks passed around it) or "all-to-all" (split by heads).
  std::string cpAttention = "ring";
  bool padUneven = false;
  double bucketMb = 25.0;
  /// How the data-parallel gradients are all-reduced: "library" (MPI's own
  /// choice), "ring", "tree", "ps" (parameter servers, each rank owning a
  /// slice) or "hierarchical" (inside nodes, then across them).
  std::string gradSync = "library";
  /// Local SGD: the dp replicas step alone and average their parameters
  /// and optimizer state every this many steps (1: ordinary data
  /// parallelism, gradients summed every step).
  int64_t dpSyncEvery = 1;

  // Pipeline parallelism (a pp axis in the mesh).
  int64_t microbatches = 1;
  std::string schedule = "1f1b";
  int64_t virtualStages = 1;
  std::vector<int64_t> stageBoundaries;

  /// "auto" or pinned choices ("dp=2,pp=2"): the planner chooses the mesh,
  /// strategies, ZeRO stage, micro-batches and recomputation for `cluster`.
  std::string plan;
  std::string cluster = "cpu-local";
  int64_t nodes = 1;

  /// The backend: "cpu".
  std::string target = "cpu";
  unsigned optLevel = 2;
  EmitKind emit = EmitKind::Executable;
  /// With EmitKind::Executable of a one-rank program, also link its objects
  /// into the shared library `<output>.so`, which a process loads to run the
  /// model in-process through the runtime's C API (weft/runtime/CApi.h):
  /// how the Python package's Program.run works.
  bool sharedLibrary = false;
  /// Where the output goes ("-": stdout for MLIR and LLVM IR). A pipeline
  /// executable writes `<output>.pp<r>.weights` beside it.
  std::string output;
  /// Where the target's runtime libraries are (an executable links them).
  std::string runtimeDirectory;
  /// Print the lowering's pass timing on stderr.
  bool timeLoweringPasses = false;
  /// The CUDA target's executable can time each launch of the kernel
  /// report on the GPU ($WEFT_PROFILE_LAUNCHES; LoweringOptions).
  bool profileLaunches = false;
  /// A test hook: passes (textual pipeline syntax) appended to the
  /// lowering, such as weft-opt's test pass that crashes.
  std::string testLoweringPasses;
};

/// The plan the planner chose for CompileOptions::plan, as the options it
/// set (they are also in CompileResult::options).
struct ChosenPlan {
  std::string cluster;
  int64_t ranks = 0;
  std::string plan; // "dp=2,tp=1,pp=2,..."
  double predictedStepSeconds = 0;
  double predictedBytesPerRank = 0;
};

/// One collective of a partitioned program.
struct CollectiveReport {
  std::string kind; // all_reduce, all_gather, ...
  std::string axes; // mesh axis names, comma-separated
  std::string inputType, resultType;
  int64_t bytesIn = 0;
  /// Bytes a rank sends for it with ring algorithms (a pipeline's send
  /// and receive: the whole message).
  int64_t bytesMovedPerRank = 0;
  std::string location; // the ONNX node, when known
  /// Runs per call of the program: the calls of the function holding it
  /// and of their callers, and the loops around them (a stage once per
  /// micro-batch, a layer per call of its stage, a pipeline message once
  /// per micro-batch).
  int64_t runs = 1;
};

/// What one program (a pp rank's, or the only one) holds, per rank: every
/// rank of a program runs on same-shaped shards.
struct ProgramReport {
  int64_t pipelineRank = -1; // -1: not a pipeline
  std::vector<std::string> meshNames;
  std::vector<int64_t> meshSizes;
  uint64_t parameterBytes = 0, wholeModelParameterBytes = 0;
  uint64_t splitParameterBytes = 0, splitWholeParameterBytes = 0;
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;
  };
  std::vector<Tensor> replicatedParameters;
  /// Every buffer of the entry function, as its manifest describes it.
  struct Buffer {
    std::string role; // input, param, state, output
    std::string name;
    std::vector<int64_t> shape, localShape;
    std::string sharding; // ShardLayout.h's spec, "-" per whole dim
    uint64_t localBytes = 0;
    bool trains = false; // a param the program updates
  };
  std::vector<Buffer> buffers;
  uint64_t optimizerStateBytes = 0;
  uint64_t weightsFileBytes = 0; // without its header
  uint64_t inputBytes = 0, outputBytes = 0;
  /// The static memory plan of temporaries, when the lowering made one.
  std::optional<uint64_t> temporaryPeakBytes;
  int64_t temporaryBuffers = 0;
  uint64_t temporaryUnplannedBytes = 0;
  /// Pipelines: micro-batches in flight at most on this rank.
  int64_t microbatchesInFlight = 0;
  std::vector<CollectiveReport> collectives;
  /// A training step: its contractions' FLOPs and the tokens it trains on.
  double stepFlops = 0;
  int64_t tokensPerStep = 0;
  /// The CUDA target: every kernel launch and library call of the program,
  /// in the order they first run (weft-gpu-kernel-report), with what a
  /// roofline needs; empty for other targets.
  struct Launch {
    int64_t id = 0;
    std::string kind;    // "kernel", "gemm" or "attention"
    std::string library; // a library call's function
    std::string function, node;
    int64_t index = 0; // among its function's launches
    int64_t runs = 1;  // per run of the program
    std::vector<int64_t> grid, block;
    std::vector<int64_t> shape; // batch, m, n, k; attention's b, h, s, t, d, dv
    int64_t flops = 0, bytesRead = 0, bytesWritten = 0, elements = 0;
    /// A fused attention's FLOPs as its kernel computes them (flops: as
    /// the step counts them).
    int64_t kernelFlops = 0;
    bool exact = true; // false: the bytes are an upper bound
    bool tensorCores = false;
    bool tf32 = false; // f32 inputs multiplied as TF32 (on tensor cores)
    /// What a GEMM's epilogue fuses ("bias + GELU", ...; empty: none).
    std::string epilogue;
  };
  std::vector<Launch> launches;
  /// Every buffer the CUDA target's host code allocates, views or receives,
  /// by type: what the memory plan holds.
  struct DeviceBuffer {
    std::string kind; // argument, alloc, view
    std::string type;
    std::vector<int64_t> shape;
    int64_t elementBits = 0, elements = 0, count = 0;
  };
  std::vector<DeviceBuffer> deviceBuffers;
};

/// The wall time of one stage of the compilation, summed over the
/// programs of a pipeline.
struct StageTime {
  std::string stage;
  double seconds = 0;
};

/// A pipeline's schedule as compiled: its simulated timeline, forward = 1
/// and backward = 2 time units, communication free.
struct PipelineReport {
  std::string schedule;
  int64_t stages = 0, microbatches = 0, virtualStages = 1;
  /// One row per pp rank, a character per time unit: F, B or '.' (idle).
  std::vector<std::string> timeline;
  std::vector<double> idleFraction;
};

/// One plan the planner priced for CompileOptions::plan.
struct PricedPlan {
  std::string plan; // "dp=2,tp=1,pp=2,..."
  double stepSeconds = 0, tokensPerSecond = 0, mfu = 0;
  double weightsBytes = 0, gradientsBytes = 0, optimizerBytes = 0,
         activationsBytes = 0;
};

struct CompileResult {
  /// The options compiled: the input's, with the plan's choices applied.
  CompileOptions options;
  std::optional<ChosenPlan> plan;
  /// With a plan: the fastest plans that fit (the chosen one first), and
  /// why the best plan of each other choice lost.
  std::vector<PricedPlan> topPlans;
  std::vector<std::string> planExplanation;
  std::optional<PipelineReport> pipeline;
  /// EmitKind::Passes and EmitKind::Schedule: the text asked for.
  std::string text;
  /// The files written, executable first.
  std::vector<std::string> files;
  std::vector<ProgramReport> programs;
  /// The stages in the order they first ran (`weftc --time-stages`).
  std::vector<StageTime> stageTimes;
};

/// Compiles `options`. On failure it has reported one error through
/// `diagnostics` and written no file.
std::optional<CompileResult> compile(const CompileOptions &options,
                                     const DiagnosticCallback &diagnostics);

/// `weftc --report`: the programs' memory and collectives as text.
void printReport(const CompileResult &result, llvm::raw_ostream &os);

/// The output name `weftc` uses when none is given: the model's stem, with
/// the extension of `emit`.
std::string defaultOutputFile(const std::string &model, EmitKind emit);

} // namespace weft

#endif // WEFT_COMPILER_COMPILER_H

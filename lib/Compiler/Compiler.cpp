//===- Compiler.cpp - Weft as a library: a model in, an executable out ----===//
//
// The stages, each a pass pipeline weft-opt can run alone: the front end
// (import, weft-fuse-idioms), the training step (weft-derive-train-step),
// partitioning (weft-spmd), the pipeline cut (weft-split-stages and
// weft-pipeline-cut per pp rank), and the target's lowering
// (weft-lower-to-llvm), translation, object emission and link.
//
//===----------------------------------------------------------------------===//

#include "weft/Compiler/Compiler.h"
#include "weft/Dialect/Weft/IR/TargetAttrNames.h"

#include "weft/Compiler/FrontEnd.h"
#include "weft/Dialect/Weft/IR/Layers.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/Transforms/Passes.h"
#include "weft/Dialect/Weft/Transforms/PipelineSchedule.h"
#include "weft/Dialect/Weft/Transforms/Sharding.h"
#include "weft/Dialect/Weft/Transforms/StepPhases.h"
#include "weft/InitAllDialects.h"
#include "weft/InitAllPasses.h"
#include "weft/InitAllTargets.h"
#include "weft/Planner/Planner.h"
#include "weft/Planner/Report.h"
#include "weft/Support/CrashGuard.h"
#include "weft/Target/Executable/Executable.h"
#include "weft/Target/ONNX/ImportONNX.h"
#include "weft/Target/Target.h"
#include "weft/runtime/Contract.h"
#include "weft/runtime/ShardLayout.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

#include <chrono>
#include <functional>

using namespace mlir;

std::string weft::defaultOutputFile(const std::string &model, EmitKind emit) {
  llvm::SmallString<256> stem(llvm::sys::path::filename(model));
  llvm::sys::path::replace_extension(stem, "");
  switch (emit) {
  case EmitKind::MLIR:
    return (stem + ".mlir").str();
  case EmitKind::LLVM:
    return (stem + ".ll").str();
  case EmitKind::Object:
    return (stem + ".o").str();
  default:
    return stem.str().str();
  }
}

namespace {

using weft::CompileOptions;
using weft::EmitKind;
using weft::ProgramKind;

/// Removes the files it tracks unless told to keep them.
struct OutputFiles {
  std::vector<std::string> paths;
  bool keep = false;
  ~OutputFiles() {
    if (!keep)
      for (const std::string &p : paths)
        llvm::sys::fs::remove(p);
  }
};

/// Writes the weights file: a 64-byte header, then every param at its
/// offset.
LogicalResult writeWeights(ModuleOp module,
                           const std::vector<weft::EntryBuffer> &buffers,
                           const weft::EntryMesh *mesh, uint64_t bytes,
                           const std::string &manifest, llvm::StringRef path,
                           std::string &error) {
  weft::runtime::MeshShape meshShape;
  if (mesh) {
    meshShape.names = mesh->names;
    meshShape.sizes = mesh->sizes;
  }
  std::vector<weft::WeightPlacement> placement;
  for (const weft::EntryBuffer &b : buffers) {
    if (b.role != weft::EntryBuffer::Role::Param)
      continue;
    weft::WeightPlacement place{b.name, b.weightsOffset, nullptr};
    if (b.numShards > 1) {
      weft::runtime::ShardSpec spec;
      if (!weft::runtime::ShardSpec::parse(b.spec, b.globalShape.size(),
                                           spec)) {
        error = "bad sharding '" + b.spec + "' of '" + b.name + "'";
        return failure();
      }
      // Every distinct shard once, each at its own aligned slot.
      place.write = [spec, b, meshShape](llvm::StringRef whole,
                                         llvm::raw_pwrite_stream &out) {
        size_t elementSize = std::max(1u, b.type.getElementTypeBitWidth() / 8);
        std::vector<char> shard(b.localBytes());
        for (int64_t index = 0; index < b.numShards; ++index) {
          spec.extract(whole.data(), shard.data(), b.globalShape, elementSize,
                       index, meshShape);
          out.pwrite(shard.data(), shard.size(),
                     b.weightsOffset + index * b.shardStride);
        }
      };
    }
    placement.push_back(std::move(place));
  }
  // The file is sized first: what no weight covers (alignment padding)
  // reads as zeros without being written.
  int fd;
  std::error_code ec = llvm::sys::fs::openFileForWrite(path, fd);
  if (!ec)
    ec = llvm::sys::fs::resize_file(fd, bytes);
  if (ec) {
    error = "cannot write '" + path.str() + "': " + ec.message();
    return failure();
  }
  llvm::raw_fd_ostream out(fd, /*shouldClose=*/true);
  char header[weft::runtime::kWeightsHeaderBytes];
  weft::runtime::WeightsHeader{weft::runtime::manifestHash(manifest), bytes}
      .write(header);
  out.pwrite(header, sizeof(header), 0);
  if (placement.empty())
    return success();
  auto source =
      module->getAttrOfType<StringAttr>(weft::WeftDialect::kWeightsAttrName);
  if (!source) {
    error = "the module has weights but no 'weft.weights' source file";
    return failure();
  }
  // Its errors are diagnostics, reported by the caller's handler.
  return weft::writeONNXInitializers(source.getValue(), placement, out,
                                     module.getContext());
}

/// Every collective of a partitioned module: the op, its mesh axes, the
/// local tensor and the bytes a rank moves for it (ring algorithms).
std::vector<weft::CollectiveReport>
describeCollectives(ModuleOp module, const weft::EntryMesh &mesh) {
  std::vector<weft::CollectiveReport> collectives;
  llvm::StringMap<int64_t> runs = weft::runsPerEntryCall(module);
  module.walk([&](Operation *op) {
    auto axes = op->getAttrOfType<DenseI16ArrayAttr>("grid_axes");
    if (!axes || op->getDialect()->getNamespace() != "shard" ||
        op->getName().getStringRef() == "shard.all_slice")
      return;
    auto input = llvm::cast<RankedTensorType>(op->getOperand(0).getType());
    auto result = llvm::cast<RankedTensorType>(op->getResult(0).getType());
    weft::CollectiveReport report;
    int64_t parts = 1;
    for (int16_t axis : axes.asArrayRef()) {
      parts *= mesh.sizes[axis];
      report.axes += (report.axes.empty() ? "" : ",") + mesh.names[axis];
    }
    auto bytesOf = [](RankedTensorType type) {
      return type.getNumElements() *
             std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
    };
    report.kind = op->getName().stripDialect().str();
    report.bytesIn = bytesOf(input);
    // A pipeline message, or a ring's shift, moves whole between two ranks.
    bool pointToPoint = report.kind == "send" || report.kind == "recv" ||
                        report.kind == "shift";
    report.bytesMovedPerRank =
        pointToPoint                  ? bytesOf(input)
        : report.kind == "all_reduce" ? 2 * bytesOf(input) * (parts - 1) / parts
        : report.kind == "all_gather" ? bytesOf(result) * (parts - 1) / parts
                                      : bytesOf(input) * (parts - 1) / parts;
    llvm::raw_string_ostream(report.inputType) << input;
    llvm::raw_string_ostream(report.resultType) << result;
    if (auto name = llvm::dyn_cast<NameLoc>(op->getLoc()))
      report.location = name.getName().str();
    report.runs = weft::runsPerCall(op) *
                  runs.lookup(op->getParentOfType<func::FuncOp>().getSymName());
    collectives.push_back(std::move(report));
  });
  return collectives;
}

/// The kernel report's launches and buffers (weft-gpu-kernel-report).
void describeKernels(DictionaryAttr kernels, weft::ProgramReport &report) {
  auto integer = [](DictionaryAttr entry, StringRef key) -> int64_t {
    auto value = entry.getAs<IntegerAttr>(key);
    return value ? value.getInt() : 0;
  };
  auto text = [](DictionaryAttr entry, StringRef key) {
    auto value = entry.getAs<StringAttr>(key);
    return value ? value.str() : std::string();
  };
  auto flag = [](DictionaryAttr entry, StringRef key) {
    auto value = entry.getAs<BoolAttr>(key);
    return value && value.getValue();
  };
  auto integers = [](DictionaryAttr entry, StringRef key) {
    std::vector<int64_t> values;
    if (auto array = entry.getAs<ArrayAttr>(key))
      for (Attribute value : array)
        values.push_back(cast<IntegerAttr>(value).getInt());
    return values;
  };
  if (auto launches = kernels.getAs<ArrayAttr>("launches"))
    for (auto entry : launches.getAsRange<DictionaryAttr>()) {
      weft::ProgramReport::Launch &launch = report.launches.emplace_back();
      launch.id = integer(entry, "id");
      launch.kind = text(entry, "kind");
      launch.library = text(entry, "library");
      launch.function = text(entry, "function");
      launch.node = text(entry, "node");
      launch.index = integer(entry, "index");
      launch.runs = integer(entry, "runs");
      launch.grid = integers(entry, "grid");
      launch.block = integers(entry, "block");
      launch.shape = integers(entry, "shape");
      launch.flops = integer(entry, "flops");
      launch.kernelFlops = integer(entry, "kernel_flops");
      launch.bytesRead = integer(entry, "bytes_read");
      launch.bytesWritten = integer(entry, "bytes_written");
      launch.elements = integer(entry, "elements");
      launch.exact = flag(entry, "exact");
      launch.tensorCores = flag(entry, "tensor_cores");
      launch.tf32 = flag(entry, "tf32");
      launch.epilogue = text(entry, "epilogue");
    }
  if (auto buffers = kernels.getAs<ArrayAttr>("buffers"))
    for (auto entry : buffers.getAsRange<DictionaryAttr>()) {
      weft::ProgramReport::DeviceBuffer &buffer =
          report.deviceBuffers.emplace_back();
      buffer.kind = text(entry, "kind");
      buffer.type = text(entry, "type");
      buffer.shape = integers(entry, "shape");
      buffer.elementBits = integer(entry, "element_bits");
      buffer.elements = integer(entry, "elements");
      buffer.count = integer(entry, "count");
    }
}

/// The memory a program's buffers take on each rank.
weft::ProgramReport
describeProgram(ModuleOp program, const std::vector<weft::EntryBuffer> &buffers,
                const weft::EntryMesh *mesh, uint64_t weightsBytes) {
  weft::ProgramReport report;
  if (mesh) {
    report.meshNames = mesh->names;
    report.meshSizes = mesh->sizes;
    report.collectives = describeCollectives(program, *mesh);
  }
  for (const weft::EntryBuffer &b : buffers) {
    uint64_t bytes = b.localBytes();
    weft::ProgramReport::Buffer &entry = report.buffers.emplace_back();
    entry.role = b.role == weft::EntryBuffer::Role::Input   ? "input"
                 : b.role == weft::EntryBuffer::Role::Param ? "param"
                 : b.role == weft::EntryBuffer::Role::State ? "state"
                                                            : "output";
    entry.name = b.name;
    entry.shape = b.globalShape;
    entry.localShape.assign(b.type.getShape().begin(), b.type.getShape().end());
    weft::runtime::ShardSpec spec;
    entry.sharding = mesh && weft::runtime::ShardSpec::parse(
                                 b.spec, b.globalShape.size(), spec)
                         ? spec.describe({mesh->names, mesh->sizes})
                         : "replicated";
    entry.localBytes = bytes;
    entry.trains = b.trains;
    if (b.role == weft::EntryBuffer::Role::Input)
      report.inputBytes += bytes;
    else if (b.role == weft::EntryBuffer::Role::Output)
      report.outputBytes += bytes;
    else if (b.role == weft::EntryBuffer::Role::State)
      report.optimizerStateBytes += bytes;
    if (b.role != weft::EntryBuffer::Role::Param)
      continue;
    uint64_t whole = std::max(1u, b.type.getElementTypeBitWidth() / 8);
    for (int64_t d : b.globalShape)
      whole *= d;
    report.parameterBytes += bytes;
    report.wholeModelParameterBytes += whole;
    if (b.numShards > 1) {
      report.splitParameterBytes += bytes;
      report.splitWholeParameterBytes += whole;
    } else {
      report.replicatedParameters.push_back({b.name, b.globalShape});
    }
  }
  report.weightsFileBytes = weightsBytes - weft::runtime::kWeightsHeaderBytes;
  return report;
}

/// Adds the wall time from its construction to its destruction to a
/// stage's entry.
class StageTimer {
public:
  StageTimer(std::vector<weft::StageTime> &times, llvm::StringRef stage)
      : times(times), stage(stage.str()),
        start(std::chrono::steady_clock::now()) {}
  ~StageTimer() {
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    auto it = llvm::find_if(
        times, [&](const weft::StageTime &t) { return t.stage == stage; });
    if (it == times.end())
      times.push_back({stage, seconds});
    else
      it->seconds += seconds;
  }

private:
  std::vector<weft::StageTime> &times;
  std::string stage;
  std::chrono::steady_clock::time_point start;
};

/// One compilation: the options checked, the plan chosen, the stages run.
class Compilation {
public:
  Compilation(const CompileOptions &options,
              const weft::DiagnosticCallback &diagnostics)
      : diagnostics(diagnostics) {
    result.options = options;
  }

  std::optional<weft::CompileResult> run() {
    if (failed(runStages()))
      return std::nullopt;
    return std::move(result);
  }

private:
  LogicalResult runStages();
  LogicalResult fail(const llvm::Twine &message) {
    diagnostics(DiagnosticSeverity::Error, message.str());
    return failure();
  }
  LogicalResult checkOptions();
  LogicalResult choosePlan();
  LogicalResult checkPipeline();
  LogicalResult checkGradSync();
  LogicalResult buildPassManagers();
  std::string describePassManagers();
  LogicalResult splitStages(ModuleOp module, int64_t stages);
  LogicalResult printStages(ModuleOp module);
  LogicalResult cutPipeline(ModuleOp module,
                            std::vector<OwningOpRef<ModuleOp>> &programs);
  LogicalResult outlineMicrobatches(ModuleOp module);
  /// Whether the step is a micro-batch template that
  /// weft-outline-microbatches turns into calls.
  bool outlined() const {
    return result.options.program == ProgramKind::Train &&
           (pipelineStages || result.options.gradAccum > 1);
  }
  LogicalResult compileProgram(ModuleOp program, int64_t pipelineRank,
                               const std::string &objectPath,
                               const std::string &weightsPath);
  LogicalResult link(const std::vector<std::string> &objects, bool partitioned);

  CompileOptions &options() { return result.options; }

  const weft::DiagnosticCallback &diagnostics;
  weft::CompileResult result;
  const weft::Target *target = nullptr;
  std::optional<int64_t> pipelineStages;
  weft::runtime::GradSync gradSync = weft::runtime::GradSync::Library;
  std::optional<weft::pipeline::Schedule> schedule;
  std::string scheduleText;

  std::unique_ptr<MLIRContext> context;
  std::unique_ptr<PassManager> weftPasses, spmdPasses, lowering;
  OutputFiles outputs;
};

LogicalResult Compilation::checkOptions() {
  CompileOptions &o = options();
  if (o.model.empty())
    return fail("no model given");
  target = weft::lookupTarget(o.target);
  if (!target)
    return fail("--target must be one of " + weft::targetNames() + ", not '" +
                o.target + "'");
  if (o.optLevel > 3)
    return fail("-O takes 0 to 3");
  if (o.sharedLibrary && o.emit != EmitKind::Executable)
    return fail("a shared library is linked beside an executable, not with "
                "--emit=mlir, llvm or obj");
  if (std::string why =
          target->cannotCompile(!o.mesh.empty() || !o.plan.empty());
      !why.empty())
    return fail(why);
  if (!o.plan.empty()) {
    if (o.program != ProgramKind::Train)
      return fail("--plan chooses how a training step runs: add --train");
    if (!o.mesh.empty() || !o.parallel.empty() || o.sequenceParallel ||
        o.zero || o.gradAccum != 1 || o.microbatches != 1 ||
        o.virtualStages != 1 || o.recompute != "none" ||
        o.gradSync != "library" || o.dpSyncEvery != 1)
      return fail("--plan chooses the mesh, strategies, ZeRO stage, "
                  "micro-batches, schedule, recomputation and gradient sync: "
                  "pin a choice in --plan instead (--plan=dp=2,zero=1)");
  }
  return success();
}

/// Chooses the plan of --plan with the planner (the model profiled from
/// its own training step) and sets the options that compile it.
LogicalResult Compilation::choosePlan() {
  CompileOptions &o = options();
  std::string error;
  weft::PlanOptions planning;
  planning.model = o.model;
  planning.dims = o.dims;
  planning.cluster = o.cluster;
  planning.nodes = o.nodes;
  planning.mixedPrecision = o.precision == "bf16";
  if (o.plan != "auto") {
    std::optional<weft::planner::PlanConstraints> constraints =
        weft::planner::PlanConstraints::parse(o.plan, error);
    if (!constraints)
      return fail("--plan: " + error);
    planning.constraints = *constraints;
  }
  // Weft's CPU backend recomputes elementwise work, not what the cost
  // model prices as selective recomputation.
  planning.constraints.selectiveRecompute = false;
  std::optional<weft::PlanResult> planned = weft::planTraining(planning, error);
  if (!planned)
    return fail("--plan: " + error);
  if (planned->search.fitting.empty())
    return fail("--plan: " + weft::planner::noPlanMessage(planned->search,
                                                          planned->cluster));
  const weft::planner::Prediction &best = planned->search.fitting.front();
  constexpr size_t reportedPlans = 5;
  for (const weft::planner::Prediction &p :
       llvm::ArrayRef(planned->search.fitting).take_front(reportedPlans)) {
    result.topPlans.push_back({p.plan.str(), p.stepTime(), p.tokensPerSecond,
                               p.mfu, p.memory.weights, p.memory.gradients,
                               p.memory.optimizer, p.memory.activations});
  }
  result.planExplanation =
      weft::planner::explain(planned->search, planned->cluster);
  const weft::planner::Plan &plan = best.plan;
  result.plan =
      weft::ChosenPlan{planned->cluster.name, planned->cluster.gpus(),
                       plan.str(), best.stepTime(), best.memory.total()};
  diagnostics(
      DiagnosticSeverity::Remark,
      llvm::formatv("plan for {0} ({1} ranks): {2}; predicted step "
                    "{3:F3} s, {4:F2} GiB per rank",
                    result.plan->cluster, result.plan->ranks, result.plan->plan,
                    result.plan->predictedStepSeconds,
                    result.plan->predictedBytesPerRank / double(1ull << 30))
          .str());

  o.mesh.clear();
  auto axis = [&](const char *name, int64_t size) {
    if (size > 1)
      o.mesh += (o.mesh.empty() ? "" : ",") + std::string(name) + "=" +
                std::to_string(size);
  };
  // The experts' ranks are the inner part of the data-parallel group.
  axis("pp", plan.pp);
  axis("dp", plan.dp / plan.ep);
  axis("ep", plan.ep);
  axis("cp", plan.cp);
  axis("tp", plan.tp);
  o.parallel.clear();
  if (plan.dp / plan.ep > 1)
    o.parallel.push_back("dp");
  if (plan.ep > 1)
    o.parallel.push_back("ep");
  if (plan.tp > 1)
    o.parallel.push_back("megatron");
  if (plan.cp > 1) {
    o.parallel.push_back("cp");
    o.cpAttention = weft::planner::contextAttentionName(plan.cpAttention);
  }
  o.sequenceParallel = plan.sequenceParallel;
  o.zero = unsigned(plan.zero);
  if (plan.dp > 1 && plan.gradSync)
    o.gradSync = weft::runtime::gradSyncName(*plan.gradSync);
  if (plan.dp > 1)
    o.dpSyncEvery = plan.dpSyncEvery;
  o.recompute =
      plan.recompute == weft::planner::Recompute::Full ? "full" : "none";
  if (plan.pp > 1) {
    o.microbatches = plan.microbatches;
    o.schedule = weft::pipeline::scheduleName(plan.schedule);
    o.virtualStages = plan.virtualStages;
  } else {
    o.gradAccum = plan.microbatches;
  }
  return success();
}

/// The pp axis of the mesh, if any, and its schedule, checked.
LogicalResult Compilation::checkPipeline() {
  CompileOptions &o = options();
  if (!o.mesh.empty()) {
    std::string meshError;
    std::optional<weft::Mesh> mesh = weft::Mesh::parse(o.mesh, meshError);
    if (!mesh)
      return fail("--mesh: " + meshError);
    if (std::optional<weft::MeshAxis> pp = mesh->axisNamed("pp"))
      pipelineStages = mesh->sizes[*pp];
  } else if (!o.parallel.empty() || o.sequenceParallel || o.padUneven) {
    return fail("--parallel, --sequence-parallel and --pad-uneven need --mesh");
  }
  bool printSchedule = o.emit == EmitKind::Schedule;
  if (printSchedule && !pipelineStages)
    return fail("--print-schedule needs a mesh with a pp axis (--mesh pp=4)");
  if (!pipelineStages) {
    if (o.microbatches != 1 || o.virtualStages != 1 ||
        !o.stageBoundaries.empty())
      return fail("--microbatches, --virtual-stages and --stage-boundaries "
                  "need a mesh with a pp axis (--mesh pp=2)");
    return success();
  }
  if (o.program != ProgramKind::Train && !printSchedule)
    return fail("pipeline parallelism (mesh axis 'pp') compiles a training "
                "step: add --train");
  if (o.gradAccum > 1)
    return fail("with a pp axis the step's micro-batches are "
                "--microbatches, not --grad-accum");
  std::optional<weft::pipeline::ScheduleKind> kind =
      weft::pipeline::parseScheduleKind(o.schedule);
  if (!kind)
    return fail("--schedule must be gpipe, 1f1b, interleaved or zb-h1, not '" +
                o.schedule + "'");
  std::string error;
  schedule = weft::pipeline::buildSchedule(
      *kind, *pipelineStages, o.microbatches, o.virtualStages, error);
  if (!schedule)
    return fail(error);
  if (!weft::pipeline::checkSchedule(*schedule, error))
    return fail("the " + o.schedule + " schedule is wrong: " + error);
  scheduleText = weft::pipeline::drawSchedule(*schedule);
  weft::pipeline::Timeline timeline = weft::pipeline::simulate(*schedule);
  result.pipeline = weft::PipelineReport{o.schedule,
                                         schedule->stages,
                                         schedule->microbatches,
                                         schedule->virtualStages,
                                         timeline.rows,
                                         timeline.idleFraction};
  return success();
}

/// --grad-sync chooses how the data-parallel gradients are summed: a step
/// with replicated gradients over a dp axis.
LogicalResult Compilation::checkGradSync() {
  const CompileOptions &o = options();
  std::optional<weft::runtime::GradSync> sync =
      weft::runtime::parseGradSync(o.gradSync);
  if (!sync)
    return fail("--grad-sync must be library, ring, tree, ps or "
                "hierarchical, not '" +
                o.gradSync + "'");
  gradSync = *sync;
  std::string meshError;
  std::optional<weft::Mesh> mesh = weft::Mesh::parse(o.mesh, meshError);
  bool dataParallel = o.program != ProgramKind::Forward && mesh &&
                      mesh->axisNamed("dp") &&
                      llvm::is_contained(o.parallel, "dp");
  if (o.dpSyncEvery < 1)
    return fail("--dp-sync every=K needs K of at least 1, not " +
                std::to_string(o.dpSyncEvery));
  bool expertParallel = llvm::is_contained(o.parallel, "ep");
  if (o.dpSyncEvery > 1) {
    std::string every = "--dp-sync every=" + std::to_string(o.dpSyncEvery);
    if (expertParallel)
      return fail(every + " averages whole replicas, and --parallel ep "
                          "splits the experts over them: drop one of them");
    if (!dataParallel || o.program != ProgramKind::Train)
      return fail(every + " averages data-parallel replicas: it needs a "
                          "training step (--train) over a mesh axis 'dp' "
                          "with --parallel dp");
    if (o.zero)
      return fail(every + " lets each replica step alone, and ZeRO shards "
                          "the optimizer over them: drop one of them");
    if (gradSync != weft::runtime::GradSync::Library)
      return fail("--grad-sync " + o.gradSync +
                  " sums gradients every step, and " + every +
                  " does not: drop one of them");
  }
  if (gradSync == weft::runtime::GradSync::Library)
    return success();
  if (!dataParallel)
    return fail("--grad-sync " + o.gradSync +
                " sums data-parallel gradients: it needs a training step "
                "(--train) over a mesh axis 'dp' with --parallel dp");
  if (expertParallel)
    return fail("--grad-sync " + o.gradSync +
                " sums over dp alone, and with --parallel ep the gradients "
                "of the weights outside the experts sum over dp and ep: drop "
                "one of them");
  if (o.zero)
    return fail("--grad-sync " + o.gradSync +
                " all-reduces whole gradients, and ZeRO reduce-scatters them "
                "to the rank that owns each slice (the parameter-server form "
                "of --grad-sync ps, docs/spmd.md): drop one of them");
  return success();
}

LogicalResult Compilation::buildPassManagers() {
  CompileOptions &o = options();
  weftPasses = std::make_unique<PassManager>(context.get());
  weft::guardPasses(*weftPasses);
  if (o.optLevel > 0)
    weft::buildFuseIdiomsPipeline(*weftPasses);
  if (o.program != ProgramKind::Forward) {
    weft::WeftDeriveTrainStepOptions training;
    training.optimizer = o.optimizer;
    training.tokenInput = o.tokenInput;
    training.weightDecay = o.weightDecay;
    training.clipNorm = o.clipNorm;
    training.freeze.assign(o.freeze.begin(), o.freeze.end());
    training.trainOnly.assign(o.trainOnly.begin(), o.trainOnly.end());
    training.microBatches = o.gradAccum;
    training.computeType = o.precision;
    // The cp ring partitions attention without its saved statistics.
    bool contextParallel = llvm::is_contained(o.parallel, "cp");
    training.attentionInComputeType =
        !contextParallel && target->fusesAttention(o.precision);
    training.fusedAttentionBackward =
        contextParallel || training.attentionInComputeType;
    if (pipelineStages) {
      training.microBatches = o.microbatches;
      training.markPhases = true;
    }
    weftPasses->addPass(weft::createWeftDeriveTrainStep(training));
    // At bf16 the head views between the contractions then move bf16.
    weftPasses->addPass(weft::createWeftSinkWideningCasts());
  }
  // Partitioning runs on the entry alone; a pipeline buckets each rank's
  // program once it is cut.
  spmdPasses = std::make_unique<PassManager>(context.get());
  weft::guardPasses(*spmdPasses);
  if (!o.mesh.empty()) {
    weft::SPMDPipelineOptions spmd;
    spmd.mesh = o.mesh;
    spmd.parallel = o.parallel;
    spmd.sequenceParallel = o.sequenceParallel;
    spmd.zero = o.zero;
    spmd.contextAttention = o.cpAttention;
    spmd.padUneven = o.padUneven;
    spmd.localReplicas = o.dpSyncEvery > 1;
    spmd.bucketMb = outlined() ? 0.0 : o.bucketMb;
    weft::buildSPMDPipeline(*spmdPasses, spmd);
  }
  // The entry's weft.outputs are dropped before lowering (see
  // compileProgram): the recomputation is told which function returns the
  // loss. An outlined step recomputes between its functions instead.
  lowering = std::make_unique<PassManager>(context.get());
  weft::guardPasses(*lowering);
  if (o.timeLoweringPasses)
    lowering->enableTiming();
  target->buildLowering(
      *lowering,
      weft::LoweringOptions{o.optLevel, outlined() ? "none" : o.recompute,
                            "weft_model_main", o.allowTf32, o.profileLaunches});
  std::string error;
  llvm::raw_string_ostream errorStream(error);
  if (!o.testLoweringPasses.empty() &&
      failed(parsePassPipeline(o.testLoweringPasses, *lowering, errorStream)))
    return fail("--test-lowering-passes: " + llvm::StringRef(error).trim());
  return success();
}

std::string Compilation::describePassManagers() {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "weft passes: ";
  weftPasses->printAsTextualPipeline(os);
  os << "\nspmd passes: ";
  spmdPasses->printAsTextualPipeline(os);
  os << "\nlowering: ";
  lowering->printAsTextualPipeline(os);
  os << "\n";
  return text;
}

/// Marks every op of `main` with its stage (weft-split-stages), at the
/// --stage-boundaries if given.
LogicalResult Compilation::splitStages(ModuleOp module, int64_t stages) {
  PassManager split(module.getContext());
  weft::guardPasses(split);
  weft::WeftSplitStagesOptions options;
  options.stages = stages;
  options.boundaries.assign(result.options.stageBoundaries.begin(),
                            result.options.stageBoundaries.end());
  split.addPass(weft::createWeftSplitStages(options));
  return split.run(module);
}

/// The schedule, then which layers each stage runs (weft-split-stages on
/// the program) and the tied parameters.
LogicalResult Compilation::printStages(ModuleOp module) {
  const CompileOptions &o = options();
  if (failed(splitStages(module, *pipelineStages)))
    return failure();
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main)
    return fail("the model has no function 'main'");
  std::vector<std::vector<std::string>> layers(*pipelineStages);
  main.walk([&](Operation *op) {
    auto stage =
        op->getAttrOfType<IntegerAttr>(weft::WeftDialect::kStageAttrName);
    std::optional<std::string> layer = weft::numberedLayerOf(op->getLoc());
    if (stage && layer && !llvm::is_contained(layers[stage.getInt()], *layer))
      layers[stage.getInt()].push_back(*layer);
  });
  llvm::raw_string_ostream os(result.text);
  os << scheduleText << "stages ("
     << (o.stageBoundaries.empty() ? "balanced by contraction FLOPs"
                                   : "--stage-boundaries")
     << "):\n";
  for (auto [stage, names] : llvm::enumerate(layers)) {
    os << "  stage " << stage << ":";
    for (const std::string &layer : names)
      os << " " << layer;
    os << "\n";
  }
  auto pipeline =
      main->getAttrOfType<DictionaryAttr>(weft::WeftDialect::kPipelineAttrName);
  auto tied = pipeline ? pipeline.getAs<ArrayAttr>("tied") : ArrayAttr();
  os << "  tied parameters (gradients summed between stages):";
  if (!tied || tied.empty())
    os << " none";
  else
    for (Attribute name : tied)
      os << " " << llvm::cast<StringAttr>(name).getValue();
  os << "\n";
  return success();
}

/// Cuts the partitioned training step into the programs of the pp ranks:
/// stages split by layer, each rank's ops ordered by its schedule, values
/// that cross ranks sent and received (weft-pipeline-cut).
LogicalResult
Compilation::cutPipeline(ModuleOp module,
                         std::vector<OwningOpRef<ModuleOp>> &programs) {
  const CompileOptions &o = options();
  if (failed(splitStages(module, *pipelineStages * o.virtualStages)) ||
      failed(outlineMicrobatches(module)))
    return failure();
  for (int64_t rank = 0; rank < *pipelineStages; ++rank) {
    OwningOpRef<ModuleOp> program(module.clone());
    PassManager passes(module.getContext());
    weft::guardPasses(passes);
    weft::WeftPipelineCutOptions cut;
    cut.rank = rank;
    cut.schedule = o.schedule;
    cut.microbatches = o.microbatches;
    cut.virtualStages = o.virtualStages;
    passes.addPass(weft::createWeftPipelineCut(cut));
    // The other ranks' stage functions.
    passes.addPass(createSymbolDCEPass());
    passes.addPass(weft::createWeftBucketCollectives({o.bucketMb}));
    passes.addPass(createCanonicalizerPass());
    if (failed(passes.run(*program)))
      return failure();
    programs.push_back(std::move(program));
  }
  return success();
}

/// Makes one function of each stage and phase of the step's micro-batch
/// template and calls them in a loop over the micro-batches
/// (weft-outline-microbatches); without a pipeline, also buckets the
/// gradient reductions, which now run once, in the update.
LogicalResult Compilation::outlineMicrobatches(ModuleOp module) {
  const CompileOptions &o = options();
  PassManager passes(module.getContext());
  weft::guardPasses(passes);
  weft::WeftOutlineMicrobatchesOptions outline;
  outline.recompute = o.recompute;
  outline.splitBackward =
      schedule && weft::pipeline::splitsBackward(schedule->kind);
  passes.addPass(weft::createWeftOutlineMicrobatches(outline));
  if (!pipelineStages) {
    passes.addPass(weft::createWeftBucketCollectives({o.bucketMb}));
    passes.addPass(createCanonicalizerPass());
  }
  return passes.run(module);
}

/// Lowers one program to an object file (or LLVM IR) and writes its
/// weights.
LogicalResult Compilation::compileProgram(ModuleOp program,
                                          int64_t pipelineRank,
                                          const std::string &objectPath,
                                          const std::string &weightsPath) {
  const CompileOptions &o = options();
  std::string symbolSuffix =
      pipelineRank >= 0 ? "_pp" + std::to_string(pipelineRank) : "";
  auto main = program.lookupSymbol<func::FuncOp>("main");
  if (!main)
    return fail("the model has no function 'main'");
  std::optional<weft::EntryMesh> mesh = weft::describeMesh(program);
  const weft::EntryMesh *meshOrNull = mesh ? &*mesh : nullptr;
  uint64_t weightsBytes;
  FailureOr<std::vector<weft::EntryBuffer>> described =
      weft::describeEntry(main, meshOrNull, weightsBytes);
  if (failed(described))
    return failure();
  std::vector<weft::EntryBuffer> buffers = std::move(*described);
  int64_t dpAxis = 0;
  for (size_t axis = 0; mesh && axis < mesh->names.size(); ++axis)
    if (mesh->names[axis] == "dp")
      dpAxis = int64_t(1) << axis;
  bool localSteps = o.dpSyncEvery > 1;
  std::string manifest = weft::buildManifest(
      main, buffers, meshOrNull, target->device(), gradSync,
      gradSync != weft::runtime::GradSync::Library ? dpAxis : 0, o.dpSyncEvery,
      localSteps ? dpAxis : 0);
  weft::ProgramReport report =
      describeProgram(program, buffers, meshOrNull, weightsBytes);
  report.pipelineRank = pipelineRank;
  if (pipelineRank >= 0)
    report.microbatchesInFlight =
        weft::pipeline::simulate(*schedule).peakInFlight[pipelineRank];

  if (auto training = main->getAttrOfType<DictionaryAttr>(
          weft::WeftDialect::kOptimizerAttrName)) {
    if (auto flops = training.getAs<IntegerAttr>("flops"))
      report.stepFlops = double(flops.getInt());
    if (auto tokens = training.getAs<StringAttr>("tokens"))
      for (const weft::EntryBuffer &b : buffers)
        if (b.name == tokens.getValue()) {
          report.tokensPerStep = 1;
          for (int64_t d : b.globalShape)
            report.tokensPerStep *= d;
        }
  }

  // The C `main` of the executable is the runtime's.
  constexpr llvm::StringLiteral entryName = "weft_model_main";
  if (failed(SymbolTable::replaceAllSymbolUses(
          main, StringAttr::get(context.get(), entryName), program)))
    return fail("cannot rename the entry function");
  SymbolTable::setSymbolName(main, entryName);
  // The manifest now describes the buffers; bufferization changes the
  // signature these attributes describe.
  main->removeAttr(weft::WeftDialect::kOutputsAttrName);
  main->removeAttr(weft::WeftDialect::kOptimizerAttrName);
  for (unsigned i = 0; i < main.getNumArguments(); ++i)
    main.setArgAttrs(i, ArrayRef<NamedAttribute>{});
  for (unsigned i = 0; i < main.getNumResults(); ++i)
    main.setResultAttrs(i, ArrayRef<NamedAttribute>{});
  {
    StageTimer timer(result.stageTimes, "lowering");
    // Each distinct layer is compiled once. The lowering's recomputation
    // works within one function: a step it recomputes stays whole.
    if (outlined() || o.recompute == "none") {
      PassManager layers(context.get());
      weft::guardPasses(layers);
      layers.addPass(weft::createWeftOutlineLayers());
      if (failed(layers.run(program)))
        return failure();
    }
    if (failed(lowering->run(program)))
      return failure();
  }
  if (auto plan = program->getAttrOfType<DictionaryAttr>(
          weft::WeftDialect::kMemoryPlanAttrName)) {
    auto get = [&](StringRef key) {
      auto value = plan.getAs<IntegerAttr>(key);
      return value ? value.getInt() : 0;
    };
    report.temporaryPeakBytes = get("peak_bytes");
    report.temporaryBuffers = get("buffers");
    report.temporaryUnplannedBytes = get("unplanned_bytes");
  }
  if (auto kernels =
          program->getAttrOfType<DictionaryAttr>(weft::kKernelReportAttrName))
    describeKernels(kernels, report);
  result.programs.push_back(std::move(report));

  llvm::LLVMContext llvmContext;
  std::string error;
  std::unique_ptr<llvm::Module> llvmModule;
  {
    StageTimer timer(result.stageTimes, "translation to LLVM IR");
    llvmModule =
        weft::translateToLLVMIR(program, llvmContext, entryName, buffers,
                                manifest, o.optLevel, error, symbolSuffix);
  }
  if (!llvmModule)
    return fail(error);
  if (o.emit == EmitKind::LLVM) {
    auto out = openOutputFile(o.output, &error);
    if (!out)
      return fail(error);
    llvmModule->print(out->os(), nullptr);
    out->keep();
    result.files.push_back(o.output);
    return success();
  }
  outputs.paths.push_back(objectPath);
  outputs.paths.push_back(weightsPath);
  {
    StageTimer timer(result.stageTimes, "code generation");
    if (!weft::emitObjectFile(*llvmModule, objectPath, o.optLevel, error))
      return fail(error);
  }
  StageTimer timer(result.stageTimes, "weights");
  if (failed(writeWeights(program, buffers, meshOrNull, weightsBytes, manifest,
                          weightsPath, error)))
    return error.empty() ? failure() : fail(error);
  return success();
}

LogicalResult Compilation::link(const std::vector<std::string> &objects,
                                bool partitioned) {
  const CompileOptions &o = options();
  if (o.runtimeDirectory.empty())
    return fail("no runtime directory to link the executable with");
  outputs.paths.push_back(o.output);
  std::string error;
  StageTimer timer(result.stageTimes, "link");
  if (!target->link(objects, o.output, o.runtimeDirectory, partitioned,
                    /*sharedLibrary=*/false, error))
    return fail(error);
  if (!o.sharedLibrary)
    return success();
  if (partitioned)
    return fail("a shared library holds a one-rank program; a partitioned "
                "one runs its ranks as processes (weft-run)");
  outputs.paths.push_back(o.output + ".so");
  if (!target->link(objects, o.output + ".so", o.runtimeDirectory, partitioned,
                    /*sharedLibrary=*/true, error))
    return fail(error);
  return success();
}

LogicalResult Compilation::runStages() {
  CompileOptions &o = options();
  if (failed(checkOptions()) || (!o.plan.empty() && failed(choosePlan())))
    return failure();
  if (o.output.empty())
    o.output = weft::defaultOutputFile(o.model, o.emit);
  if (failed(checkPipeline()) || failed(checkGradSync()))
    return failure();
  if (o.recompute != "none" && o.recompute != "selective" &&
      o.recompute != "full")
    return fail("--recompute must be none, selective or full, not '" +
                o.recompute + "'");
  if (o.recompute != "none" && o.program == ProgramKind::Forward)
    return fail("--recompute needs a training step (--train)");
  if (o.precision != "f32" && o.program == ProgramKind::Forward)
    return fail("--precision needs a training step (--train)");
  if ((!o.freeze.empty() || !o.trainOnly.empty()) &&
      o.program == ProgramKind::Forward)
    return fail("--freeze and --train-only need a training step (--train)");

  DialectRegistry registry;
  weft::registerAllDialects(registry);
  context = std::make_unique<MLIRContext>(registry);
  context->printOpOnDiagnostic(false);
  ScopedDiagnosticHandler handler(context.get(), [&](Diagnostic &diag) {
    diagnostics(diag.getSeverity(), weft::formatDiagnostic(diag));
    return success();
  });
  if (failed(buildPassManagers()))
    return failure();
  if (o.emit == EmitKind::Passes) {
    result.text = describePassManagers();
    return success();
  }

  std::string error;
  std::optional<StageTimer> timer;
  timer.emplace(result.stageTimes, "import");
  OwningOpRef<ModuleOp> module = weft::loadModel(
      o.model, o.dims, /*fuseIdioms=*/false, context.get(), error);
  if (!module)
    return fail(error);
  timer.emplace(result.stageTimes, "weft passes");
  if (failed(weftPasses->run(*module)))
    return failure();
  if (auto step = module->lookupSymbol<func::FuncOp>("train_step"))
    if (auto training = step->getAttrOfType<DictionaryAttr>(
            weft::WeftDialect::kOptimizerAttrName))
      if (auto tokens = training.getAs<StringAttr>("tokens"))
        diagnostics(DiagnosticSeverity::Remark,
                    "training on the token ids in input '" +
                        tokens.getValue().str() + "'" +
                        (o.tokenInput.empty()
                             ? " (the model's only integer input)"
                             : " (--token-input)"));
  // The executable runs one function: it becomes `main`.
  StringRef entry = o.program == ProgramKind::Train       ? "train_step"
                    : o.program == ProgramKind::Gradients ? "train_loss_grad"
                                                          : "main";
  for (auto func : llvm::make_early_inc_range(module->getOps<func::FuncOp>()))
    if (func.getSymName() != entry && !func.isDeclaration())
      func.erase();
  if (auto func = module->lookupSymbol<func::FuncOp>(entry))
    func.setSymName("main");
  if (o.emit == EmitKind::Schedule)
    return printStages(*module);
  timer.emplace(result.stageTimes, "partitioning");
  if (failed(spmdPasses->run(*module)))
    return failure();

  // A pipeline runs one program per rank of its pp axis.
  std::vector<OwningOpRef<ModuleOp>> programs;
  timer.emplace(result.stageTimes, "micro-batches and pipeline cut");
  if (pipelineStages) {
    if (failed(cutPipeline(*module, programs)))
      return failure();
  } else {
    if (outlined() && failed(outlineMicrobatches(*module)))
      return failure();
    programs.push_back(std::move(module));
  }
  timer.reset();
  bool pipelined = pipelineStages.has_value();
  // Lowering drops the mesh: a partitioned program links the MPI runtime.
  bool partitioned = weft::describeMesh(*programs.front()).has_value();

  if (o.emit == EmitKind::MLIR) {
    auto out = openOutputFile(o.output, &error);
    if (!out)
      return fail(error);
    for (auto [r, program] : llvm::enumerate(programs)) {
      if (pipelined)
        out->os() << "// pp rank " << r << "\n";
      program->print(out->os());
    }
    out->keep();
    result.files.push_back(o.output);
    return success();
  }
  if (pipelined && o.emit != EmitKind::Executable)
    return fail("--emit=llvm and --emit=obj write one program, and a "
                "pipeline has one per pp rank: use --emit=mlir or build the "
                "executable");

  std::vector<std::string> objects;
  std::vector<std::string> weights;
  for (auto [r, program] : llvm::enumerate(programs)) {
    std::string stem =
        pipelined ? o.output + ".pp" + std::to_string(r) : o.output;
    std::string objectPath =
        o.emit == EmitKind::Object ? o.output : stem + ".o";
    weights.push_back(stem + ".weights");
    if (failed(compileProgram(*program, pipelined ? int64_t(r) : -1, objectPath,
                              weights.back())))
      return failure();
    if (o.emit == EmitKind::LLVM)
      return success();
    objects.push_back(objectPath);
  }
  if (o.emit == EmitKind::Object) {
    outputs.keep = true;
    result.files = {o.output, weights.front()};
    return success();
  }
  if (pipelined) {
    llvm::LLVMContext llvmContext;
    std::unique_ptr<llvm::Module> table = weft::pipelineTable(
        llvmContext, int64_t(programs.size()), o.optLevel, error);
    std::string tablePath = o.output + ".pipeline.o";
    outputs.paths.push_back(tablePath);
    if (!table || !weft::emitObjectFile(*table, tablePath, o.optLevel, error))
      return fail(error);
    objects.push_back(tablePath);
  }
  if (failed(link(objects, partitioned)))
    return failure();
  for (const std::string &object : objects)
    llvm::sys::fs::remove(object);
  outputs.keep = true;
  result.files = {o.output};
  result.files.insert(result.files.end(), weights.begin(), weights.end());
  if (o.sharedLibrary)
    result.files.push_back(o.output + ".so");
  return success();
}

} // namespace

std::optional<weft::CompileResult>
weft::compile(const CompileOptions &options,
              const DiagnosticCallback &diagnostics) {
  // The lowering is a textual pipeline of registered passes.
  registerAllPasses();
  return Compilation(options, diagnostics).run();
}

/// Which parameters the step updates, and which it keeps (frozen by the
/// user, or constants too large to inline).
static void printTrainedParameters(const weft::ProgramReport &report,
                                   llvm::raw_ostream &os) {
  std::vector<const weft::ProgramReport::Buffer *> trained, frozen;
  uint64_t trainedBytes = 0, frozenBytes = 0;
  for (const weft::ProgramReport::Buffer &buffer : report.buffers) {
    if (buffer.role != "param")
      continue;
    (buffer.trains ? trained : frozen).push_back(&buffer);
    (buffer.trains ? trainedBytes : frozenBytes) += buffer.localBytes;
  }
  auto list = [&](StringRef what,
                  ArrayRef<const weft::ProgramReport::Buffer *> buffers,
                  uint64_t bytes) {
    os << what << ": " << buffers.size() << " tensors, " << bytes << " bytes";
    for (auto [i, buffer] : llvm::enumerate(buffers)) {
      os << (i ? " " : ": ") << buffer->name << "[";
      llvm::interleave(buffer->shape, os, "x");
      os << "]";
    }
    os << "\n";
  };
  list("trained parameters", trained, trainedBytes);
  list("frozen parameters", frozen, frozenBytes);
}

void weft::printReport(const CompileResult &result, llvm::raw_ostream &os) {
  const CompileOptions &o = result.options;
  for (const ProgramReport &report : result.programs) {
    if (report.pipelineRank >= 0)
      os << "pp rank " << report.pipelineRank << ":\n";
    bool partitioned = !report.meshNames.empty();
    if (partitioned) {
      int64_t ranks = 1;
      for (int64_t size : report.meshSizes)
        ranks *= size;
      os << "mesh: ";
      for (auto [i, name] : llvm::enumerate(report.meshNames))
        os << (i ? "," : "") << name << "=" << report.meshSizes[i];
      os << " (" << ranks << " ranks; every figure below is per rank)\n";
    }
    os << "parameters: " << report.parameterBytes
       << " bytes (whole model: " << report.wholeModelParameterBytes
       << " bytes)\n";
    if (partitioned) {
      os << "  split: " << report.splitParameterBytes << " bytes of "
         << report.splitWholeParameterBytes << "\n  replicated: "
         << report.parameterBytes - report.splitParameterBytes << " bytes in "
         << report.replicatedParameters.size() << " tensors:";
      for (const ProgramReport::Tensor &tensor : report.replicatedParameters) {
        os << " " << tensor.name << "[";
        llvm::interleave(tensor.shape, os, "x");
        os << "]";
      }
      os << "\n";
    }
    if (o.program == ProgramKind::Train)
      printTrainedParameters(report, os);
    if (report.optimizerStateBytes)
      os << "optimizer state: " << report.optimizerStateBytes << " bytes\n";
    os << "weights file: " << report.weightsFileBytes
       << " bytes (with 64-byte alignment)\ninputs: " << report.inputBytes
       << " bytes\noutputs: " << report.outputBytes << " bytes\n";
    if (report.temporaryPeakBytes) {
      os << "temporaries: peak " << *report.temporaryPeakBytes
         << " bytes in one arena per function (" << report.temporaryBuffers
         << " buffers, " << report.temporaryUnplannedBytes
         << " bytes without reuse)\n";
      os << "activations (inputs, outputs, temporaries): "
         << report.inputBytes + report.outputBytes + *report.temporaryPeakBytes
         << " bytes\n";
    }
    if (report.pipelineRank >= 0)
      os << "pipeline: at most " << report.microbatchesInFlight
         << " micro-batches in flight on this rank (" << o.schedule << ", "
         << o.microbatches << " micro-batches)\n";
    if (partitioned) {
      int64_t runs = 0;
      for (const CollectiveReport &c : report.collectives)
        runs += c.runs;
      os << "collectives: " << runs << " per call\n";
      for (const CollectiveReport &c : report.collectives) {
        os << "  " << c.kind << " over " << c.axes << ": " << c.inputType
           << " -> " << c.resultType << ", " << c.bytesIn << " bytes in, "
           << c.bytesMovedPerRank << " bytes moved per rank";
        if (c.runs > 1)
          os << ", " << c.runs << " times per call";
        if (!c.location.empty()) {
          os << " (\"";
          llvm::printEscapedString(c.location, os);
          os << "\")";
        }
        os << "\n";
      }
    }
  }
}

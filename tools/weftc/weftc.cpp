//===- weftc.cpp - The Weft compiler driver -------------------------------===//
//
//   weftc model.onnx --dim batch=1 --dim seq=16 -o model
//
// produces the executable `model` and its weights file `model.weights`.
// `--emit=mlir|llvm|obj` stops at the weft IR, the LLVM IR or the object.
// Errors are one line, `weftc: error: ...`, exit code 1, and leave no
// output files behind.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/Layers.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/Transforms/Passes.h"
#include "weft/Dialect/Weft/Transforms/PipelineSchedule.h"
#include "weft/Dialect/Weft/Transforms/Sharding.h"
#include "weft/InitAllDialects.h"
#include "weft/InitAllPasses.h"
#include "weft/Planner/Planner.h"
#include "weft/Planner/Report.h"
#include "weft/Target/CPU/CPUTarget.h"
#include "weft/Target/ONNX/ImportONNX.h"
#include "weft/runtime/ShardLayout.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory category("weftc options");
static cl::opt<std::string> inputFile(cl::Positional, cl::Required,
                                      cl::desc("<model.onnx|.onnxtxt|.mlir>"),
                                      cl::cat(category));
static cl::opt<std::string> outputFile("o", cl::desc("Output file"),
                                       cl::value_desc("file"),
                                       cl::cat(category));
static cl::list<std::string>
    dims("dim", cl::desc("Bind a symbolic dimension: --dim batch=8"),
         cl::value_desc("name=value"), cl::cat(category));
enum class Emit { MLIR, LLVM, Obj, Exe };
static cl::opt<Emit> emit(
    "emit", cl::desc("Stop at this stage"), cl::init(Emit::Exe),
    cl::values(clEnumValN(Emit::MLIR, "mlir", "weft IR after the weft passes"),
               clEnumValN(Emit::LLVM, "llvm", "LLVM IR"),
               clEnumValN(Emit::Obj, "obj", "object file (+ weights file)"),
               clEnumValN(Emit::Exe, "exe", "executable (+ weights file)")),
    cl::cat(category));
static cl::opt<unsigned> optLevel("O", cl::desc("Optimization level 0-3"),
                                  cl::Prefix, cl::init(2), cl::cat(category));
static cl::opt<bool> report("report",
                            cl::desc("Print the memory plan and buffer sizes"),
                            cl::cat(category));
static cl::opt<std::string>
    meshOption("mesh",
               cl::desc("Partition for a device mesh: --mesh dp=2,tp=2"),
               cl::value_desc("axis=size,..."), cl::cat(category));
static cl::list<std::string>
    parallel("parallel", cl::desc("Parallel strategies: dp, megatron"),
             cl::CommaSeparated, cl::value_desc("strategy,..."),
             cl::cat(category));
static cl::opt<bool>
    sequenceParallel("sequence-parallel",
                     cl::desc("Split norm regions on the sequence dim (tp)"),
                     cl::cat(category));
static cl::opt<bool>
    padUneven("pad-uneven",
              cl::desc("Pad a dim that does not divide by its mesh axis"),
              cl::cat(category));
enum class Program { Forward, Train, Gradients };
static cl::opt<Program> program(
    "program", cl::desc("What the executable computes"),
    cl::init(Program::Forward),
    cl::values(
        clEnumValN(Program::Forward, "forward", "the model (default)"),
        clEnumValN(Program::Train, "train",
                   "a training step: loss, gradients, optimizer update"),
        clEnumValN(Program::Gradients, "gradients",
                   "the cross-entropy loss and its parameter gradients")),
    cl::cat(category));
static cl::opt<bool> trainFlag("train", cl::desc("Same as --program=train"),
                               cl::cat(category));
static cl::opt<std::string> optimizer("optimizer",
                                      cl::desc("adamw (default) or sgd"),
                                      cl::init("adamw"), cl::cat(category));
static cl::opt<std::string> tokenInput(
    "token-input",
    cl::desc("The model input holding the token ids, for --train (default: "
             "its only integer input)"),
    cl::cat(category));
static cl::opt<double> weightDecay("weight-decay",
                                   cl::desc("Weight decay (default 0.1)"),
                                   cl::init(0.1), cl::cat(category));
static cl::opt<double>
    clipNorm("clip-norm",
             cl::desc("Clip the global gradient norm (default 1; 0: off)"),
             cl::init(1.0), cl::cat(category));
static cl::opt<unsigned>
    zeroStage("zero", cl::desc("ZeRO stage over dp for --train: 1, 2 or 3"),
              cl::init(0), cl::cat(category));
static cl::opt<int64_t> gradAccum(
    "grad-accum",
    cl::desc("Accumulate gradients over N micro-batches per step (--train)"),
    cl::init(1), cl::cat(category));
static cl::opt<std::string> precision(
    "precision",
    cl::desc("Contractions of a training step in f32 (default) or bf16, "
             "with f32 master weights"),
    cl::init("f32"), cl::cat(category));
static cl::opt<std::string> recompute(
    "recompute",
    cl::desc("Recompute activations in the backward pass: none, selective "
             "(elementwise work) or full (whole layers)"),
    cl::init("none"), cl::cat(category));
static cl::opt<double> bucketMb(
    "bucket-mb",
    cl::desc("Combine collectives into buckets of this many MiB (0: off)"),
    cl::init(25.0), cl::cat(category));
static cl::opt<int64_t>
    microbatches("microbatches",
                 cl::desc("Pipeline micro-batches per step (mesh axis pp)"),
                 cl::init(1), cl::cat(category));
static cl::opt<std::string>
    pipelineSchedule("schedule",
                     cl::desc("Pipeline schedule: gpipe, 1f1b or interleaved"),
                     cl::init("1f1b"), cl::cat(category));
static cl::opt<int64_t> virtualStages(
    "virtual-stages",
    cl::desc("Model chunks per pipeline rank (interleaved schedule)"),
    cl::init(1), cl::cat(category));
static cl::list<int64_t> stageBoundaries(
    "stage-boundaries",
    cl::desc("First layer of each pipeline stage after the first "
             "(default: balanced by FLOPs)"),
    cl::CommaSeparated, cl::cat(category));
static cl::opt<bool> printSchedule(
    "print-schedule",
    cl::desc("Print each pipeline rank's schedule (with --mesh pp=N) and stop"),
    cl::cat(category));
static cl::opt<std::string> planOption(
    "plan",
    cl::desc("Choose the parallel plan of a training step: 'auto' searches "
             "every plan for --cluster, 'dp=2,pp=2,...' pins some choices "
             "and searches the rest (see weft-plan)"),
    cl::value_desc("auto|key=value,..."), cl::cat(category));
static cl::opt<std::string>
    clusterOption("cluster",
                  cl::desc("The cluster --plan plans for: a preset "
                           "(cpu-local, dgx-a100-80g, ...) or a JSON/YAML "
                           "file (default cpu-local)"),
                  cl::init("cpu-local"), cl::cat(category));
static cl::opt<int64_t>
    clusterNodes("nodes", cl::desc("Nodes of a preset --cluster (default 1)"),
                 cl::init(1), cl::cat(category));
static cl::opt<bool> printPipeline("print-pipeline",
                                   cl::desc("Print the pass pipelines"),
                                   cl::cat(category));

namespace {

int fail(const llvm::Twine &message) {
  llvm::errs() << "weftc: error: " << message << "\n";
  return 1;
}

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

std::string defaultOutput() {
  llvm::SmallString<256> stem(llvm::sys::path::filename(inputFile));
  llvm::sys::path::replace_extension(stem, "");
  switch (emit) {
  case Emit::MLIR:
    return (stem + ".mlir").str();
  case Emit::LLVM:
    return (stem + ".ll").str();
  case Emit::Obj:
    return (stem + ".o").str();
  case Emit::Exe:
    return stem.str().str();
  }
  return stem.str().str();
}

/// The runtime libraries installed beside this tool: <bin>/../lib.
std::string runtimeLibrary(const char *argv0, llvm::StringRef name) {
  std::string exe = llvm::sys::fs::getMainExecutable(
      argv0, reinterpret_cast<void *>(&defaultOutput));
  llvm::SmallString<256> path(
      llvm::sys::path::parent_path(llvm::sys::path::parent_path(exe)));
  llvm::sys::path::append(path, "lib", name);
  return path.str().str();
}

/// Writes the weights file: a 64-byte header, then every param at its
/// offset.
LogicalResult writeWeights(ModuleOp module,
                           const std::vector<weft::EntryBuffer> &buffers,
                           const weft::EntryMesh *mesh, uint64_t bytes,
                           const std::string &manifest, llvm::StringRef path) {
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
        fail("bad sharding '" + b.spec + "' of '" + b.name + "'");
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
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec);
  if (ec) {
    fail("cannot write '" + path + "': " + ec.message());
    return failure();
  }
  char header[64] = "WEFTWGT1";
  uint64_t hash = weft::manifestHash(manifest);
  memcpy(header + 8, &hash, 8);
  memcpy(header + 16, &bytes, 8);
  out.write(header, sizeof(header));
  std::string zeros(bytes - sizeof(header), '\0');
  out.write(zeros.data(), zeros.size());
  if (placement.empty())
    return success();
  auto source =
      module->getAttrOfType<StringAttr>(weft::WeftDialect::kWeightsAttrName);
  if (!source) {
    fail("the module has weights but no 'weft.weights' source file");
    return failure();
  }
  return weft::writeONNXInitializers(source.getValue(), placement, out,
                                     module.getContext());
}

/// One line per collective of a partitioned module: the op, its mesh axes,
/// the local tensor and the bytes a rank moves for it (ring algorithms).
std::vector<std::string> describeCollectives(ModuleOp module,
                                             const weft::EntryMesh &mesh) {
  std::vector<std::string> lines;
  module.walk([&](Operation *op) {
    auto axes = op->getAttrOfType<DenseI16ArrayAttr>("grid_axes");
    if (!axes || op->getDialect()->getNamespace() != "shard" ||
        op->getName().getStringRef() == "shard.all_slice")
      return;
    auto input = llvm::cast<RankedTensorType>(op->getOperand(0).getType());
    auto result = llvm::cast<RankedTensorType>(op->getResult(0).getType());
    int64_t parts = 1;
    std::string axisNames;
    for (int16_t axis : axes.asArrayRef()) {
      parts *= mesh.sizes[axis];
      axisNames += (axisNames.empty() ? "" : ",") + mesh.names[axis];
    }
    auto bytesOf = [](RankedTensorType type) {
      return type.getNumElements() *
             std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
    };
    StringRef kind = op->getName().stripDialect();
    int64_t moved =
        kind == "all_reduce"   ? 2 * bytesOf(input) * (parts - 1) / parts
        : kind == "all_gather" ? bytesOf(result) * (parts - 1) / parts
                               : bytesOf(input) * (parts - 1) / parts;
    std::string text;
    llvm::raw_string_ostream os(text);
    os << kind << " over " << axisNames << ": " << input << " -> " << result
       << ", " << bytesOf(input) << " bytes in, " << moved
       << " bytes moved per rank";
    if (auto name = llvm::dyn_cast<NameLoc>(op->getLoc()))
      os << " (" << name.getName() << ")";
    lines.push_back(text);
  });
  return lines;
}

} // namespace

/// --print-schedule: the schedule, then which layers each stage runs
/// (weft-split-stages on the program) and the tied parameters.
int printPipelineStages(ModuleOp module, int64_t stages,
                        const std::string &scheduleText) {
  PassManager split(module.getContext());
  weft::WeftSplitStagesOptions options;
  options.stages = stages;
  options.boundaries.assign(stageBoundaries.begin(), stageBoundaries.end());
  split.addPass(weft::createWeftSplitStages(options));
  if (failed(split.run(module)))
    return 1;
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main)
    return fail("the model has no function 'main'");
  std::vector<std::vector<std::string>> layers(stages);
  main.walk([&](Operation *op) {
    auto stage =
        op->getAttrOfType<IntegerAttr>(weft::WeftDialect::kStageAttrName);
    std::optional<std::string> layer = weft::numberedLayerOf(op->getLoc());
    if (stage && layer && !llvm::is_contained(layers[stage.getInt()], *layer))
      layers[stage.getInt()].push_back(*layer);
  });
  llvm::outs() << scheduleText << "stages ("
               << (stageBoundaries.empty() ? "balanced by contraction FLOPs"
                                           : "--stage-boundaries")
               << "):\n";
  for (int64_t stage = 0; stage < stages; ++stage) {
    llvm::outs() << "  stage " << stage << ":";
    for (const std::string &layer : layers[stage])
      llvm::outs() << " " << layer;
    llvm::outs() << "\n";
  }
  auto pipeline =
      main->getAttrOfType<DictionaryAttr>(weft::WeftDialect::kPipelineAttrName);
  auto tied = pipeline ? pipeline.getAs<ArrayAttr>("tied") : ArrayAttr();
  llvm::outs() << "  tied parameters (gradients summed between stages):";
  if (!tied || tied.empty())
    llvm::outs() << " none";
  else
    for (Attribute name : tied)
      llvm::outs() << " " << llvm::cast<StringAttr>(name).getValue();
  llvm::outs() << "\n";
  return 0;
}

/// Cuts the partitioned training step into the programs of the pp ranks:
/// stages split by layer, each rank's ops ordered by its schedule, values
/// that cross ranks sent and received (weft-pipeline-cut).
LogicalResult cutPipeline(ModuleOp module, int64_t ranks,
                          std::vector<OwningOpRef<ModuleOp>> &programs) {
  PassManager split(module.getContext());
  weft::WeftSplitStagesOptions stages;
  stages.stages = ranks * virtualStages;
  stages.boundaries.assign(stageBoundaries.begin(), stageBoundaries.end());
  split.addPass(weft::createWeftSplitStages(stages));
  if (failed(split.run(module)))
    return failure();
  for (int64_t rank = 0; rank < ranks; ++rank) {
    OwningOpRef<ModuleOp> program(module.clone());
    PassManager passes(module.getContext());
    weft::WeftPipelineCutOptions options;
    options.rank = rank;
    options.schedule = pipelineSchedule;
    options.microbatches = microbatches;
    options.virtualStages = virtualStages;
    passes.addPass(weft::createWeftPipelineCut(options));
    passes.addPass(weft::createWeftBucketCollectives({bucketMb}));
    passes.addPass(createCanonicalizerPass());
    if (failed(passes.run(*program)))
      return failure();
    programs.push_back(std::move(program));
  }
  return success();
}

/// Chooses the plan of --plan with the planner (the model profiled from
/// its own training step) and sets the options that compile it.
LogicalResult choosePlan() {
  namespace planner = weft::planner;
  std::string error;
  auto failWith = [](const llvm::Twine &message) {
    fail("--plan: " + message);
    return failure();
  };
  std::optional<planner::Cluster> cluster =
      planner::Cluster::load(clusterOption, clusterNodes, error);
  if (!cluster)
    return failWith("--cluster: " + error);
  std::optional<planner::PlanConstraints> constraints =
      planOption == "auto" ? planner::PlanConstraints()
                           : planner::PlanConstraints::parse(planOption, error);
  if (!constraints)
    return failWith(error);
  constraints->selectiveRecompute = false;

  DialectRegistry registry;
  weft::registerAllDialects(registry);
  MLIRContext context(registry);
  context.printOpOnDiagnostic(false);
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error && diagnostics.empty())
      diagnostics = diag.str();
    return success();
  });
  OwningOpRef<ModuleOp> module;
  if (StringRef(inputFile).ends_with(".mlir")) {
    module = parseSourceFile<ModuleOp>(inputFile, &context);
  } else {
    weft::ONNXImportOptions options;
    if (!options.bindDims(dims, error))
      return failWith(error);
    module = weft::importONNXFile(inputFile, &context, options);
  }
  PassManager fuse(&context);
  weft::buildFuseIdiomsPipeline(fuse);
  if (!module || failed(fuse.run(*module)))
    return failWith(inputFile + ": " + diagnostics);
  std::vector<int64_t> degrees;
  for (int64_t tp = 1; tp <= cluster->gpus(); tp *= 2)
    if (cluster->gpus() % tp == 0)
      degrees.push_back(tp);
  std::optional<planner::ModelProfile> model =
      planner::profileModel(*module, degrees, 0, error);
  if (!model)
    return failWith(error);
  planner::TrainingSetup setup;
  setup.globalBatch = model->batch;
  setup.mixedPrecision = precision == "bf16";
  planner::SearchResult result =
      planner::search(*model, *cluster, setup, *constraints);
  if (result.fitting.empty())
    return failWith(planner::noPlanMessage(result, *cluster));
  const planner::Prediction &best = result.fitting.front();
  const planner::Plan &plan = best.plan;
  llvm::errs() << llvm::formatv(
      "weftc: plan for {0} ({1} ranks): {2}; predicted step {3:F3} s, "
      "{4:F2} GiB per rank\n",
      cluster->name, cluster->gpus(), plan.str(), best.stepTime(),
      best.memory.total() / double(1ull << 30));

  std::string mesh;
  auto axis = [&](const char *name, int64_t size) {
    if (size > 1)
      mesh += (mesh.empty() ? "" : ",") + std::string(name) + "=" +
              std::to_string(size);
  };
  axis("pp", plan.pp);
  axis("dp", plan.dp);
  axis("tp", plan.tp);
  meshOption = mesh;
  parallel.clear();
  if (plan.dp > 1)
    parallel.push_back("dp");
  if (plan.tp > 1)
    parallel.push_back("megatron");
  sequenceParallel = plan.sequenceParallel;
  zeroStage = unsigned(plan.zero);
  recompute = plan.recompute == planner::Recompute::Full ? "full" : "none";
  if (plan.pp > 1) {
    microbatches = plan.microbatches;
    pipelineSchedule = weft::pipeline::scheduleName(plan.schedule);
    virtualStages = plan.virtualStages;
  } else {
    gradAccum = plan.microbatches;
  }
  return success();
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  weft::registerAllPasses();
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "Weft compiler\n");
  if (optLevel > 3)
    return fail("-O takes 0 to 3");
  if (!planOption.empty()) {
    if (!trainFlag && program != Program::Train)
      return fail("--plan chooses how a training step runs: add --train");
    if (!meshOption.empty() || !parallel.empty() || sequenceParallel ||
        zeroStage || gradAccum != 1 || microbatches != 1 ||
        virtualStages != 1 || recompute != "none")
      return fail("--plan chooses the mesh, strategies, ZeRO stage, "
                  "micro-batches, schedule and recomputation: pin a choice "
                  "in --plan instead (--plan=dp=2,zero=1)");
    if (failed(choosePlan()))
      return 1;
  }
  if (outputFile.empty())
    outputFile = defaultOutput();
  std::optional<int64_t> pipelineStages;
  std::string scheduleText;
  std::optional<weft::pipeline::Schedule> pipelineSchedulePlan;
  if (!meshOption.empty()) {
    std::string meshError;
    std::optional<weft::Mesh> mesh = weft::Mesh::parse(meshOption, meshError);
    if (!mesh)
      return fail("--mesh: " + meshError);
    if (std::optional<weft::MeshAxis> pp = mesh->axisNamed("pp"))
      pipelineStages = mesh->sizes[*pp];
  }
  if (printSchedule && !pipelineStages)
    return fail("--print-schedule needs a mesh with a pp axis (--mesh pp=4)");
  if (trainFlag)
    program = Program::Train;
  if (pipelineStages) {
    if (program != Program::Train && !printSchedule)
      return fail("pipeline parallelism (mesh axis 'pp') compiles a training "
                  "step: add --train");
    if (gradAccum > 1)
      return fail("with a pp axis the step's micro-batches are "
                  "--microbatches, not --grad-accum");
    std::optional<weft::pipeline::ScheduleKind> kind =
        weft::pipeline::parseScheduleKind(pipelineSchedule);
    if (!kind)
      return fail("--schedule must be gpipe, 1f1b or interleaved, not '" +
                  pipelineSchedule + "'");
    std::string error;
    std::optional<weft::pipeline::Schedule> schedule =
        weft::pipeline::buildSchedule(*kind, *pipelineStages, microbatches,
                                      virtualStages, error);
    if (!schedule)
      return fail(error);
    if (!weft::pipeline::checkSchedule(*schedule, error))
      return fail("the " + pipelineSchedule + " schedule is wrong: " + error);
    scheduleText = weft::pipeline::drawSchedule(*schedule);
    pipelineSchedulePlan = std::move(schedule);
  } else if (microbatches != 1 || virtualStages != 1 ||
             !stageBoundaries.empty()) {
    return fail("--microbatches, --virtual-stages and --stage-boundaries "
                "need a mesh with a pp axis (--mesh pp=2)");
  }

  DialectRegistry registry;
  weft::registerAllDialects(registry);
  MLIRContext context(registry);
  context.printOpOnDiagnostic(false);
  ScopedDiagnosticHandler handler(&context, [](Diagnostic &diag) {
    std::string message = diag.str();
    std::replace(message.begin(), message.end(), '\n', ' ');
    std::string where;
    llvm::raw_string_ostream os(where);
    diag.getLocation().print(os);
    llvm::errs() << "weftc: "
                 << (diag.getSeverity() == DiagnosticSeverity::Warning
                         ? "warning: "
                         : "error: ")
                 << message << " (at " << where << ")\n";
    return success();
  });

  // Front end.
  OwningOpRef<ModuleOp> module;
  if (StringRef(inputFile).ends_with(".mlir")) {
    module = parseSourceFile<ModuleOp>(inputFile, &context);
  } else {
    weft::ONNXImportOptions options;
    std::string dimError;
    if (!options.bindDims(dims, dimError))
      return fail(dimError);
    module = weft::importONNXFile(inputFile, &context, options);
  }
  if (!module)
    return 1;

  PassManager weftPasses(&context);
  if (optLevel > 0)
    weft::buildFuseIdiomsPipeline(weftPasses);
  if (program != Program::Forward) {
    weft::WeftDeriveTrainStepOptions training;
    training.optimizer = optimizer;
    training.tokenInput = tokenInput;
    training.weightDecay = weightDecay;
    training.clipNorm = clipNorm;
    training.microBatches = gradAccum;
    training.computeType = precision;
    if (pipelineStages) {
      training.microBatches = microbatches;
      training.markPhases = true;
    }
    weftPasses.addPass(weft::createWeftDeriveTrainStep(training));
  }
  // Partitioning runs on the entry alone.
  PassManager spmdPasses(&context);
  if (!meshOption.empty()) {
    weft::WeftShardPresetsOptions presets;
    presets.mesh = meshOption;
    presets.parallel.assign(parallel.begin(), parallel.end());
    presets.sequenceParallel = sequenceParallel;
    presets.zero = zeroStage;
    spmdPasses.addPass(weft::createWeftShardPresets(presets));
    spmdPasses.addPass(
        weft::createWeftPropagateSharding({/*padUneven=*/padUneven}));
    spmdPasses.addPass(weft::createWeftPartition());
    // A pipeline buckets each rank's program once it is cut.
    if (!pipelineStages) {
      spmdPasses.addPass(weft::createWeftBucketCollectives({bucketMb}));
      spmdPasses.addPass(createCanonicalizerPass());
    }
  } else if (!parallel.empty() || sequenceParallel || padUneven) {
    return fail("--parallel, --sequence-parallel and --pad-uneven need --mesh");
  }
  PassManager lowering(&context);
  if (recompute != "none" && recompute != "selective" && recompute != "full")
    return fail("--recompute must be none, selective or full, not '" +
                recompute + "'");
  if (recompute != "none" && program == Program::Forward)
    return fail("--recompute needs a training step (--train)");
  if (precision != "f32" && program == Program::Forward)
    return fail("--precision needs a training step (--train)");
  // The entry's weft.outputs are dropped before lowering (see below): the
  // recomputation is told which function returns the loss.
  weft::buildLowerToLLVMPipeline(
      lowering,
      weft::CPUPipelineOptions{optLevel, recompute, "weft_model_main"});
  if (printPipeline) {
    llvm::outs() << "weft passes: ";
    weftPasses.printAsTextualPipeline(llvm::outs());
    llvm::outs() << "\nspmd passes: ";
    spmdPasses.printAsTextualPipeline(llvm::outs());
    llvm::outs() << "\nlowering: ";
    lowering.printAsTextualPipeline(llvm::outs());
    llvm::outs() << "\n";
    return 0;
  }
  if (failed(weftPasses.run(*module)))
    return 1;
  if (auto step = module->lookupSymbol<func::FuncOp>("train_step"))
    if (auto training = step->getAttrOfType<DictionaryAttr>(
            weft::WeftDialect::kOptimizerAttrName))
      if (auto tokens = training.getAs<StringAttr>("tokens"))
        llvm::errs() << "weftc: training on the token ids in input '"
                     << tokens.getValue() << "'"
                     << (tokenInput.empty()
                             ? " (the model's only integer input)"
                             : " (--token-input)")
                     << "\n";
  // The executable runs one function: it becomes `main`.
  StringRef entry = program == Program::Train       ? "train_step"
                    : program == Program::Gradients ? "train_loss_grad"
                                                    : "main";
  for (auto func : llvm::make_early_inc_range(module->getOps<func::FuncOp>()))
    if (func.getSymName() != entry && !func.isDeclaration())
      func.erase();
  if (auto func = module->lookupSymbol<func::FuncOp>(entry))
    func.setSymName("main");
  if (printSchedule)
    return printPipelineStages(*module, *pipelineStages, scheduleText);
  if (failed(spmdPasses.run(*module)))
    return 1;

  // A pipeline runs one program per rank of its pp axis.
  std::vector<OwningOpRef<ModuleOp>> programs;
  std::vector<int64_t> inFlight;
  if (pipelineStages) {
    if (failed(cutPipeline(*module, *pipelineStages, programs)))
      return 1;
    inFlight = weft::pipeline::simulate(*pipelineSchedulePlan).peakInFlight;
  } else {
    programs.push_back(std::move(module));
  }
  bool pipelined = pipelineStages.has_value();
  // Lowering drops the mesh: a partitioned program links the MPI runtime.
  bool partitioned = weft::describeMesh(*programs.front()).has_value();

  OutputFiles outputs;
  if (emit == Emit::MLIR) {
    std::string error;
    auto out = openOutputFile(outputFile, &error);
    if (!out)
      return fail(error);
    for (auto [r, program] : llvm::enumerate(programs)) {
      if (pipelined)
        out->os() << "// pp rank " << r << "\n";
      program->print(out->os());
    }
    out->keep();
    return 0;
  }
  if (pipelined && emit != Emit::Exe)
    return fail("--emit=llvm and --emit=obj write one program, and a "
                "pipeline has one per pp rank: use --emit=mlir or build the "
                "executable");
  llvm::LLVMContext llvmContext;
  // Lowers one program to an object file and writes its weights.
  auto compileProgram = [&](ModuleOp program, int64_t pipelineRank,
                            const std::string &objectPath,
                            const std::string &weightsPath) -> int {
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
      return 1;
    std::vector<weft::EntryBuffer> buffers = std::move(*described);
    std::string manifest = weft::buildManifest(main, buffers, meshOrNull);
    std::vector<std::string> collectives =
        mesh ? describeCollectives(program, *mesh) : std::vector<std::string>{};
    // The C `main` of the executable is the runtime's.
    constexpr llvm::StringLiteral entryName = "weft_model_main";
    if (failed(SymbolTable::replaceAllSymbolUses(
            main, StringAttr::get(&context, entryName), program)))
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
    if (failed(lowering.run(program)))
      return 1;
    if (report) {
      if (pipelineRank >= 0)
        llvm::outs() << "pp rank " << pipelineRank << ":\n";
      // Every rank runs the same program on same-shaped shards, so one set of
      // figures holds for each rank.
      uint64_t inputBytes = 0, outputBytes = 0, paramBytes = 0, wholeBytes = 0,
               splitBytes = 0, splitWholeBytes = 0, stateBytes = 0;
      std::vector<const weft::EntryBuffer *> replicated;
      for (const weft::EntryBuffer &b : buffers) {
        uint64_t bytes = b.localBytes();
        if (b.role == weft::EntryBuffer::Role::Input)
          inputBytes += bytes;
        else if (b.role == weft::EntryBuffer::Role::Output)
          outputBytes += bytes;
        else if (b.role == weft::EntryBuffer::Role::State)
          stateBytes += bytes;
        if (b.role != weft::EntryBuffer::Role::Param)
          continue;
        uint64_t whole = std::max(1u, b.type.getElementTypeBitWidth() / 8);
        for (int64_t d : b.globalShape)
          whole *= d;
        paramBytes += bytes;
        wholeBytes += whole;
        if (b.numShards > 1) {
          splitBytes += bytes;
          splitWholeBytes += whole;
        } else {
          replicated.push_back(&b);
        }
      }
      if (mesh) {
        int64_t ranks = 1;
        for (int64_t size : mesh->sizes)
          ranks *= size;
        llvm::outs() << "mesh: ";
        for (auto [i, name] : llvm::enumerate(mesh->names))
          llvm::outs() << (i ? "," : "") << name << "=" << mesh->sizes[i];
        llvm::outs() << " (" << ranks
                     << " ranks; every figure below is per rank)\n";
      }
      llvm::outs() << "parameters: " << paramBytes
                   << " bytes (whole model: " << wholeBytes << " bytes)\n";
      if (mesh) {
        llvm::outs() << "  split: " << splitBytes << " bytes of "
                     << splitWholeBytes
                     << "\n  replicated: " << paramBytes - splitBytes
                     << " bytes in " << replicated.size() << " tensors:";
        for (const weft::EntryBuffer *b : replicated) {
          llvm::outs() << " " << b->name << "[";
          llvm::interleave(b->globalShape, llvm::outs(), "x");
          llvm::outs() << "]";
        }
        llvm::outs() << "\n";
      }
      if (stateBytes)
        llvm::outs() << "optimizer state: " << stateBytes << " bytes\n";
      llvm::outs() << "weights file: " << weightsBytes - 64
                   << " bytes (with 64-byte alignment)\ninputs: " << inputBytes
                   << " bytes\noutputs: " << outputBytes << " bytes\n";
      if (auto plan = (program)->getAttrOfType<DictionaryAttr>(
              weft::WeftDialect::kMemoryPlanAttrName)) {
        auto get = [&](StringRef key) {
          auto value = plan.getAs<IntegerAttr>(key);
          return value ? value.getInt() : 0;
        };
        llvm::outs() << "temporaries: peak " << get("peak_bytes")
                     << " bytes in one arena (" << get("buffers")
                     << " buffers, " << get("unplanned_bytes")
                     << " bytes without reuse)\n";
        llvm::outs() << "activations (inputs, outputs, temporaries): "
                     << inputBytes + outputBytes + get("peak_bytes")
                     << " bytes\n";
      }
      if (pipelineRank >= 0)
        llvm::outs() << "pipeline: at most " << inFlight[pipelineRank]
                     << " micro-batches in flight on this rank ("
                     << pipelineSchedule << ", " << microbatches
                     << " micro-batches)\n";
      if (mesh) {
        llvm::outs() << "collectives: " << collectives.size() << " per call\n";
        for (const std::string &line : collectives)
          llvm::outs() << "  " << line << "\n";
      }
    }

    llvm::LLVMContext llvmContext;
    std::string error;
    std::unique_ptr<llvm::Module> llvmModule =
        weft::translateToLLVMIR(program, llvmContext, entryName, buffers,
                                manifest, optLevel, error, symbolSuffix);
    if (!llvmModule)
      return fail(error);
    if (emit == Emit::LLVM) {
      auto out = openOutputFile(outputFile, &error);
      if (!out)
        return fail(error);
      llvmModule->print(out->os(), nullptr);
      out->keep();
      outputs.keep = true;
      return 0;
    }

    outputs.paths.push_back(objectPath);
    outputs.paths.push_back(weightsPath);
    if (!weft::emitObjectFile(*llvmModule, objectPath, optLevel, error))
      return fail(error);
    if (failed(writeWeights(program, buffers, meshOrNull, weightsBytes,
                            manifest, weightsPath)))
      return 1;
    return 0;
  };

  std::vector<std::string> objects;
  for (auto [r, program] : llvm::enumerate(programs)) {
    std::string stem = pipelined ? outputFile + ".pp" + std::to_string(r)
                                 : outputFile.getValue();
    std::string objectPath =
        emit == Emit::Obj ? outputFile.getValue() : stem + ".o";
    if (int status = compileProgram(*program, pipelined ? int64_t(r) : -1,
                                    objectPath, stem + ".weights"))
      return status;
    if (outputs.keep)
      return 0;
    objects.push_back(objectPath);
  }
  if (emit == Emit::Obj) {
    outputs.keep = true;
    return 0;
  }
  if (pipelined) {
    std::string error;
    std::unique_ptr<llvm::Module> table = weft::pipelineTable(
        llvmContext, int64_t(programs.size()), optLevel, error);
    std::string tablePath = outputFile + ".pipeline.o";
    outputs.paths.push_back(tablePath);
    if (!table || !weft::emitObjectFile(*table, tablePath, optLevel, error))
      return fail(error);
    objects.push_back(tablePath);
  }
  outputs.paths.push_back(outputFile);
  auto linker = llvm::sys::findProgramByName("c++");
  if (!linker)
    return fail("no C++ compiler driver 'c++' on PATH to link with");
  std::string runtimeMain = runtimeLibrary(argv[0], "libweft_runtime_main.a");
  std::string runtime = runtimeLibrary(argv[0], "libweft_runtime.a");
  std::string runtimeMpi = runtimeLibrary(argv[0], "libweft_runtime_mpi.a");
  for (const std::string &lib : {runtimeMain, runtime, runtimeMpi})
    if (!llvm::sys::fs::exists(lib))
      return fail("runtime library '" + lib + "' is missing");
  std::vector<llvm::StringRef> args{*linker};
  args.insert(args.end(), objects.begin(), objects.end());
  // A partitioned model runs its ranks over MPI: the MPI world replaces
  // the runtime's weak one-rank definitions, so it is linked whole.
  llvm::SmallVector<llvm::StringRef> mpiLibraries;
  if (partitioned) {
    args.insert(args.end(),
                {"-Wl,--whole-archive", runtimeMpi, "-Wl,--no-whole-archive"});
    llvm::StringRef(WEFT_MPI_LIBRARIES).split(mpiLibraries, ';', -1, false);
  }
  args.insert(args.end(), {runtimeMain, runtime});
  args.insert(args.end(), mpiLibraries.begin(), mpiLibraries.end());
  // libomp comes from Debian's LLVM 22 (libomp-22-dev).
  args.insert(args.end(), {"-lopenblas", "-L" WEFT_LIBOMP_DIR,
                           "-Wl,-rpath," WEFT_LIBOMP_DIR, "-lomp", "-lm", "-o",
                           outputFile});
  std::string linkError;
  if (llvm::sys::ExecuteAndWait(*linker, args, std::nullopt, {}, 0, 0,
                                &linkError) != 0)
    return fail("linking failed" +
                (linkError.empty() ? std::string() : ": " + linkError));
  for (const std::string &object : objects)
    llvm::sys::fs::remove(object);
  outputs.keep = true;
  return 0;
}

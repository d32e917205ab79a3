//===- weftc.cpp - The Weft compiler driver -------------------------------===//
//
//   weftc model.onnx --dim batch=1 --dim seq=16 -o model
//
// produces the executable `model` and its weights file `model.weights`.
// `--emit=mlir|llvm|obj` stops at the weft IR, the LLVM IR or the object.
// Errors are one line, `weftc: error: ...`, exit code 1, and leave no
// output files behind. The compiler is weft::compile; this is its command
// line.
//
//===----------------------------------------------------------------------===//

#include "weft/Compiler/Compiler.h"
#include "weft/Compiler/HtmlReport.h"
#include "weft/Compiler/KernelReport.h"
#include "weft/InitAllPasses.h"
#include "weft/Support/CrashGuard.h"

#include "mlir/IR/AsmState.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using weft::EmitKind;
using weft::ProgramKind;
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
static cl::opt<EmitKind> emit(
    "emit", cl::desc("Stop at this stage"), cl::init(EmitKind::Executable),
    cl::values(
        clEnumValN(EmitKind::MLIR, "mlir", "weft IR after the weft passes"),
        clEnumValN(EmitKind::LLVM, "llvm", "LLVM IR"),
        clEnumValN(EmitKind::Object, "obj", "object file (+ weights file)"),
        clEnumValN(EmitKind::Executable, "exe", "executable (+ weights file)")),
    cl::cat(category));
static cl::opt<std::string>
    target("target",
           cl::desc("The backend: cpu (default); cuda (one-rank programs "
                    "so far); cuda-emulation (a test tool: the cuda "
                    "target's kernels run on the CPU, accesses checked)"),
           cl::init("cpu"), cl::cat(category));
static cl::opt<unsigned> optLevel("O", cl::desc("Optimization level 0-3"),
                                  cl::Prefix, cl::init(2), cl::cat(category));
static cl::opt<std::string> report(
    "report",
    cl::desc("--report (or =text) prints each program's memory and "
             "collectives; --report=html writes them, the sharding of every "
             "parameter, the pipeline schedule and the planner's choices as "
             "one HTML page (--report-file); --report=kernels (the cuda "
             "targets) prices every kernel launch and library call on "
             "--gpu, and writes them as JSON to --report-file if given"),
    cl::ValueOptional, cl::value_desc("text|html|kernels"), cl::cat(category));
static cl::opt<std::string>
    reportFile("report-file",
               cl::desc("Where --report=html goes (default <output>.html), "
                        "or --report=kernels's JSON"),
               cl::value_desc("file"), cl::cat(category));
static cl::opt<std::string>
    gpu("gpu",
        cl::desc("The GPU --report=kernels and --report=html price the "
                 "kernels on: a100, h100 or h200 (the planner's presets)"),
        cl::init("h200"), cl::cat(category));
static cl::opt<std::string> reportTrace(
    "report-trace",
    cl::desc("A Chrome trace of a run (weft-run --trace) for the HTML report "
             "to link and summarise"),
    cl::value_desc("file"), cl::cat(category));
static cl::opt<bool>
    timeStages("time-stages",
               cl::desc("Print each compilation stage's wall time on stderr"),
               cl::cat(category));
static cl::opt<bool> profileLaunches(
    "profile-launches",
    cl::desc("--target=cuda: the executable can time each launch of the "
             "kernel report on the GPU ($WEFT_PROFILE_LAUNCHES=file; each "
             "launch then waits for the GPU)"),
    cl::cat(category));
static cl::opt<bool>
    timeLoweringPasses("time-lowering-passes",
                       cl::desc("Print the lowering's time per pass on stderr"),
                       cl::cat(category));
static cl::opt<std::string>
    mesh("mesh", cl::desc("Partition for a device mesh: --mesh dp=2,tp=2"),
         cl::value_desc("axis=size,..."), cl::cat(category));
static cl::list<std::string>
    parallel("parallel", cl::desc("Parallel strategies: dp, megatron, cp, ep"),
             cl::CommaSeparated, cl::value_desc("strategy,..."),
             cl::cat(category));
static cl::opt<bool>
    sequenceParallel("sequence-parallel",
                     cl::desc("Split norm regions on the sequence dim (tp)"),
                     cl::cat(category));
static cl::opt<std::string> cpAttention(
    "cp-attention",
    cl::desc("How attention runs over the cp axis: ring (key/value chunks "
             "passed around it, each rank holding a head and a tail chunk of "
             "the sequence; the default), ring-contiguous (one chunk per "
             "rank) or all-to-all (Ulysses)"),
    cl::init("ring"), cl::cat(category));
static cl::opt<bool>
    padUneven("pad-uneven",
              cl::desc("Pad a dim that does not divide by its mesh axis"),
              cl::cat(category));
static cl::opt<ProgramKind> program(
    "program", cl::desc("What the executable computes"),
    cl::init(ProgramKind::Forward),
    cl::values(
        clEnumValN(ProgramKind::Forward, "forward", "the model (default)"),
        clEnumValN(ProgramKind::Train, "train",
                   "a training step: loss, gradients, optimizer update"),
        clEnumValN(ProgramKind::Gradients, "gradients",
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
static cl::list<std::string>
    freeze("freeze",
           cl::desc("Parameters that do not train: glob patterns on their "
                    "names (--freeze 'wte*,*.bias')"),
           cl::CommaSeparated, cl::value_desc("pattern,..."),
           cl::cat(category));
static cl::list<std::string>
    trainOnly("train-only",
              cl::desc("Train only the parameters these glob patterns name"),
              cl::CommaSeparated, cl::value_desc("pattern,..."),
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
static cl::opt<bool> allowTf32(
    "allow-tf32",
    cl::desc("A GPU target may multiply f32 GEMMs as TF32 on tensor cores "
             "(10 mantissa bits, f32 accumulation)"),
    cl::init(false), cl::cat(category));
static cl::opt<std::string> recompute(
    "recompute",
    cl::desc("Recompute activations in the backward pass: none, selective "
             "(elementwise work) or full (whole layers)"),
    cl::init("none"), cl::cat(category));
static cl::opt<double> bucketMb(
    "bucket-mb",
    cl::desc("Combine collectives into buckets of this many MiB (0: off)"),
    cl::init(25.0), cl::cat(category));
static cl::opt<std::string> gradSync(
    "grad-sync",
    cl::desc("How data-parallel gradients are all-reduced: library (MPI's "
             "choice), ring, tree, ps (parameter servers) or hierarchical"),
    cl::init("library"), cl::cat(category));
static cl::opt<std::string> dpSync(
    "dp-sync",
    cl::desc("every=K: data-parallel replicas step alone and average their "
             "parameters every K steps (local SGD; every=1: every step's "
             "gradients are summed)"),
    cl::init("every=1"), cl::cat(category));
static cl::opt<int64_t>
    microbatches("microbatches",
                 cl::desc("Pipeline micro-batches per step (mesh axis pp)"),
                 cl::init(1), cl::cat(category));
static cl::opt<std::string>
    schedule("schedule",
             cl::desc("Pipeline schedule: gpipe, 1f1b, interleaved or zb-h1"),
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
static cl::opt<std::string> plan(
    "plan",
    cl::desc("Choose the parallel plan of a training step: 'auto' searches "
             "every plan for --cluster, 'dp=2,pp=2,...' pins some choices "
             "and searches the rest (see weft-plan)"),
    cl::value_desc("auto|key=value,..."), cl::cat(category));
static cl::opt<std::string>
    cluster("cluster",
            cl::desc("The cluster --plan plans for: a preset (cpu-local, "
                     "dgx-a100-80g, ...) or a JSON/YAML file (default "
                     "cpu-local)"),
            cl::init("cpu-local"), cl::cat(category));
static cl::opt<int64_t>
    nodes("nodes", cl::desc("Nodes of a preset --cluster (default 1)"),
          cl::init(1), cl::cat(category));
static cl::opt<std::string> testLoweringPasses(
    "test-lowering-passes",
    cl::desc("Passes appended to the lowering (for tests, e.g. "
             "weft-test-crash)"),
    cl::Hidden, cl::cat(category));
static cl::opt<bool> printPipeline("print-pipeline",
                                   cl::desc("Print the pass pipelines"),
                                   cl::cat(category));

/// The runtime libraries installed beside this tool: <bin>/../lib.
static std::string runtimeDirectory(const char *argv0) {
  std::string exe = llvm::sys::fs::getMainExecutable(
      argv0, reinterpret_cast<void *>(&runtimeDirectory));
  llvm::SmallString<256> path(
      llvm::sys::path::parent_path(llvm::sys::path::parent_path(exe)));
  llvm::sys::path::append(path, "lib");
  return path.str().str();
}

/// --report=kernels: each program's kernels priced on `gpu`, as text on
/// stdout and, with --report-file, as JSON (one program's object, or an
/// array of a pipeline's).
static bool writeKernelReport(const weft::CompileResult &result,
                              const weft::planner::Gpu &gpu) {
  llvm::json::Array programs;
  for (const weft::ProgramReport &program : result.programs) {
    if (program.launches.empty()) {
      llvm::errs() << "weftc: error: --report=kernels: the program was not "
                      "lowered to kernels (--emit=obj or exe)\n";
      return false;
    }
    weft::KernelPrediction prediction = weft::predictKernels(program, gpu);
    weft::printKernelReport(program, prediction, llvm::outs());
    programs.push_back(weft::kernelReportJSON(program, prediction, gpu));
  }
  if (reportFile.empty())
    return true;
  std::error_code error;
  llvm::raw_fd_ostream out(reportFile, error);
  if (error) {
    llvm::errs() << "weftc: error: cannot write the report '" << reportFile
                 << "': " << error.message() << "\n";
    return false;
  }
  out << llvm::formatv("{0:2}\n", programs.size() == 1
                                      ? std::move(programs[0])
                                      : llvm::json::Value(std::move(programs)));
  return true;
}

int main(int argc, char **argv) {
  weft::installCrashGuard("weftc");
  llvm::InitLLVM init(argc, argv);
  weft::registerTestPasses();
  // --emit=mlir prints as weft-opt does (--mlir-print-debuginfo: with the
  // ONNX nodes' locations).
  mlir::registerAsmPrinterCLOptions();
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "Weft compiler\n");

  auto fail = [](const llvm::Twine &message) {
    llvm::errs() << "weftc: error: " << message << "\n";
    return 1;
  };
  bool textReport =
      report.getNumOccurrences() && (report.empty() || report == "text");
  bool htmlReport = report == "html";
  bool kernelReport = report == "kernels";
  if (report.getNumOccurrences() && !textReport && !htmlReport && !kernelReport)
    return fail("--report must be text, html or kernels, not '" + report + "'");
  if (!htmlReport && !reportTrace.empty())
    return fail("--report-trace goes with --report=html");
  if (!htmlReport && !kernelReport && !reportFile.empty())
    return fail("--report-file goes with --report=html or --report=kernels");
  std::optional<weft::planner::Gpu> reportGpu = weft::gpuByName(gpu);
  if (!reportGpu)
    return fail("--gpu must be a100, h100 or h200, not '" + gpu + "'");
  if (kernelReport && !llvm::StringRef(target).starts_with("cuda"))
    return fail("--report=kernels reports the kernels of --target=cuda or "
                "cuda-emulation, not '" +
                target + "'");
  std::optional<weft::TraceSummary> trace;
  if (!reportTrace.empty()) {
    std::string error;
    trace = weft::summarizeTrace(reportTrace, error);
    if (!trace)
      return fail("--report-trace: " + error);
  }

  weft::CompileOptions options;
  options.model = inputFile;
  options.dims = dims;
  options.program = trainFlag ? ProgramKind::Train : program.getValue();
  options.optimizer = optimizer;
  options.tokenInput = tokenInput;
  options.weightDecay = weightDecay;
  options.clipNorm = clipNorm;
  options.freeze = freeze;
  options.trainOnly = trainOnly;
  options.precision = precision;
  options.allowTf32 = allowTf32;
  options.recompute = recompute;
  options.gradAccum = gradAccum;
  options.zero = zeroStage;
  options.mesh = mesh;
  options.parallel = parallel;
  options.sequenceParallel = sequenceParallel;
  options.cpAttention = cpAttention;
  options.padUneven = padUneven;
  options.bucketMb = bucketMb;
  options.gradSync = gradSync;
  llvm::StringRef every = dpSync;
  if (!every.consume_front("every=") ||
      every.getAsInteger(10, options.dpSyncEvery)) {
    llvm::errs() << "weftc: error: --dp-sync takes every=K, not '" << dpSync
                 << "'\n";
    return 1;
  }
  options.microbatches = microbatches;
  options.schedule = schedule;
  options.virtualStages = virtualStages;
  options.stageBoundaries = stageBoundaries;
  options.plan = plan;
  options.cluster = cluster;
  options.nodes = nodes;
  options.target = target;
  options.optLevel = optLevel;
  options.emit = printPipeline   ? EmitKind::Passes
                 : printSchedule ? EmitKind::Schedule
                                 : emit.getValue();
  options.output = outputFile;
  options.runtimeDirectory = runtimeDirectory(argv[0]);
  options.timeLoweringPasses = timeLoweringPasses;
  options.profileLaunches = profileLaunches;
  options.testLoweringPasses = testLoweringPasses;

  std::optional<weft::CompileResult> result = weft::compile(
      options, [](mlir::DiagnosticSeverity severity, const std::string &text) {
        llvm::errs() << "weftc: "
                     << (severity == mlir::DiagnosticSeverity::Error ? "error: "
                         : severity == mlir::DiagnosticSeverity::Warning
                             ? "warning: "
                             : "")
                     << text << "\n";
      });
  if (!result)
    return 1;
  llvm::outs() << result->text;
  if (textReport)
    weft::printReport(*result, llvm::outs());
  if (htmlReport) {
    std::string path =
        reportFile.empty() ? result->options.output + ".html" : reportFile;
    std::error_code error;
    llvm::raw_fd_ostream out(path, error);
    if (error)
      return fail("cannot write the report '" + path + "': " + error.message());
    out << weft::renderHtmlReport(*result, trace ? &*trace : nullptr,
                                  &*reportGpu);
  }
  if (kernelReport && !writeKernelReport(*result, *reportGpu))
    return 1;
  if (timeStages)
    for (const weft::StageTime &time : result->stageTimes)
      llvm::errs() << llvm::format("weftc: time: %-32s %8.2f s\n",
                                   time.stage.c_str(), time.seconds);
  return 0;
}

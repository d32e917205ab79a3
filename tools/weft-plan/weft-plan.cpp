//===- weft-plan.cpp - Choose a parallel training plan --------------------===//
//
// weft-plan (model.onnx | model.mlir | --synthetic gpt:...) --cluster C
//     [--nodes N] --global-batch B [--fix dp=..,tp=..] [--top K] [--json]
//     [--explain]
// weft-plan --cluster C --collective-times BYTES,...
//
// Profiles the model's training step from its IR for each tensor-parallel
// degree, prices every plan of the 3D + ZeRO space on the cluster, and
// prints the fastest that fit in memory. With --collective-times it prints
// instead what the cost model predicts for an all-reduce, an all-gather
// and a send-recv of each size over every rank of the cluster, the JSON
// lines `weft-calibrate --collectives` measures. Errors are one line each,
// exit 1.
//
//===----------------------------------------------------------------------===//

#include "weft/Compiler/FrontEnd.h"
#include "weft/Planner/Report.h"
#include "weft/Support/CrashGuard.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>

using namespace weft::planner;
namespace cl = llvm::cl;

static cl::OptionCategory category("weft-plan options");
static cl::opt<std::string> inputFile(cl::Positional,
                                      cl::desc("<model.onnx|model.mlir>"),
                                      cl::cat(category));
static cl::opt<std::string> synthetic(
    "synthetic",
    cl::desc("Plan for a model given by its shape (see weft-translate "
             "--synthetic)"),
    cl::value_desc("family:key=value,..."), cl::cat(category));
static cl::list<std::string>
    dims("dim", cl::desc("Bind a symbolic dimension of an ONNX model"),
         cl::value_desc("name=value"), cl::cat(category));
static cl::opt<std::string>
    clusterName("cluster",
                cl::desc("A preset (dgx-a100-80g, dgx-h100, h200, "
                         "cpu-local) or a JSON/YAML cluster file"),
                cl::value_desc("name|file"), cl::cat(category));
static cl::opt<int64_t> nodes("nodes",
                              cl::desc("Nodes of a preset cluster (default 1)"),
                              cl::init(1), cl::cat(category));
static cl::opt<int64_t>
    globalBatch("global-batch",
                cl::desc("Sequences per step (default: the model's batch)"),
                cl::init(0), cl::cat(category));
static cl::opt<std::string>
    precision("precision",
              cl::desc("mixed (bf16 with f32 master weights; default) or "
                       "f32"),
              cl::init("mixed"), cl::cat(category));
static cl::opt<std::string>
    fix("fix",
        cl::desc("Pin choices instead of searching them: "
                 "dp=8,tp=8,pp=16,mbs=1,m=12,schedule=1f1b,v=1,zero=1,"
                 "recompute=full,sp=0,cp=2,cp_attention=ring,ep=1"),
        cl::value_desc("key=value,..."), cl::cat(category));
static cl::opt<unsigned> top("top",
                             cl::desc("Plans to print (default 5; 0: all)"),
                             cl::init(5), cl::cat(category));
static cl::opt<bool> json("json", cl::desc("Print the predictions as JSON"),
                          cl::cat(category));
static cl::list<uint64_t> collectiveTimes(
    "collective-times",
    cl::desc("Print the predicted times of collectives of these sizes over "
             "every rank of the cluster instead of planning"),
    cl::value_desc("bytes,..."), cl::CommaSeparated, cl::cat(category));
static cl::opt<bool>
    explainFlag("explain",
                cl::desc("Say why the best plan of every other choice lost"),
                cl::cat(category));

/// The --collective-times mode.
template <typename Fail> static int printCollectiveTimes(Fail fail) {
  if (clusterName.empty())
    return fail("--cluster is required (a preset or a cluster file)");
  std::string error;
  std::optional<Cluster> cluster = Cluster::load(clusterName, nodes, error);
  if (!cluster)
    return fail(error);
  std::pair<const char *, Collective> kinds[] = {
      {"all-reduce", Collective::AllReduce},
      {"all-gather", Collective::AllGather},
      {"send-recv", Collective::SendRecv}};
  for (uint64_t bytes : collectiveTimes) {
    if (bytes == 0)
      return fail("--collective-times: sizes are bytes, from 1");
    for (auto [name, kind] : kinds)
      llvm::outs() << llvm::formatv(
          "{{\"collective\": \"{0}\", \"bytes\": {1}, \"ranks\": {2}, "
          "\"seconds\": {3:e}}\n",
          name, bytes, cluster->gpus(),
          groupCollectiveTime(*cluster, kind, double(bytes),
                              cluster->gpusPerNode, cluster->nodes));
  }
  return 0;
}

int main(int argc, char **argv) {
  weft::installCrashGuard("weft-plan");
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "Weft parallel training planner\n");
  auto fail = [](const llvm::Twine &message) {
    llvm::errs() << "weft-plan: error: " << message << "\n";
    return 1;
  };
  auto started = std::chrono::steady_clock::now();
  if (!collectiveTimes.empty())
    return printCollectiveTimes(fail);
  if (inputFile.empty() == synthetic.empty())
    return fail("give a model file or --synthetic, not both or neither");
  if (clusterName.empty())
    return fail("--cluster is required (a preset or a cluster file)");
  if (precision != "mixed" && precision != "f32")
    return fail("--precision must be mixed or f32, not '" +
                std::string(precision) + "'");
  weft::PlanOptions options;
  options.model = inputFile;
  options.dims = dims;
  options.synthetic = synthetic;
  options.cluster = clusterName;
  options.nodes = nodes;
  options.globalBatch = globalBatch;
  options.mixedPrecision = precision == "mixed";
  std::string error;
  std::optional<PlanConstraints> constraints =
      PlanConstraints::parse(fix, error);
  if (!constraints)
    return fail("--fix: " + error);
  options.constraints = *constraints;
  std::optional<weft::PlanResult> planned = weft::planTraining(options, error);
  if (!planned)
    return fail(error);
  const ModelProfile &model = planned->model;
  const Cluster &cluster = planned->cluster;
  const SearchResult &result = planned->search;
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
          .count();
  if (json) {
    printJSON(model, cluster, planned->setup, result, top, llvm::outs());
  } else {
    printSummary(model, cluster, planned->setup, llvm::outs());
    for (const std::string &why : model.rejectedDegrees)
      llvm::outs() << "not profiled: " << why << "\n";
    llvm::outs() << llvm::formatv("planned in {0:F2} s: ", seconds);
    printPlans(result, cluster, top, llvm::outs());
    if (explainFlag && !result.fitting.empty()) {
      llvm::outs() << "why not:\n";
      for (const std::string &line : explain(result, cluster))
        llvm::outs() << "  " << line << "\n";
    }
  }
  if (result.fitting.empty())
    return fail(noPlanMessage(result, cluster));
  return 0;
}

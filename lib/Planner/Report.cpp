//===- Report.cpp - Print the planner's predictions -----------------------===//

#include "weft/Planner/Report.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <cstdio>

namespace weft::planner {

using llvm::formatv;

static double gib(double bytes) { return bytes / double(1ull << 30); }

/// Three significant digits: 0.0113, 163, 2.5e+04.
static std::string sig(double value) {
  char text[32];
  snprintf(text, sizeof(text), "%.3g", value);
  return text;
}

static std::string count(double n) {
  return n >= 1e9 ? sig(n / 1e9) + "B" : sig(n / 1e6) + "M";
}

void printSummary(const ModelProfile &model, const Cluster &cluster,
                  const TrainingSetup &setup, llvm::raw_ostream &os) {
  os << formatv("model: {0} parameters, {1} layers, hidden {2}, {3} heads, "
                "vocab {4}, seq {5}; global batch {6}, {7}\n",
                count(model.parameters), model.layers, model.hidden,
                model.heads, model.vocab, model.seq, setup.globalBatch,
                setup.mixedPrecision ? "mixed precision (bf16)" : "f32");
  double peak =
      setup.mixedPrecision ? cluster.gpu.peakBf16 : cluster.gpu.peakFp32;
  os << formatv("cluster: {0}: {1} node(s) x {2} {3} ({4} GiB, {5} TFLOP/s), "
                "{6} between nodes\n",
                cluster.name, cluster.nodes, cluster.gpusPerNode,
                cluster.gpu.model, sig(gib(cluster.gpu.memoryBytes)),
                sig(peak / 1e12), cluster.interFabric);
}

void printPlans(const SearchResult &result, const Cluster &cluster, size_t top,
                llvm::raw_ostream &os) {
  size_t shown =
      top == 0 ? result.fitting.size() : std::min(top, result.fitting.size());
  os << formatv("{0} plans priced, {1} fit in memory\n", result.evaluated,
                result.fitting.size());
  os << "  #   step (s)    tokens/s  TFLOP/s/GPU   MFU  GiB/GPU  plan\n";
  for (size_t i = 0; i < shown; ++i) {
    const Prediction &p = result.fitting[i];
    os << formatv("{0,3} {1,10} {2,11:F0} {3,12} {4,5:F1} {5,8}  {6}\n", i + 1,
                  sig(p.stepTime()), p.tokensPerSecond,
                  sig(p.modelTflopsPerGpu), 100 * p.mfu,
                  sig(gib(p.memory.total())), p.plan.str());
  }
  if (result.fitting.empty())
    return;
  const Prediction &best = result.fitting.front();
  os << "best plan, placement: " << placement(best.plan, cluster) << "\n";
  const MemoryBreakdown &m = best.memory;
  const TimeBreakdown &t = best.time;
  os << formatv("best plan, memory per GPU: weights {0} GiB, gradients {1} "
                "GiB, optimizer {2} GiB, activations {3} GiB (usable {4} "
                "GiB)\n",
                sig(gib(m.weights)), sig(gib(m.gradients)),
                sig(gib(m.optimizer)), sig(gib(m.activations)),
                sig(gib(best.memoryCapacity)));
  os << formatv("best plan, step time: compute {0} s, bubble {1} s, tp "
                "collectives {2} s, pipeline sends {3} s, gradient reduction "
                "{4} s, ZeRO-3 gathers {5} s, optimizer {6} s{7}{8}{9}\n",
                sig(t.compute), sig(t.bubble), sig(t.tensorParallel),
                sig(t.pipelineSends), sig(t.dataParallel), sig(t.zeroGathers),
                sig(t.optimizer),
                t.contextParallel > 0 ? ", context-parallel messages " +
                                            sig(t.contextParallel) + " s"
                                      : std::string(),
                t.expertParallel > 0
                    ? ", expert all-to-alls " + sig(t.expertParallel) + " s"
                    : std::string(),
                t.coreSharing > 0
                    ? ", ranks sharing cores " + sig(t.coreSharing) + " s"
                    : std::string());
}

static llvm::json::Object toJSON(const Prediction &p) {
  const Plan &plan = p.plan;
  llvm::json::Object memory{
      {"weights", p.memory.weights},     {"gradients", p.memory.gradients},
      {"optimizer", p.memory.optimizer}, {"activations", p.memory.activations},
      {"total", p.memory.total()},       {"capacity", p.memoryCapacity}};
  llvm::json::Object time{{"compute", p.time.compute},
                          {"bubble", p.time.bubble},
                          {"tensor_parallel", p.time.tensorParallel},
                          {"pipeline_sends", p.time.pipelineSends},
                          {"data_parallel", p.time.dataParallel},
                          {"zero_gathers", p.time.zeroGathers},
                          {"context_parallel", p.time.contextParallel},
                          {"expert_parallel", p.time.expertParallel},
                          {"core_sharing", p.time.coreSharing},
                          {"optimizer", p.time.optimizer}};
  llvm::json::Object syncs;
  for (auto &[sync, seconds] : p.gradSyncTimes)
    syncs[runtime::gradSyncName(sync)] = seconds;
  return llvm::json::Object{
      {"plan", plan.str()},
      {"grad_sync", runtime::gradSyncName(
                        plan.gradSync.value_or(runtime::GradSync::Library))},
      {"grad_sync_seconds", std::move(syncs)},
      {"dp", plan.dp},
      {"tp", plan.tp},
      {"pp", plan.pp},
      {"mbs", plan.microbatchSize},
      {"microbatches", plan.microbatches},
      {"schedule", pipeline::scheduleName(plan.schedule)},
      {"virtual_stages", plan.virtualStages},
      {"zero", plan.zero},
      {"recompute", plan.recompute == Recompute::None        ? "none"
                    : plan.recompute == Recompute::Selective ? "selective"
                                                             : "full"},
      {"sequence_parallel", plan.sequenceParallel},
      {"cp", plan.cp},
      {"cp_attention", contextAttentionName(plan.cpAttention)},
      {"ep", plan.ep},
      {"step_time", p.stepTime()},
      {"tokens_per_second", p.tokensPerSecond},
      {"model_tflops_per_gpu", p.modelTflopsPerGpu},
      {"hardware_tflops_per_gpu", p.hardwareTflopsPerGpu},
      {"mfu", p.mfu},
      {"fits", p.fits},
      {"memory_bytes", std::move(memory)},
      {"time_seconds", std::move(time)}};
}

void printJSON(const ModelProfile &model, const Cluster &cluster,
               const TrainingSetup &setup, const SearchResult &result,
               size_t top, llvm::raw_ostream &os) {
  llvm::json::Array plans;
  size_t shown =
      top == 0 ? result.fitting.size() : std::min(top, result.fitting.size());
  for (size_t i = 0; i < shown; ++i)
    plans.push_back(toJSON(result.fitting[i]));
  llvm::json::Array tooLarge;
  if (!result.tooLarge.empty())
    tooLarge.push_back(toJSON(result.tooLarge.front()));
  llvm::json::Object root{
      {"model", llvm::json::Object{{"parameters", model.parameters},
                                   {"layers", model.layers},
                                   {"hidden", model.hidden},
                                   {"heads", model.heads},
                                   {"vocab", model.vocab},
                                   {"seq", model.seq},
                                   {"forward_flops_per_sequence",
                                    model.forwardFlops / model.batch}}},
      {"cluster", llvm::json::Object{{"name", cluster.name},
                                     {"nodes", cluster.nodes},
                                     {"gpus_per_node", cluster.gpusPerNode},
                                     {"gpu", cluster.gpu.model}}},
      {"global_batch", setup.globalBatch},
      {"mixed_precision", setup.mixedPrecision},
      {"evaluated", result.evaluated},
      {"fitting", int64_t(result.fitting.size())},
      {"plans", std::move(plans)},
      {"smallest_too_large", std::move(tooLarge)}};
  os << formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
}

std::string noPlanMessage(const SearchResult &result, const Cluster &cluster) {
  if (!result.reasons.empty())
    return result.reasons.front();
  if (result.tooLarge.empty())
    return "no plan satisfies the constraints";
  const Prediction &smallest = result.tooLarge.front();
  return formatv("no plan fits in memory: the smallest ({0}) needs {1:F1} GiB "
                 "per GPU (weights {2:F1}, gradients {3:F1}, optimizer {4:F1}, "
                 "activations {5:F1}) and a {6} has {7:F1} GiB usable",
                 smallest.plan.str(), gib(smallest.memory.total()),
                 gib(smallest.memory.weights), gib(smallest.memory.gradients),
                 gib(smallest.memory.optimizer),
                 gib(smallest.memory.activations), cluster.gpu.model,
                 gib(smallest.memoryCapacity))
      .str();
}

} // namespace weft::planner

//===- CostModel.cpp - Time and memory of a parallel training step --------===//

#include "weft/Planner/CostModel.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/YAMLParser.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace weft::planner {

Link Cluster::interNode() const {
  Link link;
  link.latency = interLatency;
  double share =
      nicsPerNode * nicBandwidth / double(std::max<int64_t>(1, gpusPerNode));
  link.bandwidth = railOptimized || interFabric == "ddc"
                       ? share
                       : share / std::max(1.0, oversubscription);
  return link;
}

Link Cluster::interNodeAllToAll() const {
  Link link = interNode();
  if (interFabric != "ddc")
    link.bandwidth = nicsPerNode * nicBandwidth /
                     double(std::max<int64_t>(1, gpusPerNode)) /
                     std::max(1.0, oversubscription);
  return link;
}

std::optional<Cluster> Cluster::preset(const std::string &name, int64_t nodes) {
  // Vendor figures: dense tensor-core peaks, HBM size and bandwidth, NVLink
  // bandwidth per GPU and direction, one 200 or 400 Gb/s NIC per GPU.
  constexpr double tera = 1e12, giga = 1e9;
  Cluster cluster;
  cluster.name = name;
  cluster.nodes = nodes;
  cluster.gpusPerNode = 8;
  cluster.interFabric = "infiniband";
  cluster.nicsPerNode = 8;
  cluster.interLatency = 5e-6;
  cluster.intraNode.latency = 3e-6;
  cluster.railOptimized = true;
  if (name == "dgx-a100-80g") {
    cluster.gpu = {"A100-SXM4-80GB", 312 * tera, 312 * tera,
                   19.5 * tera,      80 * giga,  2039 * giga};
    cluster.gpu.multiprocessors = 108;
    cluster.gpu.peakTf32 = 156 * tera;
    cluster.intraNode.bandwidth = 300 * giga; // NVLink 3: 600 GB/s both ways
    cluster.nicBandwidth = 25 * giga;         // HDR 200 Gb/s
  } else if (name == "dgx-h100" || name == "h200") {
    bool h200 = name == "h200";
    cluster.fusedAttention = true;
    cluster.gpu = {h200 ? "H200-SXM" : "H100-SXM",
                   989 * tera,
                   989 * tera,
                   67 * tera,
                   (h200 ? 141 : 80) * giga,
                   (h200 ? 4800 : 3350) * giga};
    cluster.gpu.multiprocessors = 132;
    cluster.gpu.peakTf32 = 494.7 * tera;
    cluster.intraNode.bandwidth = 450 * giga; // NVLink 4: 900 GB/s both ways
    cluster.nicBandwidth = 50 * giga;         // NDR 400 Gb/s
  } else {
    return std::nullopt;
  }
  return cluster;
}

/// YAML scalars as JSON sees them: numbers, booleans, else strings.
static llvm::json::Value yamlToJSON(llvm::yaml::Node *node,
                                    std::string &error) {
  if (auto *map = llvm::dyn_cast_or_null<llvm::yaml::MappingNode>(node)) {
    llvm::json::Object object;
    for (llvm::yaml::KeyValueNode &entry : *map) {
      auto *key =
          llvm::dyn_cast_or_null<llvm::yaml::ScalarNode>(entry.getKey());
      if (!key) {
        error = "a YAML key must be a plain word";
        return nullptr;
      }
      llvm::SmallString<32> storage;
      object[key->getValue(storage).str()] =
          yamlToJSON(entry.getValue(), error);
    }
    return object;
  }
  if (auto *sequence = llvm::dyn_cast_or_null<llvm::yaml::SequenceNode>(node)) {
    llvm::json::Array array;
    for (llvm::yaml::Node &item : *sequence)
      array.push_back(yamlToJSON(&item, error));
    return array;
  }
  if (auto *scalar = llvm::dyn_cast_or_null<llvm::yaml::ScalarNode>(node)) {
    llvm::SmallString<32> storage;
    llvm::StringRef text = scalar->getValue(storage);
    double number;
    if (!text.getAsDouble(number))
      return number;
    if (text == "true" || text == "false")
      return text == "true";
    return text.str();
  }
  return nullptr;
}

std::optional<Cluster> Cluster::parseJSON(const std::string &text,
                                          std::string &error) {
  error.clear();
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  if (!parsed) {
    error = "not JSON: " + llvm::toString(parsed.takeError());
    return std::nullopt;
  }
  return fromDescription(*parsed, error);
}

std::optional<Cluster> Cluster::parseYAML(const std::string &text,
                                          std::string &error) {
  error.clear();
  llvm::SourceMgr sources;
  std::string diagnostics;
  sources.setDiagHandler(
      [](const llvm::SMDiagnostic &diag, void *context) {
        auto *out = static_cast<std::string *>(context);
        if (out->empty())
          *out = (llvm::Twine("line ") + llvm::Twine(diag.getLineNo()) + ": " +
                  diag.getMessage())
                     .str();
      },
      &diagnostics);
  llvm::yaml::Stream stream(text, sources);
  llvm::yaml::document_iterator document = stream.begin();
  llvm::json::Value value = nullptr;
  if (document != stream.end())
    value = yamlToJSON(document->getRoot(), error);
  if (stream.failed() || !diagnostics.empty()) {
    error = "not YAML: " + diagnostics;
    return std::nullopt;
  }
  if (!error.empty())
    return std::nullopt;
  return fromDescription(value, error);
}

std::string Cluster::cpuLocalPath() {
  if (const char *path = std::getenv("WEFT_CPU_LOCAL"))
    return path;
  llvm::SmallString<128> path;
  if (const char *cache = std::getenv("XDG_CACHE_HOME"))
    path = cache;
  else if (const char *home = std::getenv("HOME"))
    llvm::sys::path::append(path, home, ".cache");
  llvm::sys::path::append(path, "weft", "cpu-local.json");
  return std::string(path);
}

std::optional<Cluster> Cluster::load(const std::string &nameOrPath,
                                     int64_t nodes, std::string &error) {
  if (std::optional<Cluster> preset = Cluster::preset(nameOrPath, nodes))
    return preset;
  if (nameOrPath == "cpu-local") {
    std::string path = cpuLocalPath();
    if (!llvm::sys::fs::exists(path)) {
      error = "the cpu-local cluster is measured, and " + path +
              " does not exist yet: run `mpiexec -n <ranks> weft-calibrate` "
              "(with the rank count you will train with)";
      return std::nullopt;
    }
    return load(path, nodes, error);
  }
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(nameOrPath);
  if (!file) {
    error = "'" + nameOrPath +
            "' is neither a preset (dgx-a100-80g, dgx-h100, h200, cpu-local) "
            "nor a readable cluster file: " +
            file.getError().message();
    return std::nullopt;
  }
  std::string text = (*file)->getBuffer().str();
  llvm::StringRef path(nameOrPath);
  std::optional<Cluster> cluster =
      path.ends_with(".json") ? parseJSON(text, error) : parseYAML(text, error);
  if (!cluster)
    error = nameOrPath + ": " + error;
  return cluster;
}

std::optional<Cluster> Cluster::fromDescription(const llvm::json::Value &value,
                                                std::string &error) {
  const llvm::json::Object *root = value.getAsObject();
  if (!root) {
    error = "the cluster description must be an object (key: value pairs)";
    return std::nullopt;
  }
  Cluster cluster;
  auto number = [&](const llvm::json::Object &object, llvm::StringRef key,
                    llvm::StringRef where, double &into, bool required) {
    std::optional<double> value = object.getNumber(key);
    if (!value) {
      if (required && error.empty())
        error = ("missing number '" + where + key + "'").str();
      return;
    }
    if (*value < 0 && error.empty())
      error = ("'" + where + key + "' must not be negative").str();
    into = *value;
  };
  // A count: a whole number a machine could have (inf, NaN or 1e70 would
  // not survive the conversion).
  auto count = [&](double value, llvm::StringRef key) -> int64_t {
    if (!(value >= 0 && value <= double(1 << 30)) ||
        value != std::floor(value)) {
      if (error.empty())
        error = ("'" + key + "' must be a whole number up to 2^30").str();
      return 0;
    }
    return int64_t(value);
  };
  double nodes = 0, gpusPerNode = 0, nics = 0;
  number(*root, "nodes", "", nodes, true);
  number(*root, "gpus_per_node", "", gpusPerNode, true);
  if (std::optional<llvm::StringRef> name = root->getString("name"))
    cluster.name = name->str();
  const llvm::json::Object *gpu = root->getObject("gpu");
  const llvm::json::Object *intra = root->getObject("intra_node");
  const llvm::json::Object *inter = root->getObject("inter_node");
  if (!error.empty())
    return std::nullopt;
  if (!gpu || !intra || !inter) {
    error = std::string("missing object '") +
            (!gpu     ? "gpu"
             : !intra ? "intra_node"
                      : "inter_node") +
            "'";
    return std::nullopt;
  }
  constexpr double tera = 1e12, giga = 1e9;
  double tflops = 0, memoryGb = 0, bandwidthGb = 0;
  if (std::optional<llvm::StringRef> model = gpu->getString("model"))
    cluster.gpu.model = model->str();
  number(*gpu, "peak_bf16_tflops", "gpu.", tflops, true);
  cluster.gpu.peakBf16 = tflops * tera;
  cluster.gpu.peakFp16 = tflops * tera;
  number(*gpu, "peak_fp16_tflops", "gpu.", tflops, false);
  cluster.gpu.peakFp16 = tflops * tera;
  number(*gpu, "peak_fp32_tflops", "gpu.", tflops, true);
  cluster.gpu.peakFp32 = tflops * tera;
  // A GPU without TF32 tensor cores multiplies f32 at its f32 peak.
  number(*gpu, "peak_tf32_tflops", "gpu.", tflops, false);
  cluster.gpu.peakTf32 = tflops * tera;
  number(*gpu, "memory_gb", "gpu.", memoryGb, true);
  number(*gpu, "memory_bandwidth_gbps", "gpu.", bandwidthGb, true);
  cluster.gpu.memoryBytes = memoryGb * giga;
  cluster.gpu.memoryBandwidth = bandwidthGb * giga;
  double linkGb = 0, latencyUs = 0;
  number(*intra, "bandwidth_gbps", "intra_node.", linkGb, true);
  number(*intra, "latency_us", "intra_node.", latencyUs, false);
  cluster.intraNode = {linkGb * giga, latencyUs * 1e-6};
  if (std::optional<llvm::StringRef> fabric = inter->getString("fabric")) {
    cluster.interFabric = fabric->str();
    if (*fabric != "infiniband" && *fabric != "roce" && *fabric != "ddc" &&
        error.empty())
      error = "inter_node.fabric must be \"infiniband\", \"roce\" or "
              "\"ddc\", not \"" +
              fabric->str() + "\"";
  }
  number(*inter, "nics_per_node", "inter_node.", nics, true);
  number(*inter, "nic_bandwidth_gbps", "inter_node.", linkGb, true);
  latencyUs = 0;
  number(*inter, "latency_us", "inter_node.", latencyUs, false);
  number(*inter, "oversubscription", "inter_node.", cluster.oversubscription,
         false);
  cluster.railOptimized = inter->getBoolean("rail_optimized").value_or(false);
  cluster.overlapGradientReduction =
      root->getBoolean("overlap_gradient_reduction").value_or(true);
  cluster.fusedAttention = root->getBoolean("fused_attention").value_or(false);
  double cores = 0, threads = 1;
  number(*root, "cores_per_node", "", cores, false);
  number(*root, "threads_per_rank", "", threads, false);
  cluster.coresPerNode = count(cores, "cores_per_node");
  cluster.threadsPerRank =
      std::max<int64_t>(1, count(threads, "threads_per_rank"));
  double cacheMb = 0, cacheGb = 0, sendUs = 0;
  number(*gpu, "cache_mb", "gpu.", cacheMb, false);
  number(*gpu, "cache_bandwidth_gbps", "gpu.", cacheGb, false);
  cluster.gpu.cacheBytes = cacheMb * 1e6;
  cluster.gpu.cacheBandwidth = cacheGb * giga;
  number(*root, "send_latency_us", "", sendUs, false);
  cluster.sendLatency = sendUs * 1e-6;
  double contendedUs = 0;
  number(*root, "contended_latency_us", "", contendedUs, false);
  cluster.contendedLatency = contendedUs * 1e-6;
  double overheadUs = 0;
  number(*gpu, "op_overhead_us", "gpu.", overheadUs, false);
  cluster.gpu.opOverhead = overheadUs * 1e-6;
  if (const llvm::json::Object *efficiency = root->getObject("efficiency")) {
    number(*efficiency, "contraction", "efficiency.",
           cluster.efficiency.contraction, false);
    number(*efficiency, "memory", "efficiency.", cluster.efficiency.memory,
           false);
    number(*efficiency, "elementwise", "efficiency.",
           cluster.efficiency.elementwise, false);
    number(*efficiency, "update", "efficiency.", cluster.efficiency.update,
           false);
    number(*efficiency, "usable_memory", "efficiency.",
           cluster.efficiency.usableMemory, false);
  }
  cluster.nicBandwidth = linkGb * giga;
  cluster.interLatency = latencyUs * 1e-6;
  cluster.nodes = count(nodes, "nodes");
  cluster.gpusPerNode = count(gpusPerNode, "gpus_per_node");
  cluster.nicsPerNode = count(nics, "inter_node.nics_per_node");
  if (error.empty() && (cluster.nodes < 1 || cluster.gpusPerNode < 1))
    error = "nodes and gpus_per_node must be at least 1";
  const Efficiency &e = cluster.efficiency;
  if (error.empty() && (e.contraction <= 0 || e.memory <= 0 ||
                        e.elementwise <= 0 || e.update <= 0))
    error = "efficiency.contraction, .memory, .elementwise and .update must "
            "be positive";
  if (!error.empty())
    return std::nullopt;
  return cluster;
}

double collectiveTime(Collective kind, Algorithm algorithm, double bytes,
                      int64_t ranks, const Link &link) {
  if (ranks <= 1)
    return 0;
  double n = double(ranks), alpha = link.latency, perByte = 1 / link.bandwidth;
  switch (kind) {
  case Collective::AllReduce:
    if (algorithm == Algorithm::Tree)
      return 2 * std::ceil(std::log2(n)) * alpha + 2 * bytes * perByte;
    return 2 * (n - 1) * alpha + 2 * (n - 1) / n * bytes * perByte;
  case Collective::AllGather:
  case Collective::ReduceScatter:
  case Collective::AllToAll:
    return (n - 1) * alpha + (n - 1) / n * bytes * perByte;
  case Collective::SendRecv:
    return alpha + bytes * perByte;
  }
  return 0;
}

double hierarchicalAllReduceTime(double bytes, int64_t local, int64_t nodes,
                                 const Link &intra, const Link &inter) {
  return collectiveTime(Collective::ReduceScatter, Algorithm::Ring, bytes,
                        local, intra) +
         collectiveTime(Collective::AllReduce, Algorithm::Ring,
                        bytes / double(std::max<int64_t>(1, local)), nodes,
                        inter) +
         collectiveTime(Collective::AllGather, Algorithm::Ring, bytes, local,
                        intra);
}

double groupCollectiveTime(const Cluster &cluster, Collective kind,
                           double bytes, int64_t local, int64_t nodes) {
  if (kind == Collective::SendRecv) {
    Link link = nodes > 1 ? cluster.interNode() : cluster.intraNode;
    if (cluster.sendLatency > 0)
      link.latency = cluster.sendLatency;
    return local * nodes <= 1
               ? 0
               : collectiveTime(kind, Algorithm::Ring, bytes, 2, link);
  }
  if (nodes <= 1)
    return collectiveTime(kind, Algorithm::Ring, bytes, local,
                          cluster.intraNode);
  if (local <= 1)
    return collectiveTime(kind, Algorithm::Ring, bytes, nodes,
                          cluster.interNode());
  if (kind == Collective::AllReduce)
    return hierarchicalAllReduceTime(bytes, local, nodes, cluster.intraNode,
                                     cluster.interNode());
  return collectiveTime(kind, Algorithm::Ring, bytes, local,
                        cluster.intraNode) +
         collectiveTime(kind, Algorithm::Ring, bytes / double(local), nodes,
                        cluster.interNode());
}

double gradientSyncTime(const Cluster &cluster, runtime::GradSync sync,
                        double bytes, int64_t local, int64_t nodes) {
  int64_t ranks = local * nodes;
  if (ranks <= 1)
    return 0;
  const Link &slowest = nodes > 1 ? cluster.interNode() : cluster.intraNode;
  switch (sync) {
  case runtime::GradSync::Library:
    return groupCollectiveTime(cluster, Collective::AllReduce, bytes, local,
                               nodes);
  case runtime::GradSync::Ring:
    return collectiveTime(Collective::AllReduce, Algorithm::Ring, bytes, ranks,
                          slowest);
  case runtime::GradSync::Tree:
    return collectiveTime(Collective::AllReduce, Algorithm::Tree, bytes, ranks,
                          slowest);
  case runtime::GradSync::ParameterServer: {
    double n = double(ranks);
    double intra = (local - 1) / n * bytes / cluster.intraNode.bandwidth;
    double inter = 0, latency = cluster.intraNode.latency;
    if (nodes > 1) {
      Link allToAll = cluster.interNodeAllToAll();
      inter = (n - local) / n * bytes / allToAll.bandwidth;
      latency = allToAll.latency;
    }
    // Each rank sends and receives n-1 messages a phase.
    return 2 * ((n - 1) * latency + std::max(intra, inter));
  }
  case runtime::GradSync::Hierarchical:
    if (nodes > 1 && local > 1)
      return hierarchicalAllReduceTime(bytes, local, nodes, cluster.intraNode,
                                       cluster.interNode());
    return collectiveTime(Collective::AllReduce, Algorithm::Ring, bytes, ranks,
                          slowest);
  }
  return 0;
}

double bubbleFraction(pipeline::ScheduleKind kind, int64_t stages,
                      int64_t microbatches, int64_t virtualStages) {
  double p = double(stages), m = double(microbatches);
  if (kind == pipeline::ScheduleKind::ZeroBubbleH1)
    return (p - 1) / (3 * m + p - 1);
  double v =
      kind == pipeline::ScheduleKind::Interleaved ? double(virtualStages) : 1.0;
  return (p - 1) / (v * m + p - 1);
}

double microbatchesInFlight(pipeline::ScheduleKind kind, int64_t stages,
                            int64_t microbatches, int64_t virtualStages) {
  switch (kind) {
  case pipeline::ScheduleKind::GPipe:
    return double(microbatches);
  case pipeline::ScheduleKind::OneFOneB:
  case pipeline::ScheduleKind::ZeroBubbleH1:
    return double(std::min(stages, microbatches));
  case pipeline::ScheduleKind::Interleaved: {
    int64_t chunkForwards =
        std::min((stages - 1) * 2 + (virtualStages - 1) * stages + 1,
                 virtualStages * microbatches);
    return double(chunkForwards) / double(virtualStages);
  }
  }
  return double(microbatches);
}

MemoryBreakdown modelState(double parameters, const StateBytes &bytes,
                           int zeroStage, int64_t dp, int64_t tp, int64_t pp) {
  double local = parameters / double(tp * pp);
  MemoryBreakdown memory;
  memory.weights = local * bytes.weights / (zeroStage >= 3 ? dp : 1);
  memory.gradients = local * bytes.gradients / (zeroStage >= 2 ? dp : 1);
  memory.optimizer = local * bytes.optimizer / (zeroStage >= 1 ? dp : 1);
  return memory;
}

double activationBytesPerLayer(int64_t seq, int64_t microbatch, int64_t hidden,
                               int64_t heads, int64_t tp, bool sequenceParallel,
                               Recompute recompute) {
  double s = double(seq), b = double(microbatch), h = double(hidden),
         a = double(heads), t = double(tp);
  double sbh = s * b * h;
  switch (recompute) {
  case Recompute::Full:
    return 2 * sbh / (sequenceParallel ? t : 1);
  case Recompute::Selective:
    return sequenceParallel ? sbh * 34 / t : sbh * (10 + 24 / t);
  case Recompute::None:
    return sequenceParallel ? sbh / t * (34 + 5 * a * s / h)
                            : sbh * (10 + 24 / t + 5 * a * s / (h * t));
  }
  return 0;
}

double rooflineTime(double flops, double bytes, double peakFlops,
                    double memoryBandwidth, double efficiency) {
  return std::max(flops / (peakFlops * efficiency), bytes / memoryBandwidth);
}

} // namespace weft::planner

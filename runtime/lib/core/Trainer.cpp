//===- Trainer.cpp - The training loop of a compiled training step --------===//
//
// A model compiled with `weftc --train` computes one step:
//   (tokens, labels, lr, [bias1, bias2], params, state)
//     -> (loss, grad_norm, param:<name>..., state:<kind>:<name>...)
// The trainer keeps writable copies of this rank's parameter shards, feeds
// each step's new parameters and state back, draws batches from a token
// file and schedules the learning rate (linear warmup, cosine decay).
// Batches, the learning rate and Adam's bias corrections depend on the step
// and seed only, so a run resumed from a checkpoint repeats the losses of
// an uninterrupted one bit for bit (on the same mesh).
//
//===----------------------------------------------------------------------===//

#include "weft/runtime/Trainer.h"

#include "weft/runtime/Checkpoint.h"
#include "weft/runtime/Contract.h"
#include "weft/runtime/ShardLayout.h"
#include "weft/runtime/TensorFiles.h"
#include "weft/runtime/TokenFile.h"
#include "weft/runtime/Trace.h"

#include "core/Bf16.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <omp.h>
#include <random>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace weft::runtime {
namespace {

/// What the device did between two readings of its counters.
weft_device_stats countedBetween(const weft_device_stats &before,
                                 const weft_device_stats &after) {
  return {after.host_to_device_bytes - before.host_to_device_bytes,
          after.device_to_host_bytes - before.device_to_host_bytes,
          after.synchronizations - before.synchronizations,
          after.launches - before.launches,
          after.allocations - before.allocations,
          after.graph_replays - before.graph_replays};
}

/// Local SGD's average: each tensor the replicas hold summed over them and
/// divided by their number (float tensors; the others never differ).
void averageReplicas(Communicator &replicas,
                     const std::vector<CheckpointTensor> &tensors) {
  float share = 1.0f / float(replicas.size());
  for (const CheckpointTensor &tensor : tensors) {
    const weft_buffer_info *info = tensor.info;
    size_t count = info->local_bytes / weft_dtype_size(info->dtype);
    if (info->dtype != WEFT_F32 && info->dtype != WEFT_BF16)
      continue;
    replicas.allReduce(tensor.data, count, info->dtype, ReduceOp::Sum);
    if (info->dtype == WEFT_F32) {
      float *values = static_cast<float *>(tensor.data);
      for (size_t i = 0; i < count; ++i)
        values[i] *= share;
    } else {
      uint16_t *values = static_cast<uint16_t *>(tensor.data);
      for (size_t i = 0; i < count; ++i)
        values[i] = floatToBf16(bf16ToFloat(values[i]) * share);
    }
  }
}

/// The model's depth for --init-seed's residual scaling: one more than the
/// largest layer index in a param name ("h.11.attn...", "layers.3...").
int64_t countLayers(const std::map<std::string, size_t> &params) {
  int64_t layers = 1;
  for (auto &[name, i] : params)
    for (size_t dot = name.find('.'); dot != std::string::npos;
         dot = name.find('.', dot + 1)) {
      size_t end = name.find('.', dot + 1);
      std::string part = name.substr(dot + 1, end - dot - 1);
      if (end != std::string::npos && !part.empty() &&
          part.find_first_not_of("0123456789") == std::string::npos) {
        layers = std::max<int64_t>(layers, atoll(part.c_str()) + 1);
        break;
      }
    }
  return layers;
}

bool contains(const std::string &text, const char *part) {
  return text.find(part) != std::string::npos;
}

/// This rank's shard of param `info`, drawn as TrainOptions::initSeed says.
bool initializeParameter(const weft_buffer_info *info, int64_t seed,
                         int64_t layers, const MeshShape &mesh,
                         const std::vector<int64_t> &coordinates, void *local,
                         std::string &message) {
  std::string name = info->name;
  if (seed < 0) {
    message = "param '" + name + "' has no data (no weights file)";
    return false;
  }
  if (info->dtype != WEFT_F32) {
    message = "--init-seed draws f32 params, and '" + name + "' is " +
              weft_dtype_name(info->dtype);
    return false;
  }
  std::vector<int64_t> shape(info->shape, info->shape + info->rank);
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  std::vector<float> whole(count);
  if (info->rank >= 2) {
    double std = 0.02;
    if (contains(name, "c_proj") || contains(name, "o_proj") ||
        contains(name, "out_proj") || contains(name, "down_proj"))
      std /= std::sqrt(2.0 * double(layers));
    // FNV-1a of the name: each param has its own stream.
    uint64_t hash = 1469598103934665603ull;
    for (char c : name)
      hash = (hash ^ uint8_t(c)) * 1099511628211ull;
    std::mt19937_64 generator(uint64_t(seed) ^ hash);
    std::normal_distribution<float> normal(0.0f, float(std));
    for (float &x : whole)
      x = normal(generator);
  } else {
    bool scale = (contains(name, "ln") || contains(name, "norm")) &&
                 !contains(name, "bias");
    std::fill(whole.begin(), whole.end(), scale ? 1.0f : 0.0f);
  }
  ShardSpec spec = bufferSpec(info);
  spec.extract(whole.data(), local, shape, sizeof(float),
               spec.shardIndex(coordinates, mesh), mesh);
  return true;
}

int fail(int rank, const std::string &message) {
  reportRankError(rank, "error: rank " + std::to_string(rank) + ": " + message);
  return 1;
}

/// splitmix64: batches depend on the seed and step only.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// A fault that WEFT_FAULT=ACTION@RANK:STEP makes rank RANK commit at the
/// start of step STEP, for the drills of test/Reliability: exit0 (exit(0)
/// in mid-run), quit0 (_exit(0), which skips the exit handlers), segv,
/// kill or stop (that signal to itself).
struct InjectedFault {
  std::string action;
  int64_t rank = -1;
  int64_t step = -1;

  bool parse(const char *spec, std::string &error) {
    static const char *actions[] = {"exit0", "quit0", "segv", "kill", "stop"};
    std::string text = spec;
    size_t at = text.find('@'), colon = text.find(':');
    long long parsedRank = -1, parsedStep = -1;
    char end = 0;
    action = text.substr(0, at);
    if (at == std::string::npos || colon == std::string::npos ||
        sscanf(text.c_str() + at + 1, "%lld:%lld%c", &parsedRank, &parsedStep,
               &end) != 2 ||
        std::find(std::begin(actions), std::end(actions), action) ==
            std::end(actions)) {
      error = "WEFT_FAULT='" + text +
              "' is not ACTION@RANK:STEP with ACTION one of exit0, quit0, "
              "segv, kill, stop";
      return false;
    }
    rank = parsedRank;
    step = parsedStep;
    return true;
  }

  void commitAt(int64_t currentRank, int64_t currentStep) const {
    if (currentRank != rank || currentStep != step)
      return;
    fflush(stdout);
    if (action == "exit0")
      exit(0);
    if (action == "quit0")
      _exit(0);
    raise(action == "segv" ? SIGSEGV : action == "kill" ? SIGKILL : SIGSTOP);
  }
};

double learningRate(const TrainOptions &options, int64_t step) {
  double minLr = options.minLr >= 0 ? options.minLr : options.lr / 10;
  if (step <= options.warmup)
    return options.lr * step / std::max<int64_t>(1, options.warmup);
  double progress = double(step - options.warmup) /
                    std::max<int64_t>(1, options.steps - options.warmup);
  return minLr + 0.5 * (options.lr - minLr) * (1 + std::cos(M_PI * progress));
}

/// One rank's peak fp32 FLOP/s, estimated from its threads, the clock
/// /proc/cpuinfo reports and the vector FMA width: a rough figure (the
/// clock varies), which --peak-tflops replaces.
double estimatedPeakFlops() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  double megahertz = 0;
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("cpu MHz", 0) == 0) {
      megahertz = atof(line.substr(line.find(':') + 1).c_str());
      break;
    }
  double perCycle = __builtin_cpu_supports("avx512f") ? 64
                    : __builtin_cpu_supports("fma")   ? 32
                                                      : 8;
  return omp_get_max_threads() * megahertz * 1e6 * perCycle;
}

} // namespace

int train(weft_model *model, void (*entry)(void **), World &world,
          const TrainOptions &options) {
  int rank = world.rank;
  const MeshShape &mesh = world.mesh;
  double beta1 = 0, beta2 = 0;
  int64_t vocab = 0;
  std::string optimizer = weft_model_optimizer(model, &beta1, &beta2, &vocab);

  // Buffers by role and name.
  std::map<std::string, size_t> inputs, params, states, outputs;
  for (size_t i = 0; i < weft_model_num_buffers(model); ++i) {
    const weft_buffer_info *info = weft_model_buffer(model, i);
    auto &table = info->role == WEFT_INPUT   ? inputs
                  : info->role == WEFT_PARAM ? params
                  : info->role == WEFT_STATE ? states
                                             : outputs;
    table[info->name] = i;
  }
  InjectedFault fault;
  if (const char *spec = getenv("WEFT_FAULT"))
    if (std::string message; !fault.parse(spec, message))
      return fail(rank, message);
  // The compiler names the input that holds the token ids.
  const std::string tokens = weft_model_token_input(model);
  if (tokens.empty())
    return fail(rank, "the program names no token input: it is not a "
                      "training step (weftc --train)");
  for (const std::string &name :
       {tokens, std::string("labels"), std::string("lr")})
    if (!inputs.count(name))
      return fail(rank, "the training step has no input '" + name + "'");
  // Every other input is a tensor fed unchanged to every step.
  std::vector<std::vector<uint8_t>> fixedData;
  auto fedEachStep = [&](const std::string &name) {
    return name == tokens || name == "labels" || name == "lr" ||
           name == "bias1" || name == "bias2";
  };
  for (auto &[name, path] : options.fixedInputs)
    if (fedEachStep(name) || !inputs.count(name))
      return fail(rank, "--input " + name + ": " +
                            (fedEachStep(name)
                                 ? "the trainer feeds this input itself"
                                 : "the training step has no such input"));
  for (auto &[name, i] : inputs) {
    if (fedEachStep(name))
      continue;
    const weft_buffer_info *info = weft_model_buffer(model, i);
    auto path = options.fixedInputs.find(name);
    if (path == options.fixedInputs.end())
      return fail(rank,
                  "the training step has an input '" + name +
                      "' besides the tokens: pass --input " + name + "=FILE (" +
                      weft_dtype_name(info->dtype) + " " +
                      shapeString({info->shape, info->shape + info->rank}) +
                      "), fed unchanged to every step");
    std::string message;
    if (!bindInputFile(model, i, path->second, world.coordinates, mesh,
                       fixedData.emplace_back(), message))
      return fail(rank, message);
  }
  const weft_buffer_info *idsInfo = weft_model_buffer(model, inputs[tokens]);
  // [batch, seq], or [micro-batches, batch, seq] with accumulation: the
  // windows of a step are the rows either way.
  if (idsInfo->rank != 2 && idsInfo->rank != 3)
    return fail(rank, "the token input '" + tokens +
                          "' must be [batch, seq] or [micro-batches, batch, "
                          "seq]");
  int64_t seq = idsInfo->shape[idsInfo->rank - 1];
  int64_t batch = 1;
  for (int d = 0; d + 1 < idsInfo->rank; ++d)
    batch *= idsInfo->shape[d];
  // The labels are the next tokens: one per token id.
  const weft_buffer_info *labelsInfo =
      weft_model_buffer(model, inputs["labels"]);
  if (std::accumulate(labelsInfo->shape, labelsInfo->shape + labelsInfo->rank,
                      int64_t(1), std::multiplies<>()) != batch * seq)
    return fail(rank, "the training step's labels " +
                          shapeString({labelsInfo->shape,
                                       labelsInfo->shape + labelsInfo->rank}) +
                          " are not one per token of '" + tokens + "' " +
                          shapeString({idsInfo->shape,
                                       idsInfo->shape + idsInfo->rank}));

  // The corpus: little-endian uint16 tokens; a rank reads only the
  // windows of its own rows, and checks each token it reads.
  TokenFile corpus;
  if (std::string message; !corpus.open(options.data, message))
    return fail(rank, message);
  if (int64_t(corpus.count()) < seq + 2)
    return fail(rank, "the token file '" + options.data + "' has " +
                          std::to_string(corpus.count()) +
                          " tokens; a sequence needs " +
                          std::to_string(seq + 1));

  // Writable copies of this rank's parameter shards, from the weights
  // file or drawn from --init-seed.
  std::vector<std::vector<char>> paramCopies;
  int64_t layers = countLayers(params);
  for (auto &[name, i] : params) {
    const weft_buffer_info *info = weft_model_buffer(model, i);
    const char *mapped = static_cast<const char *>(weft_model_data(model, i));
    if (mapped) {
      paramCopies.emplace_back(mapped, mapped + info->local_bytes);
    } else {
      paramCopies.emplace_back(info->local_bytes);
      if (std::string message; !initializeParameter(
              info, options.initSeed, layers, mesh, world.coordinates,
              paramCopies.back().data(), message))
        return fail(rank, message);
    }
    weft_model_bind(model, i, paramCopies.back().data());
  }
  // Each fed-back output and the buffer it replaces.
  std::vector<std::pair<size_t, size_t>> feedback;
  for (auto &[name, out] : outputs) {
    size_t colon = name.find(':');
    std::string kind = name.substr(0, colon), target = name.substr(colon + 1);
    if (colon == std::string::npos || (kind != "param" && kind != "state"))
      continue;
    auto &table = kind == "param" ? params : states;
    auto it = table.find(target);
    if (it == table.end())
      return fail(rank, "output '" + name + "' has no " + kind + " to update");
    const weft_buffer_info *from = weft_model_buffer(model, out);
    const weft_buffer_info *to = weft_model_buffer(model, it->second);
    if (from->local_bytes != to->local_bytes ||
        std::string(from->sharding) != to->sharding)
      return fail(rank, "output '" + name + "' is split as '" + from->sharding +
                            "' but its " + kind + " is split as '" +
                            to->sharding + "'");
    feedback.emplace_back(out, it->second);
  }
  // The model puts each update in its parameter's or state's place after
  // a step: on a device of its own the state stays there.
  for (auto [out, target] : feedback)
    if (char message[512];
        weft_model_feed_back(model, out, target, message, sizeof(message)))
      return fail(rank, message);

  // What a checkpoint holds: this rank's parameter and state shards.
  std::vector<CheckpointTensor> checkpointed;
  {
    size_t copy = 0;
    for (auto &[name, i] : params)
      checkpointed.push_back(
          {weft_model_buffer(model, i), paramCopies[copy++].data()});
    for (auto &[name, i] : states)
      checkpointed.push_back(
          {weft_model_buffer(model, i), weft_model_data(model, i)});
  }
  Communicator *replicas = nullptr;
  if (options.averageEvery > 1) {
    if (options.saveEvery % options.averageEvery != 0)
      return fail(rank, "--save-every " + std::to_string(options.saveEvery) +
                            " is not a multiple of the " +
                            std::to_string(options.averageEvery) +
                            " steps between the replicas' averages "
                            "(weftc --dp-sync): a checkpoint must hold "
                            "one model");
    replicas = &world.group(options.averageAxes);
  }
  if (options.saveReplicas && (!replicas || options.checkpointDir.empty()))
    return fail(rank, replicas ? "--save-replicas needs --ckpt-dir DIR"
                               : "--save-replicas keeps each local-SGD "
                                 "replica's model, and this model's replicas "
                                 "never step alone (weftc --dp-sync every=K)");
  int64_t firstStep = 1;
  uint64_t seed = options.seed;
  std::unique_ptr<Communicator> everyone;
  if (!options.checkpointDir.empty() || !options.trace.empty())
    everyone = worldCommunicator();
  if (options.resume || !options.resumeFrom.empty()) {
    // --resume-from names one checkpoint; --resume takes the newest that
    // loads on every rank, so a corrupt one costs the steps since the one
    // before it, not the run.
    std::vector<std::string> candidates =
        options.resumeFrom.empty()
            ? resumableCheckpoints(options.checkpointDir)
            : std::vector<std::string>{options.resumeFrom};
    if (candidates.empty())
      return fail(
          rank,
          "there is no checkpoint to resume from in '" + options.checkpointDir +
              "'" +
              (options.checkpointDir.empty() ? " (pass --ckpt-dir DIR)" : ""));
    CheckpointState state;
    std::string path;
    for (size_t c = 0; c < candidates.size() && path.empty(); ++c) {
      std::string message;
      bool loaded =
          loadCheckpoint(candidates[c], world, checkpointed, state, message);
      if (!options.resumeFrom.empty() && !loaded)
        return fail(rank, message);
      int32_t failed = loaded ? 0 : 1;
      if (options.resumeFrom.empty())
        everyone->allReduce(&failed, 1, WEFT_I32, ReduceOp::Max);
      if (!failed) {
        path = candidates[c];
        break;
      }
      bool last = c + 1 == candidates.size();
      if (!loaded && !last)
        fprintf(stderr,
                "warning: rank %d: %s; trying the checkpoint before it\n", rank,
                message.c_str());
      else if (last)
        return loaded ? kExitPeerFailed
                      : fail(rank, message + "; no checkpoint in '" +
                                       options.checkpointDir +
                                       "' loads on every rank");
    }
    if (options.seedGiven && options.seed != state.seed)
      return fail(rank, "checkpoint '" + path + "' was trained with --seed " +
                            std::to_string(state.seed) + ", not " +
                            std::to_string(options.seed));
    seed = state.seed;
    firstStep = state.step + 1;
    if (rank == 0)
      printf("resuming from %s (step %lld)\n", path.c_str(),
             static_cast<long long>(state.step));
  }
  if (!options.trace.empty())
    trace::enable();
  auto save = [&](const std::string &dir, int64_t step,
                  const std::function<bool(int64_t)> &from = nullptr) {
    std::string message;
    if (!saveCheckpoint(dir, {step, seed}, world, *everyone, checkpointed,
                        message, from))
      return message.empty() ? kExitPeerFailed : fail(rank, message);
    return 0;
  };
  // Replica R's ranks: those at position R along the averaged axes.
  auto replicaOf = [&](int64_t r) {
    std::vector<int64_t> coordinates = mesh.coordinates(r);
    int64_t position = 0;
    for (size_t axis = 0; axis < coordinates.size(); ++axis)
      if (options.averageAxes >> axis & 1)
        position = position * mesh.sizes[axis] + coordinates[axis];
    return position;
  };

  std::vector<int64_t> ids(batch * seq), labels(batch * seq);
  // The rows (windows) in this rank's shards of the tokens and labels: the
  // shard of a tensor holding each element's row number.
  std::vector<bool> ownRow(batch, false);
  for (const std::string &name : {tokens, std::string("labels")}) {
    const weft_buffer_info *info = weft_model_buffer(model, inputs[name]);
    ShardSpec spec = bufferSpec(info);
    if (spec.isReplicated()) {
      ownRow.assign(batch, true);
      break;
    }
    std::vector<int64_t> rowOf(batch * seq), local(info->local_bytes / 8, -1);
    for (size_t i = 0; i < rowOf.size(); ++i)
      rowOf[i] = int64_t(i) / seq;
    spec.extract(rowOf.data(), local.data(),
                 std::vector<int64_t>(info->shape, info->shape + info->rank),
                 sizeof(int64_t), spec.shardIndex(world.coordinates, mesh),
                 mesh);
    for (int64_t row : local)
      if (row >= 0)
        ownRow[row] = true;
  }
  std::vector<char> idsShard(idsInfo->local_bytes),
      labelsShard(weft_model_buffer(model, inputs["labels"])->local_bytes);
  float lr = 0, bias1 = 1, bias2 = 1;
  auto bindInput = [&](const std::string &name, const void *whole,
                       std::vector<char> *shard) {
    size_t i = inputs[name];
    const weft_buffer_info *info = weft_model_buffer(model, i);
    ShardSpec spec = bufferSpec(info);
    if (spec.isReplicated() || !shard) {
      weft_model_set_input(model, i, whole);
      return;
    }
    spec.extract(whole, shard->data(),
                 std::vector<int64_t>(info->shape, info->shape + info->rank),
                 weft_dtype_size(info->dtype),
                 spec.shardIndex(world.coordinates, mesh), mesh);
    weft_model_set_input(model, i, shard->data());
  };
  bindInput("lr", &lr, nullptr);
  if (inputs.count("bias1"))
    bindInput("bias1", &bias1, nullptr);
  if (inputs.count("bias2"))
    bindInput("bias2", &bias2, nullptr);

  // A resumed run keeps the log's lines up to the checkpoint's step.
  std::string kept;
  if (firstStep > 1 && !options.log.empty() && rank == 0) {
    std::ifstream previous(options.log);
    for (std::string line; std::getline(previous, line);) {
      long long step = 0;
      if (sscanf(line.c_str(), "{\"step\": %lld", &step) == 1 &&
          step < firstStep)
        kept += line + "\n";
    }
  }
  FILE *log = nullptr;
  if (!options.log.empty() && rank == 0 &&
      !(log = fopen(options.log.c_str(), "w")))
    return fail(rank, "cannot write the log '" + options.log + "'");
  if (log)
    fputs(kept.c_str(), log);
  double stepFlops = weft_model_step_flops(model);
  double peak = (options.peakTflops > 0 ? options.peakTflops * 1e12
                                        : estimatedPeakFlops()) *
                double(std::max<int64_t>(1, mesh.numRanks()));
  // A progress bar on a terminal, redrawn every step under the printed
  // lines.
  bool progressBar = rank == 0 && isatty(fileno(stdout));
  if (rank == 0)
    printf("%.4g GFLOP per step (contractions, all ranks); MFU against "
           "%.4g TFLOP/s per rank (%s)\n",
           stepFlops / 1e9, peak / 1e12 / std::max<int64_t>(1, mesh.numRanks()),
           options.peakTflops > 0 ? "--peak-tflops" : "estimated");
  char error[1024];
  std::vector<uint16_t> window(seq + 1);
  weft_device_stats before{};
  weft_model_device_stats(model, &before);
  for (int64_t step = firstStep; step <= options.steps; ++step) {
    setCurrentStep(step);
    fault.commitAt(rank, step);
    // The batch: `batch` windows of seq + 1 tokens at seeded offsets; this
    // rank draws its own rows.
    for (int64_t b = 0; b < batch; ++b) {
      if (!ownRow[b])
        continue;
      uint64_t offset =
          mix(mix(seed) ^ mix(step * 1000003 + b)) % (corpus.count() - seq - 1);
      if (std::string message; !corpus.read(offset, window, vocab, message))
        return fail(rank, "step " + std::to_string(step) + ": " + message);
      for (int64_t s = 0; s <= seq; ++s) {
        uint16_t token = window[s];
        if (s < seq)
          ids[b * seq + s] = token;
        if (s > 0)
          labels[b * seq + s - 1] = token;
      }
    }
    bindInput(tokens, ids.data(), &idsShard);
    bindInput("labels", labels.data(), &labelsShard);
    lr = float(learningRate(options, step));
    bias1 = float(1 - std::pow(beta1, double(step)));
    bias2 = float(1 - std::pow(beta2, double(step)));
    // Traced steps start together, so that a rank's idle time is its own.
    if (trace::enabled()) {
      int64_t ready = 1;
      everyone->allReduce(&ready, 1, WEFT_I64, ReduceOp::Sum);
    }
    double traceStart = trace::now();
    auto start = std::chrono::steady_clock::now();
    if (weft_model_run(model, entry, error, sizeof(error)) < 0)
      return fail(rank, error);
    trace::record(trace::Kind::Step, traceStart, trace::now(), step, 0);
    float loss =
        *static_cast<float *>(weft_model_output(model, outputs["loss"]));
    float norm = outputs.count("grad_norm")
                     ? *static_cast<float *>(
                           weft_model_output(model, outputs["grad_norm"]))
                     : 0.0f;
    // Replicas that step alone each see their own batch's loss; the log
    // shows the mean over them, the whole batch's (the norm stays rank 0's).
    if (replicas) {
      replicas->allReduce(&loss, 1, WEFT_F32, ReduceOp::Sum);
      loss /= float(replicas->size());
    }
    if (!std::isfinite(loss))
      return fail(rank, "step " + std::to_string(step) + ": the loss is " +
                            (std::isnan(loss) ? "NaN" : "infinite") +
                            "; the parameters of step " +
                            std::to_string(step - 1) + " are kept");
    // The step's time includes the new parameters and state taking the old
    // ones' place (weft_model_feed_back), as an in-place optimizer's does.
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    // Only a run given a directory saves (a trace needs the communicator
    // too, not a checkpoint).
    bool saves = !options.checkpointDir.empty() &&
                 ((options.saveEvery && step % options.saveEvery == 0) ||
                  step == options.steps);
    // A checkpoint and an average read the state in host memory.
    if (saves || (replicas &&
                  (step % options.averageEvery == 0 || step == options.steps)))
      weft_model_download(model);
    if (saves && options.saveReplicas)
      for (int64_t r = 0; r < replicas->size(); ++r)
        if (int status = save(
                options.checkpointDir + "/replica-" + std::to_string(r), step,
                [&](int64_t other) { return replicaOf(other) == r; }))
          return status;
    if (replicas &&
        (step % options.averageEvery == 0 || step == options.steps)) {
      double averageStart = trace::now();
      averageReplicas(*replicas, checkpointed);
      for (const auto *table : {&params, &states})
        for (auto &[name, i] : *table)
          weft_model_host_changed(model, i);
      trace::record(trace::Kind::Collective, averageStart, trace::now(),
                    int64_t(CollectiveKind::AllReduce), 0);
    }
    if (saves)
      if (int status = save(options.checkpointDir, step))
        return status;
    // What the device did in this step, its checkpoint included.
    weft_device_stats after{};
    weft_model_device_stats(model, &after);
    weft_device_stats device = countedBetween(before, after);
    before = after;
    if (rank != 0)
      continue;
    double tokensPerSecond = batch * seq / seconds;
    double mfu = peak > 0 ? stepFlops / seconds / peak : 0;
    if (progressBar)
      printf("\r\033[K");
    if (step % options.printEvery == 0 || step == 1 || step == options.steps)
      printf("step %4lld/%lld | loss %.4f | lr %.2e | grad norm %.3f | %.0f "
             "tok/s | MFU %.2f%%\n",
             static_cast<long long>(step),
             static_cast<long long>(options.steps), loss, lr, norm,
             tokensPerSecond, 100 * mfu);
    if (options.deviceStats)
      printf("step %4lld device: %" PRIu64 " B to it, %" PRIu64 " B back, "
             "%" PRIu64 " synchronizations, %" PRIu64 " launches, %" PRIu64
             " allocations, %" PRIu64 " graph replays\n",
             static_cast<long long>(step), device.host_to_device_bytes,
             device.device_to_host_bytes, device.synchronizations,
             device.launches, device.allocations, device.graph_replays);
    if (progressBar && step < options.steps) {
      constexpr int width = 30;
      int filled = int(width * step / options.steps);
      printf("[%s%s] %lld/%lld loss %.4f", std::string(filled, '#').c_str(),
             std::string(width - filled, '.').c_str(),
             static_cast<long long>(step),
             static_cast<long long>(options.steps), loss);
    }
    if (log) {
      fprintf(log,
              "{\"step\": %lld, \"loss\": %.9g, \"lr\": %.9g, \"grad_norm\": "
              "%.9g, \"tokens_per_s\": %.1f, \"mfu\": %.4g",
              static_cast<long long>(step), loss, lr, norm, tokensPerSecond,
              mfu);
      if (options.deviceStats)
        fprintf(log,
                ", \"device\": {\"host_to_device_bytes\": %" PRIu64
                ", \"device_to_host_bytes\": %" PRIu64
                ", \"synchronizations\": %" PRIu64 ", \"launches\": %" PRIu64
                ", \"allocations\": %" PRIu64 ", \"graph_replays\": %" PRIu64
                "}",
                device.host_to_device_bytes, device.device_to_host_bytes,
                device.synchronizations, device.launches, device.allocations,
                device.graph_replays);
      fputs("}\n", log);
    }
    fflush(stdout);
    if (log)
      fflush(log);
  }
  if (log)
    fclose(log);
  if (trace::enabled()) {
    std::string track = "rank " + std::to_string(rank);
    for (size_t axis = 0; axis < mesh.names.size(); ++axis)
      track += (axis ? ", " : " (") + mesh.names[axis] + " " +
               std::to_string(world.coordinates[axis]) +
               (axis + 1 == mesh.names.size() ? ")" : "");
    std::string message;
    if (!trace::write(options.trace, *everyone, track, message))
      return fail(rank, message);
    if (rank == 0)
      printf("trace: %s\n", options.trace.c_str());
  }
  return 0;
}

} // namespace weft::runtime

//===- RunnerMain.cpp - main() of executables built by weftc --------------===//
//
//   ./model [--weights FILE] [--input NAME=FILE]... [--output NAME=FILE]...
//           [--repeat N] [--threads N] [--collective-timeout SECONDS]
//
// Input files are .npy or ONNX .pb; their dtype and shape must match the
// model's. Outputs are written as .npy; without --output a summary of every
// output is printed. Errors are one line naming the input or file, exit 1.
//
// A partitioned model runs as one process per rank (weft-run launches
// them). Every rank reads the whole input and keeps its shard; the output
// shards are gathered and rank 0 writes or prints them.
//
// An executable built for CUDA (weftc --target=cuda) on a machine without a
// usable GPU exits with one line, "error: no CUDA device: <why>", and
// status 69 (kExitNoCudaDevice).
//
//===----------------------------------------------------------------------===//

#include "weft/runtime/CApi.h"
#include "weft/runtime/Collectives.h"
#include "weft/runtime/Contract.h"
#include "weft/runtime/Device.h"
#include "weft/runtime/ShardLayout.h"
#include "weft/runtime/TensorFiles.h"
#include "weft/runtime/Trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

extern "C" {
// A model is one program, or with pipeline parallelism one per rank of its
// pp axis (weftc emits a table of them): whichever the executable has. The
// names are Contract.h's kEntrySymbol, kManifestSymbol and kPipeline*.
__attribute__((weak)) void weft_entry(void **buffers);
__attribute__((weak)) extern const char weft_manifest[];
__attribute__((weak)) extern const int64_t weft_pipeline_programs;
__attribute__((weak)) extern void (*const weft_pipeline_entries[])(void **);
__attribute__((weak)) extern const char *const weft_pipeline_manifests[];
void omp_set_num_threads(int threads);
void kmp_set_blocktime(int milliseconds);
}

using namespace weft::runtime;

namespace {

/// This process's rank in a partitioned model, for messages.
int processRank = -1;

/// This process's rank in the world once it has joined it, for the files
/// it leaves weft-run in WEFT_RUN_DIR.
int worldRank = -1;

/// Whether this rank has said how it ended (recordExit).
bool exitRecorded = false;

/// Tells weft-run (through WEFT_RUN_DIR) how this rank ended, so that a
/// rank that fails is told apart from the ones its launcher stops, and
/// one that finished from one that exited in mid-run.
void recordExit(int status) {
  exitRecorded = true;
  const char *runDir = getenv("WEFT_RUN_DIR");
  if (runDir && worldRank >= 0)
    std::ofstream(std::string(runDir) + "/rank" + std::to_string(worldRank) +
                  ".exit")
        << status << "\n";
}

/// A rank that exits in mid-run (exit(0) in a library, say) would leave
/// its peers waiting in their next collective: it reports itself and stops
/// them instead.
void reportEarlyExit() {
  if (processRank < 0 || exitRecorded)
    return;
  std::string step = currentStep() >= 0
                         ? " in step " + std::to_string(currentStep())
                         : std::string();
  reportRankError(worldRank, "error: rank " + std::to_string(processRank) +
                                 ": the process exited" + step +
                                 ", before the run finished; stopping every "
                                 "rank");
  recordExit(1);
  abortWorld();
}

int fail(const std::string &message) {
  if (processRank >= 0)
    reportRankError(worldRank, "error: rank " + std::to_string(processRank) +
                                   ": " + message);
  else
    fprintf(stderr, "error: %s\n", message.c_str());
  fflush(stderr);
  recordExit(1);
  return 1;
}

bool pipelined() { return &weft_pipeline_programs != nullptr; }

/// The manifest of one of the executable's programs.
std::optional<Manifest> readManifest(const char *text, std::string &error) {
  std::optional<Manifest> manifest = Manifest::parse(text, error);
  if (!manifest)
    error = "the executable's manifest " + error;
  return manifest;
}

/// `<executable>.weights` (`<executable>.pp<r>.weights` for pp rank r of
/// a pipeline), found through /proc so the model runs from any directory.
std::string defaultWeightsPath(const char *argv0, int64_t pipelineRank) {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  std::string exe = n > 0 ? std::string(path, n) : std::string(argv0);
  if (pipelineRank >= 0)
    return exe + ".pp" + std::to_string(pipelineRank) + ".weights";
  return exe + ".weights";
}

double asDouble(const void *data, weft_dtype dtype, size_t i) {
  const char *p = static_cast<const char *>(data);
  switch (dtype) {
  case WEFT_F32:
    return reinterpret_cast<const float *>(p)[i];
  case WEFT_F64:
    return reinterpret_cast<const double *>(p)[i];
  case WEFT_I64:
    return double(reinterpret_cast<const int64_t *>(p)[i]);
  case WEFT_I32:
    return reinterpret_cast<const int32_t *>(p)[i];
  case WEFT_BOOL:
    return p[i] != 0;
  case WEFT_F16:
  case WEFT_BF16: {
    uint16_t bits;
    memcpy(&bits, p + 2 * i, 2);
    if (dtype == WEFT_BF16) {
      uint32_t wide = uint32_t(bits) << 16;
      float f;
      memcpy(&f, &wide, 4);
      return f;
    }
    int exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
    double sign = bits & 0x8000 ? -1 : 1;
    if (exponent == 0)
      return sign * std::ldexp(mantissa, -24);
    if (exponent == 31)
      return mantissa ? NAN : sign * INFINITY;
    return sign * std::ldexp(mantissa + 1024, exponent - 25);
  }
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  const char *manifest =
      pipelined() ? weft_pipeline_manifests[0] : weft_manifest;
  // The backend of the program's device prepares the process before
  // anything runs (the CPU's may re-execute it); a manifest that does not
  // parse is reported once the arguments are read.
  std::string manifestError;
  std::optional<Manifest> first = readManifest(manifest, manifestError);
  if (first)
    if (const Backend *backend = findBackend(first->device);
        backend && backend->prepareProcess)
      backend->prepareProcess(argv);
  void (*entry)(void **) = weft_entry;
  std::string weightsPath;
  std::map<std::string, std::string> inputs, outputs;
  std::string collectiveTimeoutText;
  int repeat = 1, threads = 0;
  TrainOptions training;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    // `--flag VALUE` or `--flag=VALUE`.
    auto value = [&](const std::string &flag) -> std::string {
      if (arg.size() > flag.size() &&
          arg.compare(0, flag.size() + 1, flag + "=") == 0)
        return arg.substr(flag.size() + 1);
      return i + 1 < argc ? argv[++i] : "";
    };
    auto is = [&](const std::string &flag) {
      return arg == flag || arg.compare(0, flag.size() + 1, flag + "=") == 0;
    };
    auto split = [&](const std::string &binding,
                     std::map<std::string, std::string> &into) {
      size_t eq = binding.find('=');
      if (eq == std::string::npos || eq == 0)
        return false;
      into[binding.substr(0, eq)] = binding.substr(eq + 1);
      return true;
    };
    if (arg == "--help" || arg == "-h") {
      printf("usage: %s [--weights FILE] [--input NAME=FILE]... "
             "[--output NAME=FILE]... [--repeat N] [--threads N]\n"
             "         [--collective-timeout SECONDS]   (a partitioned model: "
             "how long a rank waits for its peers; default %.0f, or "
             "WEFT_COLLECTIVE_TIMEOUT)\n"
             "       %s --data TOKENS [--steps N] [--lr X] [--min-lr X] "
             "[--warmup N] [--seed N] [--log FILE] [--print-every N]\n"
             "         [--input NAME=FILE]...   (the step's other inputs, "
             "a mask say: fed unchanged to every step)\n"
             "         [--init-seed N]   (random parameters, GPT-2 style, "
             "instead of the weights file)\n"
             "         [--ckpt-dir DIR [--save-every N] [--resume]] "
             "[--resume-from CHECKPOINT] [--peak-tflops X] [--trace FILE]\n"
             "         [--device-stats]   (what the device did each step: "
             "bytes each way, synchronizations, launches, allocations)\n"
             "         [--save-replicas]   (weftc --dp-sync: each checkpoint "
             "also keeps every replica's model before the average)\n"
             "         (a model compiled with weftc --train)\n"
             "       %s --print-manifest   (its buffers and mesh, as JSON; "
             "of pp rank 0 in a pipeline)\n",
             argv[0], kDefaultCollectiveTimeout, argv[0], argv[0]);
      return 0;
    } else if (arg == "--print-manifest") {
      fputs(manifest, stdout);
      return 0;
    } else if (is("--data")) {
      training.data = value("--data");
    } else if (is("--steps")) {
      training.steps = atoll(value("--steps").c_str());
      if (training.steps < 1)
        return fail("--steps needs a positive count");
    } else if (is("--lr")) {
      training.lr = atof(value("--lr").c_str());
    } else if (is("--min-lr")) {
      training.minLr = atof(value("--min-lr").c_str());
    } else if (is("--warmup")) {
      training.warmup = atoll(value("--warmup").c_str());
    } else if (is("--init-seed")) {
      std::string seed = value("--init-seed");
      char *end = nullptr;
      training.initSeed = strtoll(seed.c_str(), &end, 10);
      if (seed.empty() || *end || training.initSeed < 0)
        return fail("--init-seed needs a non-negative integer");
    } else if (is("--seed")) {
      training.seed = strtoull(value("--seed").c_str(), nullptr, 10);
      training.seedGiven = true;
    } else if (is("--peak-tflops")) {
      training.peakTflops = atof(value("--peak-tflops").c_str());
      if (training.peakTflops <= 0)
        return fail("--peak-tflops needs a positive number");
    } else if (is("--ckpt-dir")) {
      training.checkpointDir = value("--ckpt-dir");
    } else if (is("--save-every")) {
      training.saveEvery = atoll(value("--save-every").c_str());
      if (training.saveEvery < 1)
        return fail("--save-every needs a positive count");
    } else if (is("--resume-from")) {
      training.resumeFrom = value("--resume-from");
    } else if (arg == "--resume") {
      training.resume = true;
    } else if (arg == "--save-replicas") {
      training.saveReplicas = true;
    } else if (arg == "--device-stats") {
      training.deviceStats = true;
    } else if (is("--trace")) {
      training.trace = value("--trace");
      if (training.trace.empty())
        return fail("--trace needs a file name");
    } else if (is("--log")) {
      training.log = value("--log");
    } else if (is("--print-every")) {
      training.printEvery =
          std::max(1LL, atoll(value("--print-every").c_str()));
    } else if (is("--weights")) {
      weightsPath = value("--weights");
    } else if (is("--repeat")) {
      repeat = atoi(value("--repeat").c_str());
      if (repeat < 1)
        return fail("--repeat needs a positive count");
    } else if (is("--collective-timeout")) {
      collectiveTimeoutText = value("--collective-timeout");
    } else if (is("--threads")) {
      threads = atoi(value("--threads").c_str());
      if (threads < 1)
        return fail("--threads needs a positive count");
    } else if (is("--input")) {
      if (!split(value("--input"), inputs))
        return fail("--input expects NAME=FILE");
    } else if (is("--output")) {
      if (!split(value("--output"), outputs))
        return fail("--output expects NAME=FILE");
    } else {
      return fail("unknown argument '" + arg + "' (see --help)");
    }
  }

  if (collectiveTimeoutText.empty())
    if (const char *text = getenv("WEFT_COLLECTIVE_TIMEOUT"))
      collectiveTimeoutText = text;
  if (!collectiveTimeoutText.empty()) {
    char *end = nullptr;
    double seconds = strtod(collectiveTimeoutText.c_str(), &end);
    if (*end || !(seconds > 0))
      return fail("--collective-timeout (or WEFT_COLLECTIVE_TIMEOUT) needs a "
                  "positive number of seconds, not '" +
                  collectiveTimeoutText + "'");
    setCollectiveTimeout(seconds);
  }

  // Ranks on one machine share its cores (MPICH and Open MPI say how many
  // ranks run here); idle OpenMP threads must not spin on a shared core.
  const char *localRanks = getenv("MPI_LOCALNRANKS");
  if (!localRanks)
    localRanks = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (!threads && localRanks && atoi(localRanks) > 1) {
    int cores = int(std::thread::hardware_concurrency());
    threads = std::max(1, cores / atoi(localRanks));
    if (atoi(localRanks) > cores)
      kmp_set_blocktime(0);
  }
  if (threads)
    omp_set_num_threads(threads);
  // The ranks of a partitioned model; one rank otherwise.
  if (!first)
    return fail(manifestError);
  if (std::string why; !createDevice(first->device, why)) {
    if (first->device == kCudaDevice) {
      fprintf(stderr, "error: no CUDA device: %s\n", why.c_str());
      return kExitNoCudaDevice;
    }
    return fail(why);
  }
  MeshShape mesh = first->mesh;
  std::string worldError;
  std::unique_ptr<World> world = startWorld(argc, argv, mesh, worldError);
  if (!world)
    return fail(worldError);
  bool partitioned = !mesh.sizes.empty();
  if (partitioned) {
    processRank = world->rank;
    std::atexit(reportEarlyExit);
  }
  int64_t pipelineRank = -1;
  if (pipelined()) {
    auto pp = std::find(mesh.names.begin(), mesh.names.end(), "pp");
    if (pp == mesh.names.end())
      return fail("the pipeline's mesh " + mesh.describe() + " has no pp axis");
    pipelineRank = world->coordinates[pp - mesh.names.begin()];
    if (pipelineRank >= weft_pipeline_programs)
      return fail("pp rank " + std::to_string(pipelineRank) +
                  " has no program");
    manifest = weft_pipeline_manifests[pipelineRank];
    entry = weft_pipeline_entries[pipelineRank];
    if (!weightsPath.empty())
      return fail("--weights names one file, and a pipeline reads one per pp "
                  "rank (<executable>.pp<r>.weights)");
  }
  if (training.initSeed >= 0 && !weightsPath.empty())
    return fail("--init-seed starts from random parameters, and --weights "
                "names a file of them: pass one");
  if (weightsPath.empty() && training.initSeed < 0)
    weightsPath = defaultWeightsPath(argv[0], pipelineRank);
  char error[1024];
  weft_model *model = weft_model_open(
      manifest, weightsPath.empty() ? nullptr : weightsPath.c_str(), error,
      sizeof(error));
  if (!model)
    return fail(error);
  setCurrentWorld(world.get());
  // weft-run names a rank that dies from the pid it finds here.
  worldRank = world->rank;
  if (const char *runDir = getenv("WEFT_RUN_DIR"))
    std::ofstream(std::string(runDir) + "/rank" + std::to_string(worldRank) +
                  ".pid")
        << getpid() << "\n";
  // Creating a communicator takes every rank, in one order: the groups of
  // all of a pipeline's programs are created on each rank, sorted.
  std::vector<int64_t> groups;
  for (size_t g = 0; g < weft_model_num_groups(model); ++g)
    groups.push_back(weft_model_group(model, g));
  for (int64_t p = 0; pipelined() && p < weft_pipeline_programs; ++p) {
    std::optional<Manifest> program =
        readManifest(weft_pipeline_manifests[p], manifestError);
    if (!program)
      return fail(manifestError);
    groups.insert(groups.end(), program->groups.begin(), program->groups.end());
  }
  std::sort(groups.begin(), groups.end());
  groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
  world->createGroups(groups);
  world->gradientSync.choose(first->gradSync, first->gradSyncAxes);
  training.averageEvery = first->dpSyncEvery;
  training.averageAxes = first->dpSyncAxes;
  if (weft_model_set_rank(model, world->rank, error, sizeof(error)) != 0)
    return fail(error);
  if (*weft_model_optimizer(model, nullptr, nullptr, nullptr)) {
    if (!outputs.empty())
      return fail("--output " + outputs.begin()->first +
                  ": a training run writes --log and checkpoints, not "
                  "outputs");
    training.fixedInputs = inputs;
    int status = train(model, entry, *world, training);
    recordExit(status);
    if (status == 0) {
      weft_model_close(model);
      setCurrentWorld(nullptr);
      world.reset();
      stopWorld();
    }
    return status;
  }
  std::vector<std::vector<uint8_t>> inputData(weft_model_num_buffers(model));
  std::map<std::string, size_t> outputIndex;
  for (size_t i = 0; i < weft_model_num_buffers(model); ++i) {
    const weft_buffer_info *info = weft_model_buffer(model, i);
    std::vector<int64_t> shape(info->shape, info->shape + info->rank);
    if (info->role == WEFT_OUTPUT) {
      outputIndex[info->name] = i;
      continue;
    }
    if (info->role != WEFT_INPUT)
      continue;
    auto it = inputs.find(info->name);
    if (it == inputs.end())
      return fail(std::string("input '") + info->name +
                  "' is missing: pass --input " + info->name + "=FILE (" +
                  weft_dtype_name(info->dtype) + " " + shapeString(shape) +
                  ")");
    std::string message;
    if (!bindInputFile(model, i, it->second, world->coordinates, mesh,
                       inputData[i], message))
      return fail(message);
    inputs.erase(it);
  }
  if (!inputs.empty())
    return fail("the model has no input '" + inputs.begin()->first + "'");
  for (auto &[name, path] : outputs)
    if (!outputIndex.count(name))
      return fail("the model has no output '" + name + "'");

  std::vector<double> times;
  for (int r = 0; r < repeat; ++r) {
    double seconds = weft_model_run(model, entry, error, sizeof(error));
    if (seconds < 0)
      return fail(error);
    times.push_back(seconds);
  }
  if (repeat > 1 && world->rank == 0) {
    std::sort(times.begin(), times.end());
    double sum = 0;
    for (double t : times)
      sum += t;
    printf("runs: %d, min %.3f ms, median %.3f ms, mean %.3f ms\n", repeat,
           times.front() * 1e3, times[times.size() / 2] * 1e3,
           sum / times.size() * 1e3);
  }

  std::unique_ptr<Communicator> everyone =
      partitioned ? worldCommunicator() : nullptr;
  for (auto &[name, index] : outputIndex) {
    const weft_buffer_info *info = weft_model_buffer(model, index);
    std::vector<int64_t> shape(info->shape, info->shape + info->rank);
    const void *data = weft_model_output(model, index);
    // Assemble the whole output from every rank's shard.
    std::vector<uint8_t> whole;
    ShardSpec spec = bufferSpec(info);
    if (partitioned) {
      std::vector<uint8_t> shards(info->local_bytes * mesh.numRanks());
      everyone->allGather(data, shards.data(), info->local_bytes, WEFT_BOOL);
      whole.resize(info->bytes);
      for (int64_t r = 0; r < mesh.numRanks(); ++r)
        spec.insert(shards.data() + r * info->local_bytes, whole.data(), shape,
                    weft_dtype_size(info->dtype),
                    spec.shardIndex(mesh.coordinates(r), mesh), mesh);
      data = whole.data();
      if (world->rank != 0)
        continue;
    }
    auto requested = outputs.find(name);
    if (requested != outputs.end()) {
      TensorData tensor{info->dtype, shape,
                        std::vector<uint8_t>(
                            static_cast<const uint8_t *>(data),
                            static_cast<const uint8_t *>(data) + info->bytes)};
      std::string message;
      if (!writeNpy(requested->second, tensor, message))
        return fail("output '" + name + "': " + message);
      continue;
    }
    if (!outputs.empty())
      continue;
    size_t count = info->bytes / weft_dtype_size(info->dtype);
    printf("%s: %s %s [", name.c_str(), weft_dtype_name(info->dtype),
           shapeString(shape).c_str());
    for (size_t i = 0; i < std::min<size_t>(count, 6); ++i)
      printf("%s%.6g", i ? ", " : "", asDouble(data, info->dtype, i));
    printf("%s]\n", count > 6 ? ", ..." : "");
  }
  weft_model_close(model);
  everyone.reset();
  setCurrentWorld(nullptr);
  world.reset();
  recordExit(0);
  stopWorld();
  return 0;
}

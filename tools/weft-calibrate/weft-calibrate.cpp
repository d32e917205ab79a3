//===- weft-calibrate.cpp - Measure this machine for the planner ----------===//
//
// mpiexec -n R weft-calibrate [-o FILE]
// mpiexec -n R weft-calibrate --collectives BYTES[,BYTES...]
//
// Describes this machine as the planner's `cpu-local` cluster of R ranks,
// each with the threads and the BLAS kernels a weftc executable gives it.
// One rank alone measures the f32 GEMM rate, the memory bandwidth of a
// streaming add and the cost of one small parallel op (the planner divides
// the cores among ranks that compute at once); every rank measures the
// latency (α) and bandwidth (β) of all-reduces and sends through the
// runtime's communicator, which waits as compiled programs wait. Writes the
// JSON description (default $WEFT_CPU_LOCAL or ~/.cache/weft/
// cpu-local.json) that `--cluster cpu-local` reads. Launch it as weft-run
// launches a model (bound to cores when ranks outnumber them).
//
// With --collectives it measures instead what the planner predicts with
// `weft-plan --collective-times`: an all-reduce and an all-gather of each
// size over every rank and a send from the first rank to the last, one
// JSON line each, so that a cost model can be checked against a network
// (utils/multihost.sh). With --grad-sync it measures the all-reduce by
// each of the runtime's gradient algorithms instead (weftc --grad-sync),
// after checking that each sums right.
//
//===----------------------------------------------------------------------===//

#include "weft/runtime/Blas.h"
#include "weft/runtime/Collectives.h"

#include <cblas.h>
#include <mpi.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

extern "C" void openblas_set_num_threads(int threads);

namespace {

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Runs `work` until `seconds` have passed (at least twice); seconds per run.
template <typename F> double timePerRun(F work, double seconds) {
  work(); // warm up
  int runs = 0;
  double start = now(), elapsed = 0;
  do {
    work();
    ++runs;
    elapsed = now() - start;
  } while (elapsed < seconds || runs < 2);
  return elapsed / runs;
}

/// A barrier whose waiting ranks sleep instead of spinning, so that the
/// ranks still measuring keep the cores.
void barrierWithoutSpinning() {
  MPI_Request request;
  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  for (int done = 0; !done;) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (!done)
      usleep(1000);
  }
}

/// A measurement rank 0 makes while the others sleep: what one rank gets
/// alone, with its threads. The planner divides the cores among ranks
/// that work at once itself.
template <typename F> double alone(int rank, F measure) {
  double value = rank == 0 ? measure() : 0;
  barrierWithoutSpinning();
  MPI_Bcast(&value, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return value;
}

/// Seconds of one of `rounds` calls of the collective `run`, on the rank
/// that took longest; the ranks start together.
template <typename F>
double slowestRank(weft::runtime::Communicator &comm, int rounds, F run) {
  double seconds = 0;
  comm.allReduce(&seconds, 1, WEFT_F64, weft::runtime::ReduceOp::Sum);
  double start = now();
  for (int i = 0; i < rounds; ++i)
    run();
  seconds = (now() - start) / rounds;
  comm.allReduce(&seconds, 1, WEFT_F64, weft::runtime::ReduceOp::Max);
  return seconds;
}

/// Seconds of one all-reduce of `bytes` over every rank: collectives are
/// what the ranks of a plan wait on, and on ranks that share cores they
/// cost what the scheduler makes them cost, which a ping-pong between two
/// ranks does not see. It goes through the runtime's communicator, so that
/// it waits as compiled programs wait.
double allReduceTime(weft::runtime::Communicator &comm, size_t bytes,
                     int rounds) {
  std::vector<float> data(std::max<size_t>(bytes / 4, 1), 1.0f);
  return slowestRank(comm, rounds, [&] {
    comm.allReduce(data.data(), data.size(), WEFT_F32,
                   weft::runtime::ReduceOp::Sum);
  });
}

/// Seconds of one all-reduce of `bytes` by `sync`'s algorithm, after one
/// whose sums are checked: small integers, exact in any order. False with
/// `error` set when a sum is wrong.
bool gradientSyncTime(weft::runtime::Communicator &comm,
                      weft::runtime::GradientSync &sync, size_t bytes,
                      int rounds, double &seconds, std::string &error) {
  size_t count = std::max<size_t>(bytes / 4, 1);
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i)
    data[i] = float((comm.rank() + 1) * (i % 7 + 1));
  sync.allReduce(comm, data.data(), count, WEFT_F32);
  double ranks = comm.size();
  int64_t wrong = 0;
  for (size_t i = 0; i < count; ++i)
    if (data[i] != float(ranks * (ranks + 1) / 2 * (i % 7 + 1)) && !wrong++)
      error = "element " + std::to_string(i) + " of the all-reduce of " +
              std::to_string(count) + " floats is " + std::to_string(data[i]);
  comm.allReduce(&wrong, 1, WEFT_I64, weft::runtime::ReduceOp::Max);
  if (wrong)
    return false;
  seconds = slowestRank(comm, rounds, [&] {
    sync.allReduce(comm, data.data(), count, WEFT_F32);
  });
  return true;
}

/// Seconds of one all-gather whose gathered result is `bytes` (rounded to
/// whole floats per rank), over every rank.
double allGatherTime(weft::runtime::Communicator &comm, size_t bytes,
                     int rounds) {
  size_t count = std::max<size_t>(bytes / 4 / size_t(comm.size()), 1);
  std::vector<float> piece(count, 1.0f), gathered(count * comm.size());
  return slowestRank(comm, rounds, [&] {
    comm.allGather(piece.data(), gathered.data(), count, WEFT_F32);
  });
}

/// Seconds of one message of `bytes` from the first rank to the last (half
/// a ping-pong); the other ranks wait without spinning.
double sendTime(weft::runtime::Communicator &comm, size_t bytes, int rounds) {
  int first = 0, last = comm.size() - 1;
  std::vector<char> message(std::max<size_t>(bytes, 1));
  double seconds = 0;
  comm.allReduce(&seconds, 1, WEFT_F64, weft::runtime::ReduceOp::Sum);
  if (comm.rank() == first || comm.rank() == last) {
    int peer = comm.rank() == first ? last : first;
    double start = now();
    for (int i = 0; i < rounds; ++i) {
      if (comm.rank() == first) {
        comm.send(message.data(), message.size(), WEFT_BOOL, peer, 0);
        comm.recv(message.data(), message.size(), WEFT_BOOL, peer, 0);
      } else {
        comm.recv(message.data(), message.size(), WEFT_BOOL, peer, 0);
        comm.send(message.data(), message.size(), WEFT_BOOL, peer, 0);
      }
    }
    seconds = (now() - start) / (2.0 * rounds);
  }
  barrierWithoutSpinning();
  comm.allReduce(&seconds, 1, WEFT_F64, weft::runtime::ReduceOp::Max);
  return seconds;
}

/// Enough rounds of a collective of `bytes` for about a tenth of a second
/// on a 100 MB/s link, and at least three.
int roundsFor(size_t bytes) {
  return int(std::clamp<size_t>((size_t(10) << 20) / std::max<size_t>(bytes, 1),
                                3, 300));
}

/// The --collectives mode: one JSON line per collective and size.
void measureCollectives(weft::runtime::Communicator &comm,
                        const std::vector<size_t> &sizes) {
  for (size_t bytes : sizes) {
    int rounds = roundsFor(bytes);
    std::pair<const char *, double> measured[] = {
        {"all-reduce", allReduceTime(comm, bytes, rounds)},
        {"all-gather", allGatherTime(comm, bytes, rounds)},
        {"send-recv", sendTime(comm, bytes, rounds)}};
    if (comm.rank() == 0)
      for (auto [collective, seconds] : measured)
        printf("{\"collective\": \"%s\", \"bytes\": %zu, \"ranks\": %d, "
               "\"seconds\": %.6g}\n",
               collective, bytes, comm.size(), seconds);
  }
  fflush(stdout);
}

/// --collectives with --grad-sync: the all-reduce of each size by each
/// algorithm, its sums checked, one JSON line each. False when a sum was
/// wrong (rank 0 has said which).
bool measureGradientSyncs(weft::runtime::Communicator &comm,
                          const std::vector<weft::runtime::GradSync> &syncs,
                          const std::vector<size_t> &sizes) {
  weft::runtime::GradientSync sync;
  for (weft::runtime::GradSync algorithm : syncs) {
    sync.choose(algorithm, 1);
    for (size_t bytes : sizes) {
      double seconds = 0;
      std::string error;
      if (!gradientSyncTime(comm, sync, bytes, roundsFor(bytes), seconds,
                            error)) {
        if (!error.empty())
          fprintf(stderr,
                  "weft-calibrate: error: rank %d: --grad-sync %s: %s\n",
                  comm.rank(), weft::runtime::gradSyncName(algorithm),
                  error.c_str());
        return false;
      }
      if (comm.rank() == 0)
        printf("{\"collective\": \"all-reduce\", \"algorithm\": \"%s\", "
               "\"bytes\": %zu, \"ranks\": %d, \"seconds\": %.6g}\n",
               weft::runtime::gradSyncName(algorithm), bytes, comm.size(),
               seconds);
    }
  }
  fflush(stdout);
  return true;
}

/// "4,65536,1048576" as sizes; false on anything but positive integers.
bool parseSizes(const std::string &text, std::vector<size_t> &sizes) {
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = std::min(text.find(',', start), text.size());
    std::string item = text.substr(start, end - start);
    char *rest = nullptr;
    errno = 0;
    unsigned long long value = strtoull(item.c_str(), &rest, 10);
    if (item.empty() || *rest || errno || value == 0 || value > (1ull << 34) ||
        item[0] == '-')
      return false;
    sizes.push_back(size_t(value));
    start = end + 1;
  }
  return !sizes.empty();
}

std::string defaultOutput() {
  if (const char *path = std::getenv("WEFT_CPU_LOCAL"))
    return path;
  std::string dir;
  if (const char *cache = std::getenv("XDG_CACHE_HOME"))
    dir = cache;
  else if (const char *home = std::getenv("HOME"))
    dir = std::string(home) + "/.cache";
  else
    dir = ".";
  mkdir(dir.c_str(), 0755);
  dir += "/weft";
  mkdir(dir.c_str(), 0755);
  return dir + "/cpu-local.json";
}

std::string cpuModel() {
  std::ifstream info("/proc/cpuinfo");
  std::string line;
  while (std::getline(info, line))
    if (line.rfind("model name", 0) == 0)
      return line.substr(line.find(':') + 2);
  return "CPU";
}

} // namespace

int main(int argc, char **argv) {
  weft::runtime::selectBlasKernels(argv);
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  std::string worldError;
  std::unique_ptr<weft::runtime::World> world = weft::runtime::startWorld(
      argc, argv, weft::runtime::MeshShape{{"ranks"}, {ranks}}, worldError);
  if (!world) {
    if (rank == 0)
      fprintf(stderr, "weft-calibrate: error: %s\n", worldError.c_str());
    MPI_Finalize();
    return 1;
  }
  std::string output;
  std::vector<size_t> collectiveSizes;
  std::vector<weft::runtime::GradSync> gradientSyncs;
  for (int i = 1; i < argc; ++i) {
    std::string error;
    if (!strcmp(argv[i], "-o") && i + 1 < argc) {
      output = argv[++i];
    } else if (!strcmp(argv[i], "--collectives") && i + 1 < argc) {
      if (!parseSizes(argv[++i], collectiveSizes))
        error = std::string("--collectives takes sizes in bytes, e.g. "
                            "4,65536, not '") +
                argv[i] + "'";
    } else if (!strcmp(argv[i], "--grad-sync") && i + 1 < argc) {
      std::string list = argv[++i];
      for (size_t start = 0; start <= list.size();) {
        size_t end = std::min(list.find(',', start), list.size());
        std::string name = list.substr(start, end - start);
        std::optional<weft::runtime::GradSync> sync =
            weft::runtime::parseGradSync(name);
        if (!sync) {
          error = "--grad-sync takes library, ring, tree, ps or "
                  "hierarchical, not '" +
                  name + "'";
          break;
        }
        gradientSyncs.push_back(*sync);
        start = end + 1;
      }
    } else {
      error = std::string("unknown argument '") + argv[i] +
              "' (usage: mpiexec -n R weft-calibrate [-o FILE | "
              "--collectives BYTES,... [--grad-sync ALGORITHM,...]])";
    }
    if (!error.empty()) {
      if (rank == 0)
        fprintf(stderr, "weft-calibrate: error: %s\n", error.c_str());
      world.reset();
      weft::runtime::stopWorld();
      return 1;
    }
  }
  if (!collectiveSizes.empty()) {
    if (ranks < 2) {
      if (rank == 0)
        fprintf(stderr, "weft-calibrate: error: --collectives needs at least "
                        "2 ranks\n");
      world.reset();
      weft::runtime::stopWorld();
      return 1;
    }
    bool right = true;
    if (gradientSyncs.empty())
      measureCollectives(world->group(1), collectiveSizes);
    else
      right =
          measureGradientSyncs(world->group(1), gradientSyncs, collectiveSizes);
    world.reset();
    weft::runtime::stopWorld();
    return right ? 0 : 1;
  }
  if (!gradientSyncs.empty()) {
    if (rank == 0)
      fprintf(stderr, "weft-calibrate: error: --grad-sync measures the "
                      "all-reduces of --collectives: add it\n");
    world.reset();
    weft::runtime::stopWorld();
    return 1;
  }
  if (output.empty())
    output = defaultOutput();

  // The threads a rank of a weftc executable uses (see RunnerMain.cpp).
  int cores = int(std::thread::hardware_concurrency());
  int threads = std::max(1, cores / ranks);
  openblas_set_num_threads(threads);
  omp_set_num_threads(threads);

  // GEMM: the best of a few shapes a transformer has.
  double gemmRate = alone(rank, [&] {
    double best = 0;
    for (auto [m, n, k] :
         {std::array<int, 3>{512, 512, 512}, std::array<int, 3>{512, 512, 128},
          std::array<int, 3>{1024, 1024, 1024}}) {
      std::vector<float> a(size_t(m) * k, 1.0f), b(size_t(k) * n, 0.5f),
          c(size_t(m) * n);
      double seconds = timePerRun(
          [&] {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k,
                        1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
          },
          0.3);
      best = std::max(best, 2.0 * m * n * k / seconds);
    }
    return best;
  });

  // Memory bandwidth: z = x + y over arrays larger than the caches.
  const size_t elements = size_t(16) << 20;
  std::vector<float> x(elements, 1.0f), y(elements, 2.0f), z(elements);
  double bandwidth = alone(rank, [&] {
    double seconds = timePerRun(
        [&] {
#pragma omp parallel for
          for (size_t i = 0; i < elements; ++i)
            z[i] = x[i] + y[i];
        },
        0.5);
    return 3.0 * 4 * elements / seconds;
  });

  // The same add over arrays that fit in half of a core's L2 cache.
  long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (l2 <= 0)
    l2 = 1 << 20;
  const size_t cached = size_t(l2) / 2 / 12;
  double cacheBandwidth = alone(rank, [&] {
    double seconds = timePerRun(
        [&] {
          for (int repeat = 0; repeat < 100; ++repeat) {
#pragma omp parallel for
            for (size_t i = 0; i < cached; ++i)
              z[i] = x[i] + y[i];
          }
        },
        0.3);
    return 100 * 3.0 * 4 * cached / seconds;
  });

  // One small op: a parallel loop over a few thousand elements.
  const size_t small = 4096;
  double overhead = alone(rank, [&] {
    double seconds = timePerRun(
        [&] {
          for (int repeat = 0; repeat < 100; ++repeat) {
#pragma omp parallel for
            for (size_t i = 0; i < small; ++i)
              z[i] = x[i] * y[i];
          }
        },
        0.3);
    return std::max(0.0, seconds / 100 - 3.0 * 4 * small / bandwidth);
  });

  // A send between pipeline stages through the runtime's communicator:
  // half a ping-pong between rank pairs, all pairs at once.
  double sendLatency = 0;
  if (ranks > 1) {
    weft::runtime::Communicator &everyone = world->group(1);
    int peer = rank ^ 1;
    char byte = 0;
    const int rounds = 100;
    MPI_Barrier(MPI_COMM_WORLD);
    double start = now();
    for (int i = 0; peer < ranks && i < rounds; ++i) {
      if (rank % 2 == 0) {
        everyone.send(&byte, 1, WEFT_BOOL, peer, 0);
        everyone.recv(&byte, 1, WEFT_BOOL, peer, 0);
      } else {
        everyone.recv(&byte, 1, WEFT_BOOL, peer, 0);
        everyone.send(&byte, 1, WEFT_BOOL, peer, 0);
      }
    }
    double oneWay = peer < ranks ? (now() - start) / (2.0 * rounds) : 0;
    MPI_Allreduce(&oneWay, &sendLatency, 1, MPI_DOUBLE, MPI_MAX,
                  MPI_COMM_WORLD);
  }

  // MPI: α and β fitted to the ring all-reduce the planner prices,
  // 2(n-1) α + 2(n-1)/n S/β, from a 4-byte and an 8 MiB all-reduce over
  // every rank (all busy), and α of a pair while the others sleep.
  double alpha = 0, beta = 1e12, pairAlpha = 0;
  if (ranks > 1) {
    double n = ranks, bytes = double(size_t(8) << 20);
    weft::runtime::Communicator &everyone = world->group(1);
    double small = allReduceTime(everyone, 4, 300);
    double large = allReduceTime(everyone, size_t(bytes), 5);
    alpha = small / (2 * (n - 1));
    beta = 2 * (n - 1) / n * bytes / std::max(1e-9, large - small);
    MPI_Comm pair;
    MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : MPI_UNDEFINED, rank, &pair);
    if (rank < 2) {
      std::vector<float> in(1, 1.0f), out(1);
      MPI_Barrier(pair);
      const int rounds = 300;
      double start = now();
      for (int i = 0; i < rounds; ++i)
        MPI_Allreduce(in.data(), out.data(), 1, MPI_FLOAT, MPI_SUM, pair);
      pairAlpha = (now() - start) / rounds / 2;
      MPI_Comm_free(&pair);
    }
    // Ranks 2.. wait without spinning while the pair measures.
    barrierWithoutSpinning();
    MPI_Bcast(&pairAlpha, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  }

  if (rank == 0) {
    long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
    double memoryGb = double(pages) * pageSize / ranks / 1e9;
    FILE *out = fopen(output.c_str(), "w");
    if (!out) {
      fprintf(stderr, "weft-calibrate: error: cannot write '%s'\n",
              output.c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    fprintf(out,
            "{\"name\": \"cpu-local\", \"nodes\": 1, \"gpus_per_node\": %d,\n"
            " \"cores_per_node\": %d, \"threads_per_rank\": %d,\n"
            " \"gpu\": {\"model\": \"%s (%d thread(s) per rank)\",\n"
            "         \"peak_bf16_tflops\": %.6g, \"peak_fp32_tflops\": %.6g,\n"
            "         \"memory_gb\": %.4g, \"memory_bandwidth_gbps\": %.4g,\n"
            "         \"op_overhead_us\": %.4g, \"cache_mb\": %.4g,\n"
            "         \"cache_bandwidth_gbps\": %.4g},\n"
            " \"send_latency_us\": %.4g, \"contended_latency_us\": %.4g,\n"
            " \"intra_node\": {\"bandwidth_gbps\": %.4g, \"latency_us\": "
            "%.4g},\n"
            " \"inter_node\": {\"fabric\": \"infiniband\", \"nics_per_node\": "
            "%d, \"nic_bandwidth_gbps\": %.4g, \"latency_us\": %.4g, "
            "\"rail_optimized\": true},\n"
            " \"overlap_gradient_reduction\": false,\n"
            " \"efficiency\": {\"contraction\": 1, \"memory\": 1, "
            "\"elementwise\": 1, "
            "\"usable_memory\": 0.8}}\n",
            ranks, cores, threads, cpuModel().c_str(), threads, gemmRate / 1e12,
            gemmRate / 1e12, memoryGb, bandwidth / 1e9, overhead * 1e6,
            l2 / 1e6, cacheBandwidth / 1e9, sendLatency * 1e6,
            ranks > cores ? alpha * 1e6 : 0.0, beta / 1e9, pairAlpha * 1e6,
            ranks, beta / 1e9, pairAlpha * 1e6);
    fclose(out);
    printf("weft-calibrate: %d rank(s) on %d core(s), %d thread(s) each: one "
           "rank alone: GEMM %.1f GFLOP/s, memory %.1f GB/s (%.1f GB/s in "
           "cache), op overhead %.1f us; send latency %.1f us; all-reduce "
           "latency %.1f us (a pair), %.1f us (all ranks), bandwidth %.2f "
           "GB/s per rank\nwrote %s\n",
           ranks, cores, threads, gemmRate / 1e9, bandwidth / 1e9,
           cacheBandwidth / 1e9, overhead * 1e6, sendLatency * 1e6,
           pairAlpha * 1e6, alpha * 1e6, beta / 1e9, output.c_str());
  }
  world.reset();
  weft::runtime::stopWorld();
  return 0;
}

//===- MpiWorld.cpp - The ranks of a partitioned model over MPI -----------===//
//
// Linked into partitioned executables only (libweft_runtime_mpi.a), where it
// replaces the one-rank startWorld. It works with any MPI: the compiled code
// calls the runtime, never MPI itself. One communicator per group of mesh
// axes is split from MPI_COMM_WORLD at start-up.
//
//===----------------------------------------------------------------------===//

#include "weft/runtime/Collectives.h"

#include "core/Bf16.h"

#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace weft::runtime {
namespace {

/// MPI_Abort on a rank that has just written its error. MPICH's mpiexec
/// stops forwarding the ranks' output once one aborts, and under load the
/// error could be lost: the proxy gets a moment to forward it first.
[[noreturn]] void abortAfterError() {
  fflush(stderr);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  MPI_Abort(MPI_COMM_WORLD, 1);
  abort();
}

[[noreturn]] void mpiFailed(const char *what, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  fprintf(stderr, "weft: rank %d: %s failed: %.*s\n", rank, what, length, text);
  abortAfterError();
}

void check(int code, const char *what) {
  if (code != MPI_SUCCESS)
    mpiFailed(what, code);
}

MPI_Datatype mpiType(weft_dtype dtype, bool reducing) {
  switch (dtype) {
  case WEFT_F32:
    return MPI_FLOAT;
  case WEFT_F64:
    return MPI_DOUBLE;
  case WEFT_I64:
    return MPI_INT64_T;
  case WEFT_I32:
    return MPI_INT32_T;
  case WEFT_BOOL:
    if (!reducing)
      return MPI_UINT8_T;
    break;
  case WEFT_BF16:
    return MPI_UINT16_T; // reduced by the bf16 ops below
  case WEFT_F16:
    if (!reducing)
      return MPI_UINT16_T;
    break;
  }
  fprintf(stderr, "weft: a %s reduction over MPI is not supported\n",
          weft_dtype_name(dtype));
  abortAfterError();
}

/// MPI has no bf16: its reductions combine in float, one rounding each.
template <ReduceOp kind>
void reduceBf16(void *in, void *inout, int *count, MPI_Datatype *) {
  const uint16_t *a = static_cast<const uint16_t *>(in);
  uint16_t *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *count; ++i) {
    float x = bf16ToFloat(a[i]), y = bf16ToFloat(b[i]);
    b[i] = floatToBf16(kind == ReduceOp::Sum   ? x + y
                       : kind == ReduceOp::Max ? std::max(x, y)
                                               : std::min(x, y));
  }
}

MPI_Op bf16Op(ReduceOp op) {
  static MPI_Op ops[3] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
  int index = int(op);
  if (ops[index] == MPI_OP_NULL) {
    MPI_User_function *function =
        op == ReduceOp::Sum   ? reduceBf16<ReduceOp::Sum>
        : op == ReduceOp::Max ? reduceBf16<ReduceOp::Max>
                              : reduceBf16<ReduceOp::Min>;
    check(MPI_Op_create(function, /*commute=*/1, &ops[index]), "MPI_Op_create");
  }
  return ops[index];
}

MPI_Op mpiOp(ReduceOp op, weft_dtype dtype) {
  if (dtype == WEFT_BF16)
    return bf16Op(op);
  switch (op) {
  case ReduceOp::Sum:
    return MPI_SUM;
  case ReduceOp::Max:
    return MPI_MAX;
  case ReduceOp::Min:
    return MPI_MIN;
  }
  return MPI_SUM;
}

/// More ranks than cores on this rank's node.
bool ranksShareCores = false;

class MpiCommunicator final : public Communicator {
public:
  /// `axes` names the mesh axes the communicator spans, for messages.
  MpiCommunicator(MPI_Comm comm, std::string axes)
      : comm(comm), axes(std::move(axes)) {
    MPI_Comm_rank(comm, &myRank);
    MPI_Comm_size(comm, &mySize);
  }
  ~MpiCommunicator() override {
    for (Pending &pending : sending)
      MPI_Wait(&pending.request, MPI_STATUS_IGNORE);
    if (comm != MPI_COMM_WORLD)
      MPI_Comm_free(&comm);
  }
  int rank() const override { return myRank; }
  int size() const override { return mySize; }

  void allReduce(void *data, size_t count, weft_dtype dtype,
                 ReduceOp op) override {
    MPI_Request request;
    check(MPI_Iallreduce(MPI_IN_PLACE, data, int(count), mpiType(dtype, true),
                         mpiOp(op, dtype), comm, &request),
          "MPI_Iallreduce");
    await(request, "all_reduce", count * weft_dtype_size(dtype));
  }
  void allGather(const void *send, void *recv, size_t count,
                 weft_dtype dtype) override {
    MPI_Datatype type = mpiType(dtype, false);
    MPI_Request request;
    check(MPI_Iallgather(send, int(count), type, recv, int(count), type, comm,
                         &request),
          "MPI_Iallgather");
    await(request, "all_gather", count * weft_dtype_size(dtype));
  }
  void reduceScatter(const void *send, void *recv, size_t count,
                     weft_dtype dtype, ReduceOp op) override {
    MPI_Request request;
    check(MPI_Ireduce_scatter_block(send, recv, int(count),
                                    mpiType(dtype, true), mpiOp(op, dtype),
                                    comm, &request),
          "MPI_Ireduce_scatter_block");
    await(request, "reduce_scatter", count * weft_dtype_size(dtype));
  }
  void allToAll(const void *send, void *recv, size_t count,
                weft_dtype dtype) override {
    MPI_Datatype type = mpiType(dtype, false);
    MPI_Request request;
    check(MPI_Ialltoall(send, int(count), type, recv, int(count), type, comm,
                        &request),
          "MPI_Ialltoall");
    await(request, "all_to_all", count * weft_dtype_size(dtype));
  }
  void broadcast(void *data, size_t count, weft_dtype dtype,
                 int root) override {
    MPI_Request request;
    check(MPI_Ibcast(data, int(count), mpiType(dtype, false), root, comm,
                     &request),
          "MPI_Ibcast");
    await(request, "broadcast", count * weft_dtype_size(dtype));
  }
  void send(const void *data, size_t count, weft_dtype dtype, int peer,
            int tag) override {
    finishSends();
    size_t bytes = count * weft_dtype_size(dtype);
    sending.push_back(
        {std::vector<char>(static_cast<const char *>(data),
                           static_cast<const char *>(data) + bytes),
         MPI_REQUEST_NULL});
    Pending &pending = sending.back();
    check(MPI_Isend(pending.data.data(), int(count), mpiType(dtype, false),
                    peer, tag, comm, &pending.request),
          "MPI_Isend");
  }
  void recv(void *data, size_t count, weft_dtype dtype, int peer,
            int tag) override {
    finishSends();
    MPI_Request request;
    check(MPI_Irecv(data, int(count), mpiType(dtype, false), peer, tag, comm,
                    &request),
          "MPI_Irecv");
    await(request, "receive", count * weft_dtype_size(dtype), peer);
  }
  std::unique_ptr<Communicator> splitByNode(int ranksPerNode) override {
    MPI_Comm node;
    if (ranksPerNode > 0)
      check(MPI_Comm_split(comm, myRank / ranksPerNode, myRank, &node),
            "MPI_Comm_split");
    else
      check(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, myRank,
                                MPI_INFO_NULL, &node),
            "MPI_Comm_split_type");
    return adopt(node, axes + " inside a node");
  }
  std::unique_ptr<Communicator> split(int color, int key) override {
    MPI_Comm part;
    check(MPI_Comm_split(comm, color, key, &part), "MPI_Comm_split");
    return adopt(part, axes + " across nodes");
  }

private:
  static std::unique_ptr<Communicator> adopt(MPI_Comm comm, std::string axes) {
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    return std::make_unique<MpiCommunicator>(comm, std::move(axes));
  }
  /// Waits for a collective, or with `peer` a receive from it, for at most
  /// collectiveTimeout(). A pipeline stage waits for its neighbour for a
  /// whole bubble: it sleeps between polls instead of spinning, leaving the
  /// core (or the hyperthread's sibling) to the ranks that compute.
  /// (Yielding instead measured slower for pipelines on ranks that share
  /// cores.) A collective yields between polls where ranks share cores: a
  /// spinning rank takes the core from the rank whose data it waits for.
  void await(MPI_Request &request, const char *what, size_t bytes,
             int peer = -1) {
    auto start = std::chrono::steady_clock::now();
    for (unsigned polls = 1;; ++polls) {
      int done = 0;
      check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done)
        return;
      if (peer >= 0) {
        finishSends();
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      } else if (ranksShareCores) {
        sched_yield();
      }
      if (polls % 256)
        continue;
      double waited = std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - start)
                          .count();
      if (waited > collectiveTimeout())
        stalled(what, bytes, peer, waited);
    }
  }

  /// The watchdog's verdict: one line naming this rank and what it waited
  /// for, then every rank is stopped.
  [[noreturn]] void stalled(const char *what, size_t bytes, int peer,
                            double waited) {
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::string from = "over " + axes;
    if (peer >= 0) {
      MPI_Group group, world;
      int worldPeer = -1;
      MPI_Comm_group(comm, &group);
      MPI_Comm_group(MPI_COMM_WORLD, &world);
      MPI_Group_translate_ranks(group, 1, &peer, world, &worldPeer);
      from = "from rank " + std::to_string(worldPeer) + " (over " + axes + ")";
    }
    std::string step = currentStep() >= 0
                           ? " in step " + std::to_string(currentStep())
                           : std::string();
    char line[512];
    snprintf(line, sizeof(line),
             "error: rank %d: %s of %zu bytes %s%s waited %.0f s, past the "
             "collective timeout (--collective-timeout, "
             "WEFT_COLLECTIVE_TIMEOUT): a rank it needs stopped or died; "
             "stopping every rank",
             rank, what, bytes, from.c_str(), step.c_str(), waited);
    reportRankError(rank, line);
    abortAfterError();
  }
  /// A send in flight and the copy of its data.
  struct Pending {
    std::vector<char> data;
    MPI_Request request;
  };
  /// Frees the copies of the sends that have completed.
  void finishSends() {
    for (auto it = sending.begin(); it != sending.end();) {
      int done = 0;
      check(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      it = done ? sending.erase(it) : std::next(it);
    }
  }
  std::list<Pending> sending;
  MPI_Comm comm;
  std::string axes;
  int myRank = 0, mySize = 1;
};

} // namespace

std::unique_ptr<World> startWorld(int &argc, char **&argv,
                                  const MeshShape &mesh, std::string &error) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != mesh.numRanks()) {
    error = "the world has " + std::to_string(size) +
            " ranks but the model was partitioned for mesh " + mesh.describe() +
            " (" + std::to_string(mesh.numRanks()) + " ranks)";
    return nullptr;
  }
  MPI_Comm node;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank,
                            MPI_INFO_NULL, &node),
        "MPI_Comm_split_type");
  int ranksOnNode = 1;
  MPI_Comm_size(node, &ranksOnNode);
  MPI_Comm_free(&node);
  // MPI counts the ranks of one host; containers or network namespaces on
  // one machine are hosts to it that still share the cores (WEFT_SHARED_CORES).
  const char *shared = std::getenv("WEFT_SHARED_CORES");
  ranksShareCores =
      shared && *shared
          ? std::string(shared) != "0"
          : ranksOnNode > int(std::thread::hardware_concurrency());
  MeshShape shape = mesh;
  auto factory = [shape, rank](const std::vector<int> &axes) {
    // Ranks that agree on every other axis form one group; within it they
    // are ordered by their coordinates on `axes`, major first.
    std::vector<int64_t> coords = shape.coordinates(rank);
    int64_t color = 0, key = 0;
    for (size_t axis = 0; axis < shape.sizes.size(); ++axis) {
      bool inGroup = false;
      for (int a : axes)
        inGroup |= a == int(axis);
      if (!inGroup)
        color = color * shape.sizes[axis] + coords[axis];
    }
    for (int axis : axes)
      key = key * shape.sizes[axis] + coords[axis];
    MPI_Comm comm;
    check(MPI_Comm_split(MPI_COMM_WORLD, int(color), int(key), &comm),
          "MPI_Comm_split");
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    std::string names;
    for (int axis : axes)
      names += (names.empty() ? "" : ",") + shape.names[axis];
    return std::unique_ptr<Communicator>(new MpiCommunicator(comm, names));
  };
  return std::make_unique<World>(mesh, rank, factory);
}

std::unique_ptr<Communicator> worldCommunicator() {
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, "every rank");
}

void stopWorld() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return;
  // UCX 1.13's TCP transport (MPICH's netmod between hosts) can deadlock in
  // MPI_Finalize, openucx/ucx#8738: a rank waits for a peer to acknowledge
  // the closing of their connection while the peer, done closing its own,
  // waits in the launcher's barrier. By now the run is over and everything
  // it writes is written, so past a deadline the rank leaves, saying so;
  // with a deadline of 0 every rank leaves without finalizing once all
  // are here (Hydra can take a rank that leaves so before its host's
  // others for a failed one: docs/reliability.md).
  double deadline = kDefaultFinalizeTimeout;
  if (const char *value = std::getenv("WEFT_FINALIZE_TIMEOUT"))
    deadline = std::max(0.0, std::atof(value));
  if (deadline == 0) {
    MPI_Barrier(MPI_COMM_WORLD);
    return;
  }
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  fflush(nullptr);
  std::thread([rank, deadline] {
    std::this_thread::sleep_for(std::chrono::duration<double>(deadline));
    fprintf(stderr,
            "warning: rank %d: MPI_Finalize did not return in %.0f s "
            "(WEFT_FINALIZE_TIMEOUT); the run had ended, so the rank exits "
            "without it\n",
            rank, deadline);
    fflush(stderr);
    _exit(0);
  }).detach();
  MPI_Finalize();
}

void abortWorld() { abortAfterError(); }

} // namespace weft::runtime

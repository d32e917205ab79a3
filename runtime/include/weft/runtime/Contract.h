//===- Contract.h - What the compiler and the runtime agree on --*- C++ -*-===//
//
// One definition of every fact both sides of a Weft executable rely on: the
// element type names, the runtime functions compiled code calls, the
// manifest (versioned JSON: one writer, one reader) and the weights file
// header with its hash. The compiler writes them, the runtime reads them,
// and Python reads the manifest an executable prints (--print-manifest)
// with the same schema. This library needs the C++ library only.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_CONTRACT_H
#define WEFT_RUNTIME_CONTRACT_H

#include "weft/runtime/CApi.h"
#include "weft/runtime/ShardLayout.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace weft::runtime {

/// The weft_dtype named `name` ("f32", "bf16", "i1", ...; weft_dtype_name).
std::optional<weft_dtype> parseDtype(const std::string &name);

//===----------------------------------------------------------------------===//
// The functions compiled code calls
//===----------------------------------------------------------------------===//

/// `weft_collective_<dtype>(in, out, kind, axes_mask, dim, concat_dim)`:
/// a collective over the group of mesh axes in `axes_mask` (bit a: axis a).
constexpr const char *kCollectiveFunctionPrefix = "weft_collective_";
enum class CollectiveKind : int64_t {
  AllReduce = 0,     // sums; dim and concat_dim unused
  AllGather = 1,     // dim: the tensor dim gathered along
  ReduceScatter = 2, // dim: the tensor dim scattered along
  AllToAll = 3,      // dim: split along, concat_dim: concatenated along
  Shift = 4,         // dim: offset; position p sends to p + dim (mod size)
};
/// `weft_send_<dtype>(in, out, axes_mask, peer, tag)` sends `in` to `peer`
/// (its position along the group's axes) and copies it to `out`;
/// `weft_recv_<dtype>(in, out, axes_mask, peer, tag)` receives into `out`.
/// Tags keep a pipeline's messages between two ranks apart.
/// The tag of a shift's messages (pipeline tags count up from 0).
constexpr int kShiftTag = 32767;
constexpr const char *kSendFunctionPrefix = "weft_send_";
constexpr const char *kRecvFunctionPrefix = "weft_recv_";
/// `weft_mesh_coordinate(axis) -> i64`: this rank's coordinate on `axis`.
constexpr const char *kMeshCoordinateFunction = "weft_mesh_coordinate";

/// The GEMM prefix of each backend (weft-contractions-to-blas{callee}):
/// OpenBLAS on the CPU, cuBLASLt on a GPU, the CPU's under the emulation.
constexpr const char *kCpuGemm = "weft_gemm";
constexpr const char *kCudaGemm = "weft_cuda_gemm";
constexpr const char *kEmulatedGemm = "weft_emulated_gemm";
/// The fused attention's prefix (weft-attention-to-library{callee}), then
/// kAttentionForwardSuffix or kAttentionBackwardSuffix and the element type:
/// cuDNN's SDPA graphs on a GPU, a CPU reference of the same contract under
/// the emulation.
constexpr const char *kCudaAttention = "weft_cuda_attention";
constexpr const char *kEmulatedAttention = "weft_emulated_attention";
/// `mark(id)`: the launch or library call the kernel report numbered `id`
/// starts here (weft-gpu-mark-launches{callee}, weft-gpu-emulate-launches):
/// $WEFT_PROFILE_LAUNCHES times it, the emulation counts its bytes.
constexpr const char *kCudaLaunchMark = "weft_cuda_launch";
constexpr const char *kEmulatedLaunchMark = "weft_emulation_launch";
/// `weft_emulation_launch_part()`: the next part of a merged launch starts.
constexpr const char *kEmulatedLaunchPartMark = "weft_emulation_launch_part";
/// `weft_emulation_check_access(base, address, bytes, is_write, kernel)`
/// and `weft_emulation_check_alignment(address, alignment, kernel)`: an
/// emulated kernel's access, and a buffer alignment it states, checked
/// against the emulated device's allocations.
constexpr const char *kEmulatedCheckAccess = "weft_emulation_check_access";
constexpr const char *kEmulatedCheckAlignment =
    "weft_emulation_check_alignment";
/// `weft_emulation_device_constant(address, bytes)`, before a launch whose
/// kernel reads a constant of its own (weft-gpu-device-memory): the
/// constant is device memory from then on, as the kernel image's data is,
/// and its bytes went to the device once.
constexpr const char *kEmulatedDeviceConstant =
    "weft_emulation_device_constant";
/// `weft_tracing() -> i1`: whether this run writes a trace;
/// `weft_pipeline_mark(kind, chunk, microbatch)`: a pipeline stage's work
/// starts (kind 0: forward, 1: backward, ...; weft-pipeline-cut).
constexpr const char *kTracingFunction = "weft_tracing";
constexpr const char *kPipelineMarkFunction = "weft_pipeline_mark";

/// GEMMs (weft-contractions-to-blas), named with the operands' element type
/// after the target's prefix (`_f32`, `_bf16`, `_f16`; `_bf16_bf16` also
/// writes c in bf16): `gemm(a, b, c, bias, aux, flags)`, each matrix (or
/// batch of them), the bias and aux an unranked memref, computes c = a * b,
/// plus c under kGemmAccumulate, plus the bias under kGemmBias, each sum in
/// f32 and c rounded once. c is written, the bias under kGemmBiasGradient
/// and aux under kGemmGelu.
constexpr unsigned kGemmOperands = 6;
constexpr unsigned kGemmResultOperand = 2;
constexpr unsigned kGemmBiasOperand = 3;
constexpr unsigned kGemmAuxOperand = 4;
constexpr unsigned kGemmFlagsOperand = 5;
/// `flags` (i64): c is read and the product added to it (else c is only
/// written: beta = 0).
constexpr int64_t kGemmAccumulate = 1;
/// f32 inputs may be multiplied as TF32 (10 mantissa bits; f32
/// accumulation) on tensor cores: the user allowed it (weftc
/// --allow-tf32). A runtime without TF32 multiplies in f32; the emulation
/// rounds the inputs to nearest even (cuBLAS does not say how its kernels
/// convert: compare with a tolerance).
constexpr int64_t kGemmTf32 = 2;
/// `bias`, a contiguous vector of c's element type as long as c's last
/// dim, is added to every row of c (cuBLASLt's bias epilogue), which is
/// then row-major (its last dim of stride 1). Without it, `bias` is any
/// memref of c's element type (c itself) and is not read.
constexpr int64_t kGemmBias = 4;
/// Instead, `bias` (the same vector) is written with the sums over k of b
/// (each column of b [k, n] summed in f32 and rounded once to c's element
/// type, the vector's: the bias's gradient where b is the layer's output
/// gradient and c its weight's; cuBLASLt's BGRAD epilogue), for a GEMM of
/// one matrix (no batch dims), c row-major; not with kGemmBias.
constexpr int64_t kGemmBiasGradient = 8;
/// GELU's tanh form on the sum s = a * b (+ bias), in f32 (cuBLASLt's
/// GELU_AUX epilogue): `aux` is written with s rounded, c with gelu(s)
/// rounded (weft/runtime/Gelu.h). For a bf16 c (the `_bf16_bf16` GEMMs) of
/// one matrix, row-major with a multiple of 8 columns, and an aux of c's
/// type and layout; not with kGemmAccumulate or kGemmBiasGradient. Without
/// it or kGemmGeluGradient, `aux` is any memref of c's element type (c
/// itself) and is not touched.
constexpr int64_t kGemmGelu = 16;
/// GELU's (tanh form) gradient (cuBLASLt's DGELU epilogue): c = (a * b) *
/// gelu'(aux), the product in f32, for `aux` the pre-activation kGemmGelu
/// wrote (read, not written); under the same conditions, nor with kGemmBias.
constexpr int64_t kGemmGeluGradient = 32;
/// Whether a GEMM with `flags` writes its operand `index`: c, the bias
/// under kGemmBiasGradient, aux under kGemmGelu.
constexpr bool gemmWrites(int64_t flags, unsigned index) {
  return index == kGemmResultOperand ||
         (index == kGemmBiasOperand && (flags & kGemmBiasGradient)) ||
         (index == kGemmAuxOperand && (flags & kGemmGelu));
}
/// Why a GEMM of `rank`-dim c with `columns` columns (its last dim), rows
/// of stride `rowStride` and an element of `cBytes` bytes may not take the
/// GELU epilogues `flags` asks for, or nullptr: the conditions above, which
/// the compiler checks before it asks and the runtimes check again.
inline const char *geluEpilogueRefusal(int64_t flags, int64_t rank,
                                       int64_t columns, int64_t rowStride,
                                       int64_t cBytes) {
  bool forward = flags & kGemmGelu, backward = flags & kGemmGeluGradient;
  if (!forward && !backward)
    return nullptr;
  if (forward && backward)
    return "asks for GELU and its gradient at once";
  if (cBytes != 2)
    return "needs a bf16 c";
  if (rank != 2)
    return "needs one matrix, not a batch";
  if (columns % 8 != 0 || rowStride != columns)
    return "needs a row-major c whose columns are a multiple of 8";
  if (flags & (kGemmAccumulate | kGemmBiasGradient))
    return "cannot accumulate into c or sum a bias gradient";
  if (backward && (flags & kGemmBias))
    return "of the gradient cannot add a bias";
  return nullptr;
}
/// Why `aux` (its rank, sizes and strides) is not a matrix of c's shape
/// and layout (c a `rank`-dim matrix of `sizes`, rows `rowStride` apart),
/// as the GELU epilogues need, or nullptr.
inline const char *geluAuxRefusal(int64_t rank, const int64_t *sizes,
                                  int64_t rowStride, int64_t auxRank,
                                  const int64_t *auxSizes,
                                  const int64_t *auxStrides) {
  if (auxRank != 2 || rank != 2 || auxSizes[0] != sizes[0] ||
      auxSizes[1] != sizes[1] || auxStrides[0] != rowStride ||
      auxStrides[1] != 1)
    return "needs an aux matrix of c's shape and layout";
  return nullptr;
}

/// Fused attention (weft-attention-to-library), named with the element
/// type after them (`<prefix>_forward_bf16`, `<prefix>_backward_bf16`;
/// the prefix is the target's). Every tensor is an unranked memref
/// argument (rank, descriptor) with non-negative strides, the last one 1
/// but for the bias's; then `flags` (i64) and `scale` (f64):
///   forward(q, k, v, bias, out, log_sum_exp, flags, scale)
///   backward(q, k, v, bias, out, out_grad, log_sum_exp,
///            q_grad, k_grad, v_grad, flags, scale)
/// q is [B, Hq, S, D], k [B, Hkv, T, D], v [B, Hkv, T, Dv] with Hq a
/// multiple of Hkv (query head h reads key/value head h / (Hq / Hkv)); out
/// and out_grad are [B, Hq, S, Dv]; bias is [B, Hq, S, T], added to the
/// scaled scores (-inf hides a key; broadcast dims have stride 0), read only
/// under kAttentionBias (else it is any tensor of the element type);
/// log_sum_exp is f32 [B, Hq, S]: per query, the log of the sum over its
/// visible keys of exp(scale * q.k + bias), written by the forward, read by
/// the backward. The backward writes (never accumulates) the gradients;
/// k_grad and v_grad sum over the query heads that share a key/value head.
/// A query with no visible key gets out = 0, log_sum_exp = -inf and no
/// gradient.
constexpr const char *kAttentionForwardSuffix = "_forward_";
constexpr const char *kAttentionBackwardSuffix = "_backward_";
/// Whether the fused attention writes its tensor argument `index` (in the
/// order above) without reading it: out and log_sum_exp forward, the three
/// gradients backward.
constexpr bool attentionOverwrites(bool backward, unsigned index) {
  return backward ? index >= 7 && index <= 9 : index == 4 || index == 5;
}
/// Key j is hidden from query i when j > i + T - S.
constexpr int64_t kAttentionCausal = 1;
/// `bias` is read.
constexpr int64_t kAttentionBias = 2;

/// Why the fused kernels do not take an attention of these sizes (the
/// forward, or with `backward` its gradient), or nullptr when they do: the
/// limits of cuDNN 9's fused SDPA on every version the CUDA runtime loads.
/// The compiler keeps such an attention decomposed; the runtimes refuse it.
inline const char *fusedAttentionRefusal(int64_t hq, int64_t hkv, int64_t s,
                                         int64_t t, int64_t d, int64_t dv,
                                         int64_t flags, bool backward) {
  bool causal = flags & kAttentionCausal, biased = flags & kAttentionBias;
  if (hq <= 0 || hkv <= 0 || s <= 0 || t <= 0 || d <= 0 || dv <= 0)
    return "needs sizes known and positive";
  if (hq % hkv != 0)
    return "needs the key/value heads to divide the query heads";
  if (d % 8 != 0 || dv % 8 != 0)
    return "needs head dims that are multiples of 8";
  if (d > 256 || dv > 256 || (backward && (d > 128 || dv > 128)))
    return backward ? "backward takes head dims up to 128"
                    : "takes head dims up to 256";
  if (causal && s > t)
    return "cannot mask causally with S > T (queries that see no key)";
  if (causal && s != t && biased)
    return "cannot combine a bias with a bottom-right aligned causal mask "
           "(S != T)";
  if (backward && s == 1 && t == 1)
    return "backward does not take S = T = 1";
  return nullptr;
}

//===----------------------------------------------------------------------===//
// The symbols a program object defines (RunnerMain.cpp declares them)
//===----------------------------------------------------------------------===//

/// `void weft_entry(void **buffers)`: the buffers in manifest order.
constexpr const char *kEntrySymbol = "weft_entry";
/// `const char weft_manifest[]`: the manifest's JSON.
constexpr const char *kManifestSymbol = "weft_manifest";
/// A pipeline names each pp rank's program by these plus "_pp<r>", and
/// lists them in `weft_pipeline_entries[]` and `weft_pipeline_manifests[]`,
/// `weft_pipeline_programs` long.
constexpr const char *kPipelineEntriesSymbol = "weft_pipeline_entries";
constexpr const char *kPipelineManifestsSymbol = "weft_pipeline_manifests";
constexpr const char *kPipelineProgramsSymbol = "weft_pipeline_programs";

//===----------------------------------------------------------------------===//
// The manifest
//===----------------------------------------------------------------------===//

/// Bumped whenever the schema changes: a runtime reads its own version only.
constexpr int64_t kManifestVersion = 6;

/// One buffer of the entry function (arguments in order, then results).
struct ManifestBuffer {
  weft_role role = WEFT_INPUT;
  std::string name;
  weft_dtype dtype = WEFT_F32;
  /// The whole tensor, and how it is split over the mesh (a ShardSpec's
  /// text; "" for a scalar).
  std::vector<int64_t> shape;
  std::string sharding;
  /// Params: where shard 0 starts in the weights file, and the distance
  /// between consecutive shards.
  uint64_t weightsOffset = 0;
  uint64_t shardStride = 0;
  /// Inputs whose values index a table (a gather's indices): the table's
  /// size, so that the runner refuses values outside [-size, size); 0 for
  /// the others.
  int64_t indexBound = 0;
};

/// What a training step's runner needs to know about it.
struct ManifestTraining {
  std::string optimizer; // adamw, sgd
  double beta1 = 0, beta2 = 0;
  /// The vocabulary the labels index.
  int64_t vocab = 0;
  /// The step's contraction FLOPs over all ranks (what MFU is measured
  /// against).
  double stepFlops = 0;
  /// The input holding the token ids.
  std::string tokenInput;
};

/// What runs a program's kernels (the manifest's "device"): the CPU, a CUDA
/// GPU, or the CPU emulation of one (weftc --target=cuda-emulation, a test
/// tool).
constexpr const char *kCpuDevice = "cpu";
constexpr const char *kCudaDevice = "cuda";
constexpr const char *kEmulatedCudaDevice = "cuda-emulation";
/// The runtime backend that serves `device`: its sources are
/// runtime/lib/<backend>, its library libweft_runtime_<backend>.a, which an
/// executable for the device links whole; null for an unknown device.
inline const char *runtimeBackendOf(const std::string &device) {
  if (device == kCpuDevice)
    return "cpu";
  if (device == kCudaDevice)
    return "cuda";
  if (device == kEmulatedCudaDevice)
    return "emulation";
  return nullptr;
}
/// A device that does not share host memory (the CUDA GPU, its emulation)
/// gives an entry buffers of its own, and compiled code's allocations
/// blocks of its own, each at a multiple of this many bytes: the CUDA
/// target's kernels state it of their buffers, for 128-bit accesses.
constexpr int64_t kDeviceBufferAlignment = 64;

/// The exit status of an executable built for a CUDA GPU on a machine that
/// has none (EX_UNAVAILABLE), told apart from its other errors (1).
constexpr int kExitNoCudaDevice = 69;

/// The exit status of a rank that stopped only because another failed (and
/// printed why): weft-run names a rank that exited with 1 before these.
constexpr int kExitPeerFailed = 2;

/// How the all-reduces over the data-parallel axis (the gradients') run
/// (weftc --grad-sync); docs/spmd.md. The others are the MPI library's.
enum class GradSync {
  Library,         // MPI's or NCCL's own choice
  Ring,            // reduce-scatter then all-gather around a ring
  Tree,            // reduce up a binary tree, broadcast down it, pipelined
  ParameterServer, // each rank owns a slice: all push to owners, owners
                   // send the sums back
  Hierarchical,    // reduce-scatter inside a node, all-reduce across
                   // nodes, all-gather inside the node
};
/// "library", "ring", "tree", "ps", "hierarchical".
const char *gradSyncName(GradSync sync);
std::optional<GradSync> parseGradSync(const std::string &name);

struct Manifest {
  /// kCpuDevice, kCudaDevice or kEmulatedCudaDevice.
  std::string device = kCpuDevice;
  /// The device mesh of a partitioned model (empty: one rank) and the
  /// groups of mesh axes its collectives run over (bit a: axis a).
  MeshShape mesh;
  std::vector<int64_t> groups;
  /// The algorithm of the all-reduces whose group spans a mesh axis in
  /// `gradSyncAxes` (bit a: axis a), the data-parallel one.
  GradSync gradSync = GradSync::Library;
  int64_t gradSyncAxes = 0;
  /// Local SGD (weftc --dp-sync every=K): the replicas of the axes in
  /// `dpSyncAxes` step alone, and the runner averages their parameters and
  /// optimizer state every `dpSyncEvery` steps (1: every step's gradients
  /// are summed instead, ordinary data parallelism).
  int64_t dpSyncEvery = 1;
  int64_t dpSyncAxes = 0;
  std::optional<ManifestTraining> training;
  std::vector<ManifestBuffer> buffers;

  /// The JSON text: {"format": "weft-manifest", "version": 6, "device":
  /// ..., "mesh": ..., "groups": ..., "grad_sync": {"algorithm": ...,
  /// "axes": ...}, "dp_sync": {"every": ..., "axes": ...}, "training": ...,
  /// "buffers": [...]} (docs/compiler.md).
  std::string toJson() const;
  /// Reads `json`. On failure `error` ends a one-line sentence whose
  /// subject is the manifest ("is version 2 and this runtime reads version
  /// 3: ...", "is malformed: no 'buffers'").
  static std::optional<Manifest> parse(const std::string &json,
                                       std::string &error);
};

//===----------------------------------------------------------------------===//
// The weights file
//===----------------------------------------------------------------------===//

/// A weights file is a 64-byte header, then every param shard at its
/// offset, each 64-byte aligned.
constexpr uint64_t kWeightsHeaderBytes = 64;
constexpr uint64_t kWeightsAlignment = 64;

struct WeightsHeader {
  /// manifestHash of the executable's manifest: a weights file belongs to
  /// one executable.
  uint64_t manifestHash = 0;
  uint64_t fileBytes = 0;

  void write(char (&header)[kWeightsHeaderBytes]) const;
  /// False when `data` does not start with a Weft weights header.
  static bool read(const void *data, uint64_t size, WeightsHeader &header);
};

/// FNV-1a of the manifest text.
uint64_t manifestHash(const std::string &manifest);

} // namespace weft::runtime

#endif // WEFT_RUNTIME_CONTRACT_H

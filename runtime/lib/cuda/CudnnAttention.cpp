//===- CudnnAttention.cpp - Fused attention through cuDNN's graph API -----===//
//
// weft-attention-to-library hands each bf16 attention and its backward to
// these functions (weft/runtime/Contract.h). They run cuDNN's fused
// scaled-dot-product attention (flash attention: the [S, T] scores stay on
// chip) through cuDNN 9's backend API. Like the driver and cuBLAS
// (CudaDriver.cpp, CublasLt.cpp), cuDNN is loaded with dlopen, so an executable
// built for CUDA needs it only when it runs an attention. The operation graphs
// are the ones NVIDIA's cudnn-frontend builds for its SDPA nodes (matmul,
// scale, bias, mask, softmax with its statistics, matmul; and the
// backward's), the pattern cuDNN's fused engines recognize. Each shape's
// execution plan is built once and cached; every call is queued on the
// backend's compute stream, in order with the kernels around it.
//
//===----------------------------------------------------------------------===//

#include "core/StridedView.h"
#include "cuda/CudaDriver.h"

#include "weft/runtime/Contract.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <limits>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace {

//===----------------------------------------------------------------------===//
// cuDNN's backend API, as cudnn_graph.h (cuDNN 9) defines it: the runtime
// builds without cuDNN's headers, and every enum is passed as an int.
//===----------------------------------------------------------------------===//

using Descriptor = void *;

// cudnnStatus_t
constexpr int kStatusSuccess = 0;
// cudnnDataType_t
constexpr int kDataFloat = 0, kDataInt32 = 4, kDataBf16 = 9, kDataBoolean = 11;
// cudnnBackendAttributeType_t
constexpr int kTypeHandle = 0, kTypeDataType = 1, kTypeBoolean = 2,
              kTypeInt64 = 3, kTypeFloat = 4, kTypeVoidPtr = 6,
              kTypeHeurMode = 8, kTypePointwiseMode = 14, kTypeDescriptor = 15,
              kTypeReductionOperator = 18;
// cudnnBackendDescriptorType_t
constexpr int kPointwiseDescriptor = 0, kEngineConfigDescriptor = 3,
              kEngineHeuristicsDescriptor = 4, kExecutionPlanDescriptor = 5,
              kPointwiseOperationDescriptor = 13,
              kOperationGraphDescriptor = 15, kVariantPackDescriptor = 16,
              kTensorDescriptor = 17, kMatmulDescriptor = 18,
              kMatmulOperationDescriptor = 19, kReductionDescriptor = 21,
              kReductionOperationDescriptor = 22,
              kReshapeOperationDescriptor = 31;
// cudnnBackendAttributeName_t
constexpr int kPointwiseMode = 0, kPointwiseMathPrec = 1, kPointwiseAxis = 9;
constexpr int kEngineHeuristicsMode = 200,
              kEngineHeuristicsOperationGraph = 201,
              kEngineHeuristicsResults = 202;
constexpr int kExecutionPlanHandle = 400, kExecutionPlanEngineConfig = 401,
              kExecutionPlanWorkspaceSize = 402;
constexpr int kPointwisePwDescriptor = 750, kPointwiseXDesc = 751,
              kPointwiseBDesc = 752, kPointwiseYDesc = 753,
              kPointwiseAlpha1 = 754, kPointwiseAlpha2 = 755,
              kPointwiseTDesc = 758;
constexpr int kOperationGraphHandle = 800, kOperationGraphOps = 801;
constexpr int kTensorByteAlignment = 900, kTensorDataType = 901,
              kTensorDimensions = 902, kTensorStrides = 903,
              kTensorUniqueId = 906, kTensorIsVirtual = 907,
              kTensorIsByValue = 908;
constexpr int kVariantPackUniqueIds = 1000, kVariantPackDataPointers = 1001,
              kVariantPackWorkspace = 1003;
constexpr int kMatmulCompType = 1500;
constexpr int kMatmulADesc = 1520, kMatmulBDesc = 1521, kMatmulCDesc = 1522,
              kMatmulDesc = 1523, kMatmulGemmMOverride = 1525,
              kMatmulGemmNOverride = 1526, kMatmulGemmKOverride = 1527;
constexpr int kReductionOperator = 1600, kReductionCompType = 1601;
constexpr int kReductionXDesc = 1610, kReductionYDesc = 1611,
              kReductionDesc = 1612;
constexpr int kReshapeXDesc = 2200, kReshapeYDesc = 2201;
// cudnnPointwiseMode_t
constexpr int kAdd = 0, kMul = 1, kDiv = 6, kSub = 9, kExp = 13, kLog = 15,
              kIdentity = 21, kCmpGe = 303, kCmpLt = 304, kLogicalAnd = 400,
              kGenIndex = 501, kBinarySelect = 601;
// cudnnReduceTensorOp_t
constexpr int kReduceAdd = 0, kReduceMax = 3;
// cudnnBackendHeurMode_t
constexpr int kHeurModeFallback = 2, kHeurModeA = 3;

/// The entry points this file calls (cudnn_graph.h), and one handle on the
/// compute stream.
struct Cudnn {
  using Handle = struct cudnnContext *;
  size_t (*getVersion)();
  const char *(*getErrorString)(int);
  int (*create)(Handle *);
  int (*setStream)(Handle, weft::runtime::cuda::Stream);
  int (*createDescriptor)(int, Descriptor *);
  int (*destroyDescriptor)(Descriptor);
  int (*finalize)(Descriptor);
  int (*setAttribute)(Descriptor, int, int, int64_t, const void *);
  int (*getAttribute)(Descriptor, int, int, int64_t, int64_t *, void *);
  int (*execute)(Handle, Descriptor, Descriptor);
  /// cudnnGetLastErrorString: why the last call failed, in words (cuDNN
  /// 9.0 on; optional, only to say more).
  void (*getLastErrorString)(char *, size_t) = nullptr;

  Handle handle = nullptr;
  weft::runtime::cuda::Stream stream = nullptr;
  /// major * 10000 + minor * 100 + patch.
  int64_t version = 0;
};

[[noreturn]] void fail(const std::string &line) {
  fprintf(stderr, "error: CUDA: %s\n", line.c_str());
  fflush(nullptr);
  std::_Exit(1);
}

/// cuDNN's words for `status`, with its last error message where it has one
/// (on one line).
std::string describe(const Cudnn &api, int status) {
  const char *name = api.getErrorString ? api.getErrorString(status) : nullptr;
  std::string text = name ? name : "cuDNN status " + std::to_string(status);
  if (api.getLastErrorString) {
    char detail[512] = {0};
    api.getLastErrorString(detail, sizeof detail);
    std::string extra(detail);
    std::replace(extra.begin(), extra.end(), '\n', ' ');
    if (!extra.empty())
      text += " (" + extra + ")";
  }
  return text;
}

/// Loads cuDNN, creates its handle and stream; once per process. `where`
/// names the attention that asked, for the error line.
const Cudnn &cudnn(const std::string &where) {
  static Cudnn loaded;
  static std::once_flag once;
  std::call_once(once, [&] {
    // On the library path (the Python environment's nvidia-cudnn wheel, a
    // Debian package), else in the toolkit.
    std::string toolkit =
        getenv("CUDA_HOME") ? getenv("CUDA_HOME") : "/usr/local/cuda";
    void *library = nullptr;
    for (const std::string &name :
         {std::string("libcudnn.so.9"), toolkit + "/lib64/libcudnn.so.9",
          std::string("/usr/local/cuda/lib64/libcudnn.so.9")})
      if ((library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)))
        break;
    if (!library)
      fail("cuDNN (libcudnn.so.9) cannot be loaded: put its directory on "
           "LD_LIBRARY_PATH " +
           where);
    auto bind = [&](auto &entry, const char *name, bool required = true) {
      entry = reinterpret_cast<std::remove_reference_t<decltype(entry)>>(
          dlsym(library, name));
      if (!entry && required)
        fail(std::string("cuDNN has no ") + name + " " + where);
    };
    bind(loaded.getVersion, "cudnnGetVersion");
    bind(loaded.getErrorString, "cudnnGetErrorString");
    bind(loaded.create, "cudnnCreate");
    bind(loaded.setStream, "cudnnSetStream");
    bind(loaded.createDescriptor, "cudnnBackendCreateDescriptor");
    bind(loaded.destroyDescriptor, "cudnnBackendDestroyDescriptor");
    bind(loaded.finalize, "cudnnBackendFinalize");
    bind(loaded.setAttribute, "cudnnBackendSetAttribute");
    bind(loaded.getAttribute, "cudnnBackendGetAttribute");
    bind(loaded.execute, "cudnnBackendExecute");
    bind(loaded.getLastErrorString, "cudnnGetLastErrorString",
         /*required=*/false);
    loaded.version = int64_t(loaded.getVersion());
    if (loaded.version < 90000)
      fail("cuDNN " + std::to_string(loaded.version) +
           " is too old: fused attention needs cuDNN 9 " + where);
    // The device's context current on this thread, which cudnnCreate
    // binds the handle to.
    weft::runtime::cuda::driver();
    loaded.stream = weft::runtime::cuda::computeStream();
    if (int status = loaded.create(&loaded.handle))
      fail("cuDNN cudnnCreate failed: " + describe(loaded, status) + " " +
           where);
    if (int status = loaded.setStream(loaded.handle, loaded.stream))
      fail("cuDNN cudnnSetStream failed: " + describe(loaded, status) + " " +
           where);
  });
  return loaded;
}

//===----------------------------------------------------------------------===//
// The operands
//===----------------------------------------------------------------------===//

using Dims = std::array<int64_t, 4>;

/// Row-major strides of `dims`.
Dims packedStrides(const Dims &dims) {
  Dims strides;
  int64_t stride = 1;
  for (int d = 3; d >= 0; --d) {
    strides[d] = stride;
    stride *= dims[d];
  }
  return strides;
}

/// A tensor argument as cuDNN takes it: the device address of its first
/// element and a 4-D layout (a 3-D one gets a unit dim last).
struct Operand {
  char *data = nullptr;
  Dims dims{}, strides{};
  /// The largest power of two, up to 16, dividing `data`: cuDNN's tensor
  /// descriptors state it, and its kernels use wide loads when they can.
  int64_t alignment = 16;
};

/// The operand behind an unranked memref argument. Broadcast batch and
/// head dims (stride 0) become unit dims where `collapseBroadcasts` (the
/// bias: cuDNN reads a bias of [B or 1, H or 1, S, T]; a broadcast over S
/// or T keeps its stride 0, as PyTorch's expanded biases reach cuDNN). Each
/// unit dim gets the stride a packed layout around the others would have:
/// cuDNN reads the strides to tell the layout and never follows that one.
Operand operandOf(int64_t rank, void *descriptor, int64_t elementBytes,
                  bool collapseBroadcasts = false) {
  weft::runtime::View view = weft::runtime::viewOf(rank, descriptor);
  Operand operand;
  operand.data =
      reinterpret_cast<char *>(view.aligned) + view.offset * elementBytes;
  for (int64_t d = 0; d < 4; ++d) {
    operand.dims[d] = d < rank ? view.sizes[d] : 1;
    operand.strides[d] = d < rank ? view.strides[d] : 1;
    if (collapseBroadcasts && d < 2 && operand.strides[d] == 0)
      operand.dims[d] = 1;
  }
  for (int d = 3; d >= 0; --d) {
    if (operand.dims[d] != 1)
      continue;
    int64_t stride = 1;
    for (int e = d + 1; e < 4; ++e)
      stride = std::max(stride, operand.strides[e] * operand.dims[e]);
    operand.strides[d] = stride;
  }
  auto address = reinterpret_cast<uintptr_t>(operand.data);
  while (operand.alignment > 1 && address % operand.alignment)
    operand.alignment /= 2;
  return operand;
}

/// The unique ids of the graphs' non-virtual tensors, which also index a
/// call's operands.
enum Uid : int64_t {
  kUidQ = 1,
  kUidK,
  kUidV,
  kUidBias,
  kUidOut,
  kUidStats,
  kUidOutGrad,
  kUidQGrad,
  kUidKGrad,
  kUidVGrad,
  // By value: the scale, 1, the masked score, S and T (device tensors of
  // [B] in the backward's padding mask).
  kUidScale,
  kUidOne,
  kUidNegInf,
  kUidSeqQ,
  kUidSeqKV,
  // Scratch the backward's graph names (non-virtual; in the workspace).
  kUidSoftmaxSum,
  kUidQGradAccum,
  kUidCount,
  /// The virtual tensors' ids start here.
  kUidFirstVirtual = 100
};

/// One attention call: its sizes, its flags and its operands.
struct Attention {
  bool backward = false;
  int64_t batch = 0, hq = 0, hkv = 0, s = 0, t = 0, d = 0, dv = 0;
  bool causal = false, biased = false;
  double scale = 1;
  /// The operands by uid (only those of the direction and flags are set).
  std::array<Operand, kUidCount> operands{};
  /// "(attention [B,Hq,S,T,D])", ending every error line.
  std::string where;

  const Operand &operand(Uid uid) const { return operands[uid]; }
};

//===----------------------------------------------------------------------===//
// Graphs
//===----------------------------------------------------------------------===//

/// A tensor of a graph being built.
struct Tensor {
  Descriptor desc = nullptr;
  Dims dims{};
};

/// Builds an operation graph as cudnn-frontend's SDPA nodes do, one backend
/// descriptor at a time; a call cuDNN refuses ends the run with one line.
class Graph {
public:
  Graph(const Cudnn &api, const std::string &where) : api(api), where(where) {}

  /// Every descriptor made: they stay alive with the plan (the plan may
  /// refer to them), that is until the process ends.
  std::vector<Descriptor> descriptors;
  std::vector<Descriptor> operations;
  /// The non-virtual tensors, in the order they were made.
  std::vector<int64_t> uids;

  Descriptor make(int type, const char *what) {
    Descriptor desc = nullptr;
    check(api.createDescriptor(type, &desc), "cudnnBackendCreateDescriptor",
          what);
    descriptors.push_back(desc);
    return desc;
  }
  void set(Descriptor desc, int attribute, int type, int64_t count,
           const void *values, const char *what) {
    if (int status = api.setAttribute(desc, attribute, type, count, values))
      fail("cuDNN cudnnBackendSetAttribute (attribute " +
           std::to_string(attribute) + " of a " + what +
           ") failed: " + describe(api, status) + " " + where);
  }
  void finalize(Descriptor desc, const char *what) {
    check(api.finalize(desc), "cudnnBackendFinalize", what);
  }
  void check(int status, const char *call, const char *what) const {
    if (status != kStatusSuccess)
      fail(std::string("cuDNN ") + call + " (" + what +
           ") failed: " + describe(api, status) + " " + where);
  }

  /// A tensor of the graph. Non-virtual ones carry data, named by `uid`.
  Tensor tensor(int64_t uid, int type, const Dims &dims, const Dims &strides,
                int64_t alignment, bool isVirtual, bool byValue = false) {
    Descriptor desc = make(kTensorDescriptor, "tensor");
    set(desc, kTensorDataType, kTypeDataType, 1, &type, "tensor");
    set(desc, kTensorDimensions, kTypeInt64, 4, dims.data(), "tensor");
    set(desc, kTensorStrides, kTypeInt64, 4, strides.data(), "tensor");
    set(desc, kTensorUniqueId, kTypeInt64, 1, &uid, "tensor");
    set(desc, kTensorByteAlignment, kTypeInt64, 1, &alignment, "tensor");
    if (isVirtual)
      set(desc, kTensorIsVirtual, kTypeBoolean, 1, &isVirtual, "tensor");
    if (byValue)
      set(desc, kTensorIsByValue, kTypeBoolean, 1, &byValue, "tensor");
    finalize(desc, "tensor");
    if (!isVirtual)
      uids.push_back(uid);
    return {desc, dims};
  }
  /// An argument of the call.
  Tensor argument(Uid uid, const Operand &operand, int type = kDataBf16) {
    return tensor(uid, type, operand.dims, operand.strides, operand.alignment,
                  /*isVirtual=*/false);
  }
  /// A scalar passed by value at each execution (a host pointer).
  Tensor scalar(Uid uid, int type) {
    return tensor(uid, type, {1, 1, 1, 1}, {1, 1, 1, 1}, 16,
                  /*isVirtual=*/false, /*byValue=*/true);
  }
  /// An intermediate; its strides only describe a layout to the engines.
  Tensor temporary(int type, const Dims &dims) {
    return temporary(type, dims, packedStrides(dims));
  }
  Tensor temporary(int type, const Dims &dims, const Dims &strides) {
    return tensor(nextVirtual++, type, dims, strides, 16, /*isVirtual=*/true);
  }

  /// y = mode(x[, b[, t]]), computed in `precision`; `axis` for GEN_INDEX.
  void pointwiseInto(int mode, const Tensor &x, const Tensor *b,
                     const Tensor *t, const Tensor &y, int precision,
                     int64_t axis = -1) {
    Descriptor desc = make(kPointwiseDescriptor, "pointwise");
    set(desc, kPointwiseMode, kTypePointwiseMode, 1, &mode, "pointwise");
    set(desc, kPointwiseMathPrec, kTypeDataType, 1, &precision, "pointwise");
    if (mode == kGenIndex)
      set(desc, kPointwiseAxis, kTypeInt64, 1, &axis, "pointwise");
    finalize(desc, "pointwise");
    Descriptor op = make(kPointwiseOperationDescriptor, "pointwise operation");
    set(op, kPointwisePwDescriptor, kTypeDescriptor, 1, &desc,
        "pointwise operation");
    set(op, kPointwiseXDesc, kTypeDescriptor, 1, &x.desc,
        "pointwise operation");
    if (b)
      set(op, kPointwiseBDesc, kTypeDescriptor, 1, &b->desc,
          "pointwise operation");
    if (t)
      set(op, kPointwiseTDesc, kTypeDescriptor, 1, &t->desc,
          "pointwise operation");
    set(op, kPointwiseYDesc, kTypeDescriptor, 1, &y.desc,
        "pointwise operation");
    const float one = 1.0f;
    set(op, kPointwiseAlpha1, kTypeFloat, 1, &one, "pointwise operation");
    set(op, kPointwiseAlpha2, kTypeFloat, 1, &one, "pointwise operation");
    finalize(op, "pointwise operation");
    operations.push_back(op);
  }
  /// The same into a new intermediate of the inputs' broadcast shape.
  Tensor pointwise(int mode, const Tensor &x, const Tensor *b, const Tensor *t,
                   int type, int precision, int64_t axis = -1) {
    Dims dims = x.dims;
    for (const Tensor *input : {b, t})
      if (input)
        for (int d = 0; d < 4; ++d)
          dims[d] = std::max(dims[d], input->dims[d]);
    Tensor y = temporary(type, dims);
    pointwiseInto(mode, x, b, t, y, precision, axis);
    return y;
  }
  Tensor unary(int mode, const Tensor &x, int type = kDataFloat,
               int precision = kDataFloat, int64_t axis = -1) {
    return pointwise(mode, x, nullptr, nullptr, type, precision, axis);
  }
  Tensor binary(int mode, const Tensor &x, const Tensor &b,
                int type = kDataFloat, int precision = kDataFloat) {
    return pointwise(mode, x, &b, nullptr, type, precision);
  }
  /// mask ? x : b.
  Tensor select(const Tensor &x, const Tensor &b, const Tensor &mask) {
    return pointwise(kBinarySelect, x, &b, &mask, kDataFloat, kDataFloat);
  }

  /// c = a b (batched over the first two dims, a broadcasting one grouped
  /// as in GQA), accumulated in f32; the overrides bound a GEMM's extents
  /// per batch (the backward's padding mask).
  void matmulInto(const Tensor &a, const Tensor &b, const Tensor &c,
                  const Tensor *m = nullptr, const Tensor *n = nullptr,
                  const Tensor *k = nullptr) {
    Descriptor desc = make(kMatmulDescriptor, "matmul");
    int compute = kDataFloat;
    set(desc, kMatmulCompType, kTypeDataType, 1, &compute, "matmul");
    finalize(desc, "matmul");
    Descriptor op = make(kMatmulOperationDescriptor, "matmul operation");
    set(op, kMatmulADesc, kTypeDescriptor, 1, &a.desc, "matmul operation");
    set(op, kMatmulBDesc, kTypeDescriptor, 1, &b.desc, "matmul operation");
    set(op, kMatmulCDesc, kTypeDescriptor, 1, &c.desc, "matmul operation");
    set(op, kMatmulDesc, kTypeDescriptor, 1, &desc, "matmul operation");
    if (m)
      set(op, kMatmulGemmMOverride, kTypeDescriptor, 1, &m->desc,
          "matmul operation");
    if (n)
      set(op, kMatmulGemmNOverride, kTypeDescriptor, 1, &n->desc,
          "matmul operation");
    if (k)
      set(op, kMatmulGemmKOverride, kTypeDescriptor, 1, &k->desc,
          "matmul operation");
    finalize(op, "matmul operation");
    operations.push_back(op);
  }
  Tensor matmul(const Tensor &a, const Tensor &b, int type,
                const Tensor *m = nullptr, const Tensor *n = nullptr,
                const Tensor *k = nullptr) {
    Tensor c =
        temporary(type, {std::max(a.dims[0], b.dims[0]),
                         std::max(a.dims[1], b.dims[1]), a.dims[2], b.dims[3]});
    matmulInto(a, b, c, m, n, k);
    return c;
  }

  /// y = x reduced over the dims where y is smaller, in f32.
  void reductionInto(int reduce, const Tensor &x, const Tensor &y) {
    Descriptor desc = make(kReductionDescriptor, "reduction");
    set(desc, kReductionOperator, kTypeReductionOperator, 1, &reduce,
        "reduction");
    int compute = kDataFloat;
    set(desc, kReductionCompType, kTypeDataType, 1, &compute, "reduction");
    finalize(desc, "reduction");
    Descriptor op = make(kReductionOperationDescriptor, "reduction operation");
    set(op, kReductionDesc, kTypeDescriptor, 1, &desc, "reduction operation");
    set(op, kReductionXDesc, kTypeDescriptor, 1, &x.desc,
        "reduction operation");
    set(op, kReductionYDesc, kTypeDescriptor, 1, &y.desc,
        "reduction operation");
    finalize(op, "reduction operation");
    operations.push_back(op);
  }
  /// Over the last dim, into [B, H, S, 1].
  Tensor rowReduction(int reduce, const Tensor &x) {
    Tensor y = temporary(kDataFloat, {x.dims[0], x.dims[1], x.dims[2], 1});
    reductionInto(reduce, x, y);
    return y;
  }

  /// The same elements seen with other dims and strides (a transpose).
  Tensor reshape(const Tensor &x, const Dims &dims, const Dims &strides,
                 int type) {
    Tensor y = temporary(type, dims, strides);
    Descriptor op = make(kReshapeOperationDescriptor, "reshape operation");
    set(op, kReshapeXDesc, kTypeDescriptor, 1, &x.desc, "reshape operation");
    set(op, kReshapeYDesc, kTypeDescriptor, 1, &y.desc, "reshape operation");
    finalize(op, "reshape operation");
    operations.push_back(op);
    return y;
  }

  /// The finalized operation graph of the operations made.
  Descriptor finish() {
    Descriptor graph = make(kOperationGraphDescriptor, "operation graph");
    set(graph, kOperationGraphOps, kTypeDescriptor, int64_t(operations.size()),
        operations.data(), "operation graph");
    // The handle ties the graph to the device (needed before cuDNN 9.8).
    if (api.handle)
      set(graph, kOperationGraphHandle, kTypeHandle, 1, &api.handle,
          "operation graph");
    finalize(graph, "operation graph");
    return graph;
  }

private:
  const Cudnn &api;
  const std::string &where;
  int64_t nextVirtual = kUidFirstVirtual;
};

/// The masks' -inf: cudnn-frontend gives cuDNN before 9.10 the lowest
/// float instead, which those versions' softmax handles.
float maskedScore(const Cudnn &api) {
  return api.version < 91000 ? std::numeric_limits<float>::lowest()
                             : -std::numeric_limits<float>::infinity();
}

/// Hides key j from query i where j > i + T - S: keeps a score where
/// row (+ T - S) >= column, as cudnn-frontend's causal masks (top-left and
/// bottom-right aligned) build it for cuDNN before its diagonal-band
/// operation. `seqQ` and `seqKV` are S and T, null for the top-left mask.
Tensor causalMask(Graph &graph, const Tensor &scores, const Tensor &negInf,
                  const Tensor *seqQ, const Tensor *seqKV) {
  Tensor row = graph.unary(kGenIndex, scores, kDataInt32, kDataFloat, 2);
  Tensor column = graph.unary(kGenIndex, scores, kDataInt32, kDataFloat, 3);
  if (seqQ) {
    row = graph.binary(kAdd, row, *seqKV, kDataInt32, kDataInt32);
    row = graph.binary(kSub, row, *seqQ, kDataInt32, kDataInt32);
  }
  Tensor keep = graph.binary(kCmpGe, row, column, kDataBoolean, kDataBoolean);
  return graph.select(scores, negInf, keep);
}

/// Hides the rows and columns past S and T, per batch (cudnn-frontend's
/// padding mask).
Tensor paddingMask(Graph &graph, const Tensor &scores, const Tensor &negInf,
                   const Tensor &seqQ, const Tensor &seqKV) {
  Tensor row = graph.unary(kGenIndex, scores, kDataInt32, kDataInt32, 2);
  Tensor column = graph.unary(kGenIndex, scores, kDataInt32, kDataInt32, 3);
  Tensor rowIn = graph.binary(kCmpLt, row, seqQ, kDataBoolean, kDataBoolean);
  Tensor columnIn =
      graph.binary(kCmpLt, column, seqKV, kDataBoolean, kDataBoolean);
  Tensor keep =
      graph.binary(kLogicalAnd, rowIn, columnIn, kDataBoolean, kDataBoolean);
  return graph.select(scores, negInf, keep);
}

/// K as [B, Hkv, D, T] (and V as [B, Hkv, Dv, T]): the backend's matmuls
/// take the transposed operand, as cudnn-frontend passes it.
Operand transposed(Operand operand) {
  std::swap(operand.dims[2], operand.dims[3]);
  std::swap(operand.strides[2], operand.strides[3]);
  return operand;
}

/// A built plan and what each execution of it needs.
struct Plan {
  Descriptor plan = nullptr;
  /// The graph's non-virtual tensors, the variant pack's ids.
  std::vector<int64_t> uids;
  /// The workspace: the engine's, then the graph's scratch tensors (-1:
  /// none), each 256-byte aligned.
  int64_t workspaceBytes = 0;
  int64_t softmaxSumAt = -1, qGradAccumAt = -1, seqAt = -1;
  int64_t qGradAccumWords = 0, batch = 0;
  /// The by-value scalars' values.
  float scale = 1, one = 1, negInf = 0;
  int32_t seqQ = 0, seqKV = 0;
};

int64_t alignUp(int64_t bytes) { return (bytes + 255) / 256 * 256; }

/// The forward: O = softmax(scale * Q K^T + bias, masked) V, and the
/// log-sum-exp of each row's scores (cudnn-frontend's SDPA fprop with
/// generate_stats).
void buildForward(Graph &graph, const Attention &a, bool bottomRight) {
  Tensor q = graph.argument(kUidQ, a.operand(kUidQ));
  Tensor kt = graph.argument(kUidK, transposed(a.operand(kUidK)));
  Tensor v = graph.argument(kUidV, a.operand(kUidV));
  Tensor out = graph.argument(kUidOut, a.operand(kUidOut));
  Tensor stats = graph.argument(kUidStats, a.operand(kUidStats), kDataFloat);
  Tensor scale = graph.scalar(kUidScale, kDataFloat);

  Tensor scores = graph.matmul(q, kt, kDataFloat);
  scores = graph.binary(kMul, scores, scale);
  if (a.biased)
    scores = graph.binary(kAdd, scores,
                          graph.argument(kUidBias, a.operand(kUidBias)));
  if (a.causal) {
    Tensor negInf = graph.scalar(kUidNegInf, kDataFloat);
    if (bottomRight) {
      Tensor seqQ = graph.scalar(kUidSeqQ, kDataInt32);
      Tensor seqKV = graph.scalar(kUidSeqKV, kDataInt32);
      scores = causalMask(graph, scores, negInf, &seqQ, &seqKV);
    } else {
      scores = causalMask(graph, scores, negInf, nullptr, nullptr);
    }
  }
  // Softmax, its statistics max + log(sum) on the way (the log-sum-exp).
  Tensor max = graph.rowReduction(kReduceMax, scores);
  Tensor exp = graph.unary(kExp, graph.binary(kSub, scores, max));
  Tensor sum = graph.rowReduction(kReduceAdd, exp);
  Tensor log = graph.unary(kLog, sum);
  graph.pointwiseInto(kAdd, max, &log, nullptr, stats, kDataFloat);
  // The probabilities in the inputs' type: the second matmul's A.
  Tensor probabilities = graph.binary(kDiv, exp, sum, kDataBf16);
  graph.matmulInto(probabilities, v, out);
}

/// The backward (cudnn-frontend's SDPA bprop, dropout, dbias and the
/// deterministic algorithm left out): recomputes the probabilities from the
/// forward's log-sum-exp. `padding`: the workaround padding mask (S and T
/// as [B] tensors) cudnn-frontend adds for cuDNN up to 9.15.0.
void buildBackward(Graph &graph, const Attention &a, Plan &plan,
                   bool bottomRight, bool padding, const Cudnn &api) {
  int64_t b = a.batch, hq = a.hq, s = a.s, t = a.t, d = a.d, dv = a.dv;
  Tensor q = graph.argument(kUidQ, a.operand(kUidQ));
  Tensor kt = graph.argument(kUidK, transposed(a.operand(kUidK)));
  Tensor vt = graph.argument(kUidV, transposed(a.operand(kUidV)));
  Tensor out = graph.argument(kUidOut, a.operand(kUidOut));
  Tensor outGrad = graph.argument(kUidOutGrad, a.operand(kUidOutGrad));
  Tensor stats = graph.argument(kUidStats, a.operand(kUidStats), kDataFloat);
  Tensor qGrad = graph.argument(kUidQGrad, a.operand(kUidQGrad));
  Tensor kGrad = graph.argument(kUidKGrad, a.operand(kUidKGrad));
  Tensor vGrad = graph.argument(kUidVGrad, a.operand(kUidVGrad));
  Tensor scale = graph.scalar(kUidScale, kDataFloat);
  Tensor one = graph.scalar(kUidOne, kDataFloat);
  // Scratch in the workspace: the rows' sum(dO * O), and dQ accumulated in
  // f32 (a non-virtual dQ accumulator is how the backend API selects the
  // kernels that need no [S, T] workspace).
  Tensor softmaxSum = graph.tensor(kUidSoftmaxSum, kDataFloat, {b, hq, s, 1},
                                   packedStrides({b, hq, s, 1}), 16, false);
  Tensor qGradAccum = graph.tensor(kUidQGradAccum, kDataFloat, {b, hq, s, d},
                                   packedStrides({b, hq, s, d}), 16, false);
  Tensor negInf;
  if (a.causal || padding)
    negInf = graph.scalar(kUidNegInf, kDataFloat);
  Tensor seqQ, seqKV;
  if (padding) {
    seqQ = graph.tensor(kUidSeqQ, kDataInt32, {b, 1, 1, 1}, {1, 1, 1, 1}, 16,
                        false);
    seqKV = graph.tensor(kUidSeqKV, kDataInt32, {b, 1, 1, 1}, {1, 1, 1, 1}, 16,
                         false);
  } else if (bottomRight) {
    seqQ = graph.scalar(kUidSeqQ, kDataInt32);
    seqKV = graph.scalar(kUidSeqKV, kDataInt32);
  }
  const Tensor *seqQOverride = padding ? &seqQ : nullptr;
  const Tensor *seqKVOverride = padding ? &seqKV : nullptr;

  // softmax_sum = sum over Dv of dO * O (the frontend's odd strides of the
  // product kept: the backend only reads a virtual tensor's layout).
  Tensor product = graph.temporary(kDataFloat, {b, hq, s, dv},
                                   {hq * s * dv, s * dv, hq * dv, 1});
  graph.pointwiseInto(kMul, outGrad, &out, nullptr, product, kDataFloat);
  graph.pointwiseInto(kMul, graph.rowReduction(kReduceAdd, product), &one,
                      nullptr, softmaxSum, kDataFloat);

  // The probabilities, unnormalized by exp(scores - log-sum-exp).
  Tensor scores =
      graph.matmul(q, kt, kDataFloat, seqQOverride, seqKVOverride, nullptr);
  scores = graph.binary(kMul, scores, scale);
  if (a.biased)
    scores = graph.binary(kAdd, scores,
                          graph.argument(kUidBias, a.operand(kUidBias)));
  if (padding)
    scores = paddingMask(graph, scores, negInf, seqQ, seqKV);
  scores = graph.binary(kSub, scores, stats);
  // cuDNN 9.0 to 9.9 want the padding again once the statistics are in.
  if (padding && api.version < 91000)
    scores = paddingMask(graph, scores, negInf, seqQ, seqKV);
  if (a.causal)
    scores = bottomRight ? causalMask(graph, scores, negInf, &seqQ, &seqKV)
                         : causalMask(graph, scores, negInf, nullptr, nullptr);
  Tensor probabilities = graph.unary(kExp, scores);

  // dV = P^T dO (summed over the query heads of each key/value head).
  Tensor pT = graph.reshape(probabilities, {b, hq, t, s},
                            {hq * s * t, s * t, 1, t}, kDataBf16);
  if (hq == a.hkv) {
    graph.matmulInto(pT, outGrad, vGrad, seqKVOverride, nullptr, seqQOverride);
  } else {
    Tensor full = graph.matmul(pT, outGrad, kDataBf16, seqKVOverride, nullptr,
                               seqQOverride);
    graph.reductionInto(kReduceAdd, full, vGrad);
  }

  // dS = P * (dO V^T - softmax_sum) * scale.
  Tensor scoresGrad = graph.matmul(outGrad, vt, kDataFloat, seqQOverride,
                                   seqKVOverride, nullptr);
  scoresGrad = graph.binary(kSub, scoresGrad, softmaxSum);
  scoresGrad = graph.binary(kMul, scoresGrad, probabilities);
  scoresGrad = graph.binary(kMul, scoresGrad, scale);

  // dK = dS^T Q (summed over the query heads of each key/value head).
  Tensor scoresGradT = graph.reshape(scoresGrad, {b, hq, t, s},
                                     {hq * s * t, s * t, 1, t}, kDataBf16);
  if (hq == a.hkv) {
    graph.matmulInto(scoresGradT, q, kGrad, seqKVOverride, nullptr,
                     seqQOverride);
  } else {
    Tensor full = graph.matmul(scoresGradT, q, kDataBf16, seqKVOverride,
                               nullptr, seqQOverride);
    graph.reductionInto(kReduceAdd, full, kGrad);
  }

  // dQ = dS K, through the f32 accumulator.
  const Operand &k = a.operand(kUidK);
  Tensor kView = graph.reshape(kt, k.dims, k.strides, kDataFloat);
  graph.matmulInto(scoresGrad, kView, qGradAccum, seqQOverride, nullptr,
                   seqKVOverride);
  graph.pointwiseInto(kIdentity, qGradAccum, nullptr, nullptr, qGrad,
                      kDataFloat);

  plan.softmaxSumAt = 0;
  plan.qGradAccumAt = alignUp(b * hq * s * 4);
  plan.qGradAccumWords = b * hq * s * d;
  plan.workspaceBytes = plan.qGradAccumAt + alignUp(plan.qGradAccumWords * 4);
  if (padding) {
    plan.seqAt = plan.workspaceBytes;
    plan.workspaceBytes += 2 * alignUp(b * 4);
  }
}

/// The first execution plan cuDNN's heuristics offer that finalizes for
/// `graph` (heuristics mode A, then the fallback list), null when none
/// does; `engineBytes` is its workspace. `failure` says why the last one
/// failed.
Descriptor choosePlan(Graph &graph, Descriptor operationGraph, const Cudnn &api,
                      int64_t &engineBytes, std::string &failure) {
  failure = "the heuristics offered no engine";
  for (int mode : {kHeurModeA, kHeurModeFallback}) {
    Descriptor heuristics =
        graph.make(kEngineHeuristicsDescriptor, "engine heuristics");
    graph.set(heuristics, kEngineHeuristicsOperationGraph, kTypeDescriptor, 1,
              &operationGraph, "engine heuristics");
    graph.set(heuristics, kEngineHeuristicsMode, kTypeHeurMode, 1, &mode,
              "engine heuristics");
    if (int status = api.finalize(heuristics)) {
      failure = "engine heuristics: " + describe(api, status);
      continue;
    }
    int64_t count = 0;
    graph.check(api.getAttribute(heuristics, kEngineHeuristicsResults,
                                 kTypeDescriptor, 0, &count, nullptr),
                "cudnnBackendGetAttribute", "engine heuristics' count");
    if (count <= 0)
      continue;
    std::vector<Descriptor> configs;
    for (int64_t i = 0; i < count; ++i)
      configs.push_back(graph.make(kEngineConfigDescriptor, "engine config"));
    int64_t returned = 0;
    graph.check(api.getAttribute(heuristics, kEngineHeuristicsResults,
                                 kTypeDescriptor, count, &returned,
                                 configs.data()),
                "cudnnBackendGetAttribute", "engine heuristics' results");
    for (int64_t i = 0; i < std::min(count, returned); ++i) {
      Descriptor plan = nullptr;
      graph.check(api.createDescriptor(kExecutionPlanDescriptor, &plan),
                  "cudnnBackendCreateDescriptor", "execution plan");
      graph.set(plan, kExecutionPlanHandle, kTypeHandle, 1, &api.handle,
                "execution plan");
      graph.set(plan, kExecutionPlanEngineConfig, kTypeDescriptor, 1,
                &configs[i], "execution plan");
      if (int status = api.finalize(plan)) {
        // Not this engine (a shape it does not take, a kernel NVRTC could
        // not compile): the next.
        failure = describe(api, status);
        api.destroyDescriptor(plan);
        continue;
      }
      int64_t elements = 0;
      graph.check(api.getAttribute(plan, kExecutionPlanWorkspaceSize,
                                   kTypeInt64, 1, &elements, &engineBytes),
                  "cudnnBackendGetAttribute", "execution plan's workspace");
      graph.descriptors.push_back(plan);
      return plan;
    }
  }
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Calls
//===----------------------------------------------------------------------===//

/// The plans built, by everything a graph depends on; the workspace, the
/// largest any plan has needed. Guarded by `mutex`.
struct State {
  std::mutex mutex;
  std::unordered_map<std::string, Plan> plans;
  void *workspace = nullptr;
  int64_t workspaceBytes = 0;
};

State &state() {
  // Never destroyed: at exit cuDNN and the context may be gone already.
  static State *state = new State;
  return *state;
}

/// "[B,Hq,S,T,D]" and the flags, for a line saying no engine runs it.
std::string describeShape(const Attention &a) {
  std::string text = "[" + std::to_string(a.batch) + "," +
                     std::to_string(a.hq) + "," + std::to_string(a.s) + "," +
                     std::to_string(a.t) + "," + std::to_string(a.d) +
                     "] with Hkv=" + std::to_string(a.hkv) +
                     ", Dv=" + std::to_string(a.dv);
  if (a.causal)
    text += ", causal";
  if (a.biased)
    text += ", bias";
  return text;
}

/// Ends the run with one line unless cuDNN's fused attention takes `a`
/// (the limits cudnn-frontend checks before it builds a graph) and the
/// operands are laid out as it reads them.
void validate(const Attention &a, const Cudnn &api) {
  auto refuse = [&](const std::string &why) {
    fail("cuDNN's fused attention " + why + " " + a.where);
  };
  if (api.version == 91000 || api.version == 91001)
    refuse("is broken in cuDNN 9.10.0 and 9.10.1 (cudnn-frontend refuses "
           "them): use 9.10.2 or later");
  int64_t flags = (a.causal ? weft::runtime::kAttentionCausal : 0) |
                  (a.biased ? weft::runtime::kAttentionBias : 0);
  if (const char *why = weft::runtime::fusedAttentionRefusal(
          a.hq, a.hkv, a.s, a.t, a.d, a.dv, flags, a.backward))
    refuse(why);
  if (a.causal && a.s != a.t && api.version < 90600 &&
      (a.s % 64 != 0 || a.t % 64 != 0))
    refuse("needs S and T multiples of 64 for a bottom-right aligned "
           "causal mask before cuDNN 9.6");
  for (int uid = kUidQ; uid <= kUidVGrad; ++uid) {
    const Operand &operand = a.operands[uid];
    if (!operand.data || (uid == kUidBias && !a.biased))
      continue;
    for (int64_t stride : operand.strides)
      if (stride < 0)
        refuse("takes no negative strides");
    if (uid != kUidStats && uid != kUidBias && operand.strides[3] != 1)
      refuse("needs each head's vectors contiguous (a last stride of 1)");
  }
}

/// Runs `a`, building its plan on first sight.
void run(Attention &a) {
  const Cudnn &api = cudnn(a.where);
  State &shared = state();
  std::lock_guard<std::mutex> lock(shared.mutex);
  // S = 1 sees every key under a bottom-right aligned causal mask (and
  // cuDNN before 9.10 masks no single query); S = T is top-left aligned,
  // which takes a bias.
  if (a.causal && a.s == 1)
    a.causal = false;
  validate(a, api);
  bool bottomRight = a.causal && a.s != a.t;
  bool padding = a.backward && api.version <= 91500 && a.t % 128 != 0;

  std::string key;
  auto put = [&](int64_t value) {
    key.append(reinterpret_cast<const char *>(&value), sizeof value);
  };
  int64_t scaleBits;
  std::memcpy(&scaleBits, &a.scale, sizeof scaleBits);
  put(a.backward);
  put(a.causal);
  put(a.biased);
  put(scaleBits);
  for (const Operand &operand : a.operands)
    if (operand.data) {
      for (int64_t dim : operand.dims)
        put(dim);
      for (int64_t stride : operand.strides)
        put(stride);
      put(operand.alignment);
    }

  auto found = shared.plans.find(key);
  if (found == shared.plans.end()) {
    Plan plan;
    Graph graph(api, a.where);
    if (a.backward)
      buildBackward(graph, a, plan, bottomRight, padding, api);
    else
      buildForward(graph, a, bottomRight);
    Descriptor operationGraph = graph.finish();
    int64_t engineBytes = 0;
    std::string failure;
    plan.plan = choosePlan(graph, operationGraph, api, engineBytes, failure);
    if (!plan.plan)
      fail("no cuDNN " + std::to_string(api.version) + " engine runs the " +
           (a.backward ? "backward" : "forward") + " of the fused attention " +
           describeShape(a) + ": " + failure +
           " (cuDNN's fused attention needs an sm80 or later GPU, D and Dv "
           "multiples of 8, at most 128 or 256 by GPU and version, and NVRTC "
           "on the library path for its runtime-compiled kernels) " +
           a.where);
    // The engine's workspace first, the graph's scratch after it.
    int64_t scratch = alignUp(engineBytes);
    for (int64_t *at : {&plan.softmaxSumAt, &plan.qGradAccumAt, &plan.seqAt})
      if (*at >= 0)
        *at += scratch;
    plan.workspaceBytes += scratch;
    plan.uids = graph.uids;
    plan.batch = a.batch;
    plan.scale = float(a.scale);
    plan.negInf = maskedScore(api);
    plan.seqQ = int32_t(a.s);
    plan.seqKV = int32_t(a.t);
    found = shared.plans.emplace(key, std::move(plan)).first;
  }
  Plan &plan = found->second;

  // The workspace: the largest any plan has needed, grown (never shrunk);
  // the pool hands the old one out again in stream order.
  if (plan.workspaceBytes > shared.workspaceBytes) {
    if (shared.workspace)
      weft::runtime::cuda::deallocate(shared.workspace);
    shared.workspace = weft::runtime::cuda::allocate(
        plan.workspaceBytes, "the fused attention's workspace");
    shared.workspaceBytes = plan.workspaceBytes;
  }
  char *workspace = static_cast<char *>(shared.workspace);

  std::array<void *, kUidCount> pointers{};
  for (int uid = kUidQ; uid <= kUidVGrad; ++uid)
    pointers[uid] = a.operands[uid].data;
  pointers[kUidScale] = &plan.scale;
  pointers[kUidOne] = &plan.one;
  pointers[kUidNegInf] = &plan.negInf;
  pointers[kUidSeqQ] = &plan.seqQ;
  pointers[kUidSeqKV] = &plan.seqKV;
  if (plan.softmaxSumAt >= 0)
    pointers[kUidSoftmaxSum] = workspace + plan.softmaxSumAt;
  if (plan.qGradAccumAt >= 0) {
    // cuDNN before 9.6 accumulates into it as it finds it (cudnn-frontend
    // clears it for them); clearing it always costs little.
    pointers[kUidQGradAccum] = workspace + plan.qGradAccumAt;
    weft::runtime::cuda::fill32(pointers[kUidQGradAccum], 0,
                                size_t(plan.qGradAccumWords), api.stream);
  }
  if (plan.seqAt >= 0) {
    pointers[kUidSeqQ] = workspace + plan.seqAt;
    pointers[kUidSeqKV] = workspace + plan.seqAt + alignUp(plan.batch * 4);
    weft::runtime::cuda::fill32(pointers[kUidSeqQ], unsigned(plan.seqQ),
                                size_t(plan.batch), api.stream);
    weft::runtime::cuda::fill32(pointers[kUidSeqKV], unsigned(plan.seqKV),
                                size_t(plan.batch), api.stream);
  }
  std::vector<void *> data;
  for (int64_t uid : plan.uids)
    data.push_back(pointers[uid]);

  Graph pack(api, a.where);
  Descriptor variants = pack.make(kVariantPackDescriptor, "variant pack");
  void *workspacePointer = workspace;
  pack.set(variants, kVariantPackWorkspace, kTypeVoidPtr, 1, &workspacePointer,
           "variant pack");
  pack.set(variants, kVariantPackDataPointers, kTypeVoidPtr,
           int64_t(data.size()), data.data(), "variant pack");
  pack.set(variants, kVariantPackUniqueIds, kTypeInt64,
           int64_t(plan.uids.size()), plan.uids.data(), "variant pack");
  pack.finalize(variants, "variant pack");
  weft::runtime::cuda::profiled(api.stream, [&] {
    pack.check(api.execute(api.handle, plan.plan, variants),
               "cudnnBackendExecute",
               a.backward ? "attention backward" : "attention forward");
  });
  api.destroyDescriptor(variants);
  weft::runtime::cuda::queued();
  ++weft::runtime::cuda::deviceStats().launches;
}

/// The call's sizes from q [B, Hq, S, D], k [B, Hkv, T, D] and
/// v [B, Hkv, T, Dv], its flags and its error-line suffix; ends the run
/// with one line when an operand has the wrong rank or shape.
Attention describeCall(bool backward, int64_t rq, void *q, int64_t rk, void *k,
                       int64_t rv, void *v, int64_t flags, double scale) {
  const char *name = backward ? "weft_cuda_attention_backward_bf16"
                              : "weft_cuda_attention_forward_bf16";
  if (rq != 4 || rk != 4 || rv != 4)
    fail(std::string(name) + ": q, k and v must be 4-D");
  Attention a;
  a.backward = backward;
  a.operands[kUidQ] = operandOf(rq, q, 2);
  a.operands[kUidK] = operandOf(rk, k, 2);
  a.operands[kUidV] = operandOf(rv, v, 2);
  const Dims &qd = a.operands[kUidQ].dims, &kd = a.operands[kUidK].dims,
             &vd = a.operands[kUidV].dims;
  a.batch = qd[0];
  a.hq = qd[1];
  a.s = qd[2];
  a.d = qd[3];
  a.hkv = kd[1];
  a.t = kd[2];
  a.dv = vd[3];
  if (kd[0] != a.batch || kd[3] != a.d || vd[0] != a.batch || vd[1] != a.hkv ||
      vd[2] != a.t)
    fail(std::string(name) + ": q, k and v have inconsistent shapes");
  a.causal = flags & weft::runtime::kAttentionCausal;
  a.biased = flags & weft::runtime::kAttentionBias;
  a.scale = scale;
  a.where = "(attention [" + std::to_string(a.batch) + "," +
            std::to_string(a.hq) + "," + std::to_string(a.s) + "," +
            std::to_string(a.t) + "," + std::to_string(a.d) + "])";
  if (flags &
      ~(weft::runtime::kAttentionCausal | weft::runtime::kAttentionBias))
    fail(std::string(name) + ": unknown flags " + std::to_string(flags) + " " +
         a.where);
  return a;
}

/// Adds an operand, checking its rank and shape.
void addOperand(Attention &a, Uid uid, const char *what, int64_t rank,
                void *descriptor, const Dims &shape) {
  int64_t expectedRank = uid == kUidStats ? 3 : 4;
  bool bias = uid == kUidBias;
  if (rank != expectedRank)
    fail(std::string("the fused attention's ") + what + " must be " +
         std::to_string(expectedRank) + "-D " + a.where);
  weft::runtime::View view = weft::runtime::viewOf(rank, descriptor);
  for (int64_t d = 0; d < rank; ++d)
    if (view.sizes[d] != shape[d])
      fail(std::string("the fused attention's ") + what +
           " has the wrong shape " + a.where);
  a.operands[uid] = operandOf(rank, descriptor, uid == kUidStats ? 4 : 2, bias);
}

/// Whether the call has nothing to compute: every output is empty. Ends
/// the run with one line when the outputs are not empty but cuDNN cannot
/// compute them (an empty dim it does not take).
bool nothingToDo(const Attention &a) {
  auto elements = [&](Uid uid) {
    int64_t count = 1;
    for (int64_t dim : a.operands[uid].dims)
      count *= dim;
    return count;
  };
  bool empty = a.backward
                   ? elements(kUidQGrad) == 0 && elements(kUidKGrad) == 0 &&
                         elements(kUidVGrad) == 0
                   : elements(kUidOut) == 0 && elements(kUidStats) == 0;
  if (!empty && (a.s == 0 || a.t == 0 || a.d == 0 || a.dv == 0))
    fail("cuDNN's fused attention takes no empty sequence or head " + a.where);
  return empty;
}

} // namespace

/// The contract's fused attention on the GPU (bf16; the log-sum-exp f32).
extern "C" void
weft_cuda_attention_forward_bf16(int64_t rq, void *q, int64_t rk, void *k,
                                 int64_t rv, void *v, int64_t rb, void *bias,
                                 int64_t ro, void *out, int64_t rl, void *lse,
                                 int64_t flags, double scale) {
  Attention a = describeCall(false, rq, q, rk, k, rv, v, flags, scale);
  if (a.biased)
    addOperand(a, kUidBias, "bias", rb, bias, {a.batch, a.hq, a.s, a.t});
  addOperand(a, kUidOut, "out", ro, out, {a.batch, a.hq, a.s, a.dv});
  addOperand(a, kUidStats, "log_sum_exp", rl, lse, {a.batch, a.hq, a.s, 1});
  if (nothingToDo(a))
    return;
  run(a);
}

extern "C" void weft_cuda_attention_backward_bf16(
    int64_t rq, void *q, int64_t rk, void *k, int64_t rv, void *v, int64_t rb,
    void *bias, int64_t ro, void *out, int64_t rdo, void *outGrad, int64_t rl,
    void *lse, int64_t rdq, void *qGrad, int64_t rdk, void *kGrad, int64_t rdv,
    void *vGrad, int64_t flags, double scale) {
  Attention a = describeCall(true, rq, q, rk, k, rv, v, flags, scale);
  if (a.biased)
    addOperand(a, kUidBias, "bias", rb, bias, {a.batch, a.hq, a.s, a.t});
  addOperand(a, kUidOut, "out", ro, out, {a.batch, a.hq, a.s, a.dv});
  addOperand(a, kUidOutGrad, "out_grad", rdo, outGrad,
             {a.batch, a.hq, a.s, a.dv});
  addOperand(a, kUidStats, "log_sum_exp", rl, lse, {a.batch, a.hq, a.s, 1});
  addOperand(a, kUidQGrad, "q_grad", rdq, qGrad, {a.batch, a.hq, a.s, a.d});
  addOperand(a, kUidKGrad, "k_grad", rdk, kGrad, {a.batch, a.hkv, a.t, a.d});
  addOperand(a, kUidVGrad, "v_grad", rdv, vGrad, {a.batch, a.hkv, a.t, a.dv});
  if (nothingToDo(a))
    return;
  run(a);
}

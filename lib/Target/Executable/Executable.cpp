//===- Executable.cpp - LLVM IR, entry wrapper, manifest and object -------===//

#include "weft/Target/Executable/Executable.h"
#include "weft/Dialect/Weft/IR/RuntimeTypes.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/Transforms/Sharding.h"
#include "weft/runtime/Contract.h"

#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/OpenMP/OpenMPToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"

using namespace mlir;
using weft::Mesh;
using weft::TensorSharding;

namespace weft {

uint64_t EntryBuffer::localBytes() const {
  return type.getNumElements() *
         std::max<uint64_t>(1, type.getElementTypeBitWidth() / 8);
}

std::optional<EntryMesh> describeMesh(ModuleOp module) {
  std::optional<Mesh> mesh = Mesh::find(module);
  if (!mesh)
    return std::nullopt;
  EntryMesh entry;
  entry.names.assign(mesh->names.begin(), mesh->names.end());
  entry.sizes.assign(mesh->sizes.begin(), mesh->sizes.end());
  if (mesh->contextZigzag)
    entry.zigzagAxis = mesh->contextAxis;
  module.walk([&](Operation *op) {
    auto axes = op->getAttrOfType<DenseI16ArrayAttr>("grid_axes");
    if (!axes || op->getDialect()->getNamespace() != "shard" ||
        isa<shard::AllSliceOp>(op))
      return;
    int64_t mask = 0;
    for (int16_t axis : axes.asArrayRef())
      mask |= int64_t(1) << axis;
    if (!llvm::is_contained(entry.groupMasks, mask))
      entry.groupMasks.push_back(mask);
  });
  return entry;
}

FailureOr<std::vector<EntryBuffer>> describeEntry(func::FuncOp func,
                                                  const EntryMesh *entryMesh,
                                                  uint64_t &weightsBytes) {
  std::optional<Mesh> mesh;
  if (entryMesh) {
    mesh = Mesh();
    mesh->names.assign(entryMesh->names.begin(), entryMesh->names.end());
    mesh->sizes.assign(entryMesh->sizes.begin(), entryMesh->sizes.end());
    mesh->contextAxis = entryMesh->zigzagAxis;
    mesh->contextZigzag = entryMesh->zigzagAxis.has_value();
  }
  // Global shape and spec from the buffer's `weft.sharding`, if any.
  auto place = [&](EntryBuffer &buffer, DictionaryAttr attrs) -> LogicalResult {
    if (!runtimeDtype(buffer.type.getElementType()))
      return func.emitError()
             << "the runtime has no buffers of " << buffer.type.getElementType()
             << " (buffer '" << buffer.name << "')";
    buffer.globalShape.assign(buffer.type.getShape().begin(),
                              buffer.type.getShape().end());
    TensorSharding sharding = TensorSharding::replicated(buffer.type.getRank());
    auto text = attrs ? attrs.getAs<StringAttr>(WeftDialect::kShardingAttrName)
                      : StringAttr();
    if (text) {
      std::optional<TensorSharding> parsed =
          mesh ? TensorSharding::parse(text.getValue(), *mesh) : std::nullopt;
      if (!parsed || parsed->dims.size() != buffer.globalShape.size())
        return func.emitError()
               << "cannot read the sharding '" << text.getValue() << "' of '"
               << buffer.name << "'";
      sharding = *parsed;
    }
    for (auto [dim, split] : llvm::enumerate(sharding.dims)) {
      buffer.globalShape[dim] *= mesh ? mesh->size(split.axes) : 1;
      buffer.numShards *= mesh ? mesh->size(split.axes) : 1;
    }
    // An uneven split pads the local shape; the true one is recorded.
    if (auto global = attrs ? attrs.getAs<DenseI64ArrayAttr>(
                                  WeftDialect::kGlobalShapeAttrName)
                            : DenseI64ArrayAttr())
      buffer.globalShape.assign(global.asArrayRef().begin(),
                                global.asArrayRef().end());
    buffer.spec = sharding.runtimeSpec(mesh ? *mesh : Mesh());
    return success();
  };
  std::vector<EntryBuffer> buffers;
  weightsBytes = runtime::kWeightsHeaderBytes;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    EntryBuffer buffer;
    buffer.type = llvm::cast<RankedTensorType>(func.getArgumentTypes()[i]);
    if (auto name =
            func.getArgAttrOfType<StringAttr>(i, WeftDialect::kParamAttrName)) {
      buffer.role = EntryBuffer::Role::Param;
      buffer.name = name.str();
    } else if (auto state = func.getArgAttrOfType<StringAttr>(
                   i, WeftDialect::kStateAttrName)) {
      buffer.role = EntryBuffer::Role::State;
      buffer.name = state.str();
    } else {
      buffer.role = EntryBuffer::Role::Input;
      auto inputName =
          func.getArgAttrOfType<StringAttr>(i, WeftDialect::kInputAttrName);
      buffer.name = inputName ? inputName.str() : "arg" + std::to_string(i);
      if (auto bound = func.getArgAttrOfType<IntegerAttr>(
              i, WeftDialect::kIndexBoundAttrName))
        buffer.indexBound = bound.getInt();
    }
    if (failed(place(buffer, func.getArgAttrDict(i))))
      return failure();
    if (buffer.role == EntryBuffer::Role::Param) {
      buffer.weightsOffset = weightsBytes;
      buffer.shardStride =
          llvm::alignTo(buffer.localBytes(), runtime::kWeightsAlignment);
      weightsBytes += buffer.shardStride * buffer.numShards;
    }
    buffers.push_back(buffer);
  }
  auto names = func->getAttrOfType<ArrayAttr>(WeftDialect::kOutputsAttrName);
  for (auto [i, type] : llvm::enumerate(func.getResultTypes())) {
    EntryBuffer buffer;
    buffer.role = EntryBuffer::Role::Output;
    buffer.type = llvm::cast<RankedTensorType>(type);
    buffer.name = names ? llvm::cast<StringAttr>(names[i]).str()
                        : "result" + std::to_string(i);
    if (failed(place(buffer, func.getResultAttrDict(i))))
      return failure();
    buffers.push_back(buffer);
  }
  llvm::StringSet<> updated;
  for (const EntryBuffer &buffer : buffers)
    if (buffer.role == EntryBuffer::Role::Output)
      updated.insert(buffer.name);
  for (EntryBuffer &buffer : buffers)
    buffer.trains = buffer.role == EntryBuffer::Role::Param &&
                    updated.contains("param:" + buffer.name);
  return buffers;
}

std::string buildManifest(func::FuncOp func,
                          const std::vector<EntryBuffer> &buffers,
                          const EntryMesh *mesh, StringRef device,
                          runtime::GradSync gradSync, int64_t gradSyncAxes,
                          int64_t dpSyncEvery, int64_t dpSyncAxes) {
  runtime::Manifest manifest;
  manifest.device = device.str();
  manifest.gradSync = gradSync;
  manifest.gradSyncAxes = gradSyncAxes;
  manifest.dpSyncEvery = dpSyncEvery;
  manifest.dpSyncAxes = dpSyncAxes;
  if (auto optimizer = func->getAttrOfType<DictionaryAttr>(
          WeftDialect::kOptimizerAttrName)) {
    auto number = [&](StringRef key) {
      auto value = optimizer.getAs<FloatAttr>(key);
      return value ? value.getValueAsDouble() : 0.0;
    };
    auto integer = [&](StringRef key) {
      auto value = optimizer.getAs<IntegerAttr>(key);
      return value ? value.getInt() : 0;
    };
    auto text = [&](StringRef key) {
      auto value = optimizer.getAs<StringAttr>(key);
      return value ? value.str() : std::string();
    };
    manifest.training = runtime::ManifestTraining{
        text("name"),     number("beta1"),          number("beta2"),
        integer("vocab"), double(integer("flops")), text("tokens")};
  }
  if (mesh) {
    manifest.mesh.names = mesh->names;
    manifest.mesh.sizes = mesh->sizes;
    manifest.groups = mesh->groupMasks;
  }
  for (const EntryBuffer &b : buffers) {
    runtime::ManifestBuffer entry;
    entry.role = b.role == EntryBuffer::Role::Input   ? WEFT_INPUT
                 : b.role == EntryBuffer::Role::Param ? WEFT_PARAM
                 : b.role == EntryBuffer::Role::State ? WEFT_STATE
                                                      : WEFT_OUTPUT;
    entry.name = b.name;
    // describeEntry takes only the element types the runtime has.
    entry.dtype = *runtimeDtype(b.type.getElementType());
    entry.shape = b.globalShape;
    entry.sharding = b.spec;
    entry.weightsOffset = b.weightsOffset;
    entry.shardStride = b.shardStride;
    entry.indexBound = b.indexBound;
    manifest.buffers.push_back(std::move(entry));
  }
  return manifest.toJson();
}

static std::unique_ptr<llvm::TargetMachine>
hostTargetMachine(unsigned optLevel, std::string &error) {
  static bool initialized = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    return true;
  }();
  (void)initialized;
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return nullptr;
  llvm::SubtargetFeatures features;
  for (auto &feature : llvm::sys::getHostCPUFeatures())
    features.AddFeature(feature.first(), feature.second);
  return std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
      triple, llvm::sys::getHostCPUName(), features.getString(),
      llvm::TargetOptions(), llvm::Reloc::PIC_, std::nullopt,
      optLevel >= 2 ? llvm::CodeGenOptLevel::Aggressive
                    : llvm::CodeGenOptLevel::Default));
}

std::unique_ptr<llvm::Module> translateToLLVMIR(
    ModuleOp module, llvm::LLVMContext &context, llvm::StringRef entryName,
    const std::vector<EntryBuffer> &buffers, const std::string &manifest,
    unsigned optLevel, std::string &error, llvm::StringRef symbolSuffix) {
  registerBuiltinDialectTranslation(*module.getContext());
  registerLLVMDialectTranslation(*module.getContext());
  registerOpenMPDialectTranslation(*module.getContext());
  // A CUDA program's kernels are gpu.binary ops launched by gpu ops.
  registerGPUDialectTranslation(*module.getContext());
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, context, "weft_model");
  if (!llvmModule) {
    error = "translation to LLVM IR failed";
    return nullptr;
  }
  llvm::Function *main = llvmModule->getFunction(entryName);
  if (!main) {
    error = ("the lowered module has no function '" + entryName + "'").str();
    return nullptr;
  }
  // weft_entry(void **buffers): pass each buffer as a memref descriptor
  // (allocated, aligned, offset, sizes..., strides...) with static shapes.
  llvm::Type *ptr = llvm::PointerType::get(context, 0);
  auto *entry = llvm::Function::Create(
      llvm::FunctionType::get(llvm::Type::getVoidTy(context), {ptr}, false),
      llvm::GlobalValue::ExternalLinkage, runtime::kEntrySymbol + symbolSuffix,
      *llvmModule);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(context, "entry", entry));
  std::vector<llvm::Value *> args;
  for (auto [i, buffer] : llvm::enumerate(buffers)) {
    llvm::Value *slot = b.CreateConstGEP1_64(ptr, entry->getArg(0), i);
    llvm::Value *data = b.CreateLoad(ptr, slot);
    args.push_back(data);
    args.push_back(data);
    args.push_back(b.getInt64(0));
    ArrayRef<int64_t> shape = buffer.type.getShape();
    for (int64_t d : shape)
      args.push_back(b.getInt64(d));
    int64_t stride = 1;
    std::vector<int64_t> strides(shape.size());
    for (int64_t d = shape.size() - 1; d >= 0; --d) {
      strides[d] = stride;
      stride *= shape[d];
    }
    for (int64_t s : strides)
      args.push_back(b.getInt64(s));
  }
  if (main->arg_size() != args.size()) {
    error = "the lowered entry takes " + std::to_string(main->arg_size()) +
            " values but the buffers give " + std::to_string(args.size());
    return nullptr;
  }
  b.CreateCall(main, args);
  b.CreateRetVoid();

  auto *text = llvm::ConstantDataArray::getString(context, manifest);
  new llvm::GlobalVariable(*llvmModule, text->getType(), /*isConstant=*/true,
                           llvm::GlobalValue::ExternalLinkage, text,
                           runtime::kManifestSymbol + symbolSuffix);
  // Only the entry and the manifest are seen from outside, so that the
  // programs of a pipeline's ranks link into one executable.
  for (llvm::Function &function : *llvmModule)
    if (!function.isDeclaration() && &function != entry)
      function.setLinkage(llvm::GlobalValue::InternalLinkage);
  for (llvm::GlobalVariable &global : llvmModule->globals())
    if (!global.isDeclaration() && !global.getName().starts_with("llvm.") &&
        global.getName() != (runtime::kManifestSymbol + symbolSuffix).str())
      global.setLinkage(llvm::GlobalValue::InternalLinkage);

  std::unique_ptr<llvm::TargetMachine> machine =
      hostTargetMachine(optLevel, error);
  if (!machine)
    return nullptr;
  llvmModule->setDataLayout(machine->createDataLayout());
  llvmModule->setTargetTriple(machine->getTargetTriple());
  if (llvm::verifyModule(*llvmModule, &llvm::errs())) {
    error = "the generated LLVM IR does not verify";
    return nullptr;
  }
  if (optLevel > 0) {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder builder(machine.get());
    builder.registerModuleAnalyses(mam);
    builder.registerCGSCCAnalyses(cgam);
    builder.registerFunctionAnalyses(fam);
    builder.registerLoopAnalyses(lam);
    builder.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::OptimizationLevel level = optLevel >= 3 ? llvm::OptimizationLevel::O3
                                    : optLevel == 2
                                        ? llvm::OptimizationLevel::O2
                                        : llvm::OptimizationLevel::O1;
    builder.buildPerModuleDefaultPipeline(level).run(*llvmModule, mam);
  }
  return llvmModule;
}

std::unique_ptr<llvm::Module> pipelineTable(llvm::LLVMContext &context,
                                            int64_t programs, unsigned optLevel,
                                            std::string &error) {
  auto module = std::make_unique<llvm::Module>("weft_pipeline", context);
  llvm::Type *ptr = llvm::PointerType::get(context, 0);
  auto *entryType =
      llvm::FunctionType::get(llvm::Type::getVoidTy(context), {ptr}, false);
  std::vector<llvm::Constant *> entries, manifests;
  for (int64_t r = 0; r < programs; ++r) {
    std::string suffix = "_pp" + std::to_string(r);
    entries.push_back(
        llvm::Function::Create(entryType, llvm::GlobalValue::ExternalLinkage,
                               runtime::kEntrySymbol + suffix, *module));
    manifests.push_back(new llvm::GlobalVariable(
        *module, llvm::Type::getInt8Ty(context), /*isConstant=*/true,
        llvm::GlobalValue::ExternalLinkage, nullptr,
        runtime::kManifestSymbol + suffix));
  }
  auto *arrayType = llvm::ArrayType::get(ptr, programs);
  new llvm::GlobalVariable(*module, arrayType, true,
                           llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantArray::get(arrayType, entries),
                           runtime::kPipelineEntriesSymbol);
  new llvm::GlobalVariable(*module, arrayType, true,
                           llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantArray::get(arrayType, manifests),
                           runtime::kPipelineManifestsSymbol);
  auto *i64 = llvm::Type::getInt64Ty(context);
  new llvm::GlobalVariable(
      *module, i64, true, llvm::GlobalValue::ExternalLinkage,
      llvm::ConstantInt::get(i64, programs), runtime::kPipelineProgramsSymbol);
  std::unique_ptr<llvm::TargetMachine> machine =
      hostTargetMachine(optLevel, error);
  if (!machine)
    return nullptr;
  module->setDataLayout(machine->createDataLayout());
  module->setTargetTriple(machine->getTargetTriple());
  return module;
}

bool emitObjectFile(llvm::Module &module, llvm::StringRef path,
                    unsigned optLevel, std::string &error) {
  std::unique_ptr<llvm::TargetMachine> machine =
      hostTargetMachine(optLevel, error);
  if (!machine)
    return false;
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec, llvm::sys::fs::OF_None);
  if (ec) {
    error = "cannot write '" + path.str() + "': " + ec.message();
    return false;
  }
  llvm::legacy::PassManager pm;
  if (machine->addPassesToEmitFile(pm, out, nullptr,
                                   llvm::CodeGenFileType::ObjectFile)) {
    error = "the target cannot emit object files";
    return false;
  }
  pm.run(module);
  return true;
}

} // namespace weft

//===- AutodiffTest.cpp - Every VJP rule against finite differences -------===//
//
// Each case is a function of float parameters (and integer inputs). The test
// turns its results into the scalar L = sum(sin(result)) (sin makes every
// element's weight different, so a transposed or misplaced gradient shows),
// derives the gradient function, evaluates it with the double-precision
// reference evaluator, and compares every parameter's gradient with central
// finite differences of L (step 1e-6, tolerance 1e-5 relative to the
// largest gradient entry).
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/Transforms/Autodiff.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Dialect/Weft/Reference/Evaluator.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "gtest/gtest.h"

#include <cmath>
#include <random>

using namespace mlir;
using namespace weft;

namespace {

struct Case {
  const char *name;
  const char *source;        // a module with func @f
  double low = -1, high = 1; // range of the float arguments
  int64_t indexBound = 4;    // integer arguments are drawn in [0, bound)
  int64_t zeroEvery = 0;     // if > 0, every such float element is 0
};

void PrintTo(const Case &c, std::ostream *os) { *os << c.name; }

/// Adds @loss: @f's body, then sum(sin(r)) over every result r.
func::FuncOp buildLoss(ModuleOp module) {
  auto f = module.lookupSymbol<func::FuncOp>("f");
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  Location loc = f.getLoc();
  Type element = Float64Type::get(b.getContext());
  for (Type t : f.getResultTypes())
    element = llvm::cast<RankedTensorType>(t).getElementType();
  auto lossType = RankedTensorType::get({}, element);
  auto loss = func::FuncOp::create(
      b, loc, "loss",
      FunctionType::get(b.getContext(), f.getArgumentTypes(), {lossType}));
  for (unsigned i = 0; i < f.getNumArguments(); ++i)
    loss.setArgAttrs(i, f.getArgAttrDict(i));
  Block *body = loss.addEntryBlock();
  b.setInsertionPointToStart(body);
  IRMapping mapping;
  mapping.map(f.getArguments(), body->getArguments());
  Value total;
  for (Operation &op : f.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (Value result : ret.getOperands()) {
        Value v = mapping.lookup(result);
        auto type = llvm::cast<RankedTensorType>(v.getType());
        SmallVector<int64_t> axes =
            llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
        Value s = SinOp::create(b, loc, v);
        if (!axes.empty())
          s = ReduceSumOp::create(b, loc, s, b.getDenseI64ArrayAttr(axes),
                                  UnitAttr());
        total = total ? Value(AddOp::create(b, loc, total, s)) : s;
      }
      break;
    }
    b.clone(op, mapping);
  }
  func::ReturnOp::create(b, loc, total);
  return loss;
}

double evaluateLoss(func::FuncOp loss, ArrayRef<HostTensor> args) {
  FailureOr<SmallVector<HostTensor>> out = evaluateFunction(loss, args);
  EXPECT_TRUE(succeeded(out));
  return succeeded(out) ? (*out)[0].floats[0] : NAN;
}

void checkGradients(const Case &c) {
  SCOPED_TRACE(c.name);
  MLIRContext ctx;
  ctx.loadDialect<WeftDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(c.source, &ctx);
  ASSERT_TRUE(module);
  func::FuncOp loss = buildLoss(*module);
  FailureOr<func::FuncOp> grad = buildGradientFunction(loss, "loss_grad");
  ASSERT_TRUE(succeeded(grad));
  ASSERT_TRUE(succeeded(mlir::verify(*module)));

  std::mt19937 rng(7);
  std::uniform_real_distribution<double> uniform(c.low, c.high);
  SmallVector<HostTensor> args;
  for (Type t : loss.getArgumentTypes()) {
    auto type = llvm::cast<RankedTensorType>(t);
    HostTensor arg = HostTensor::zeros(type.getShape(), type.getElementType());
    if (arg.isFloat())
      for (auto [i, v] : llvm::enumerate(arg.floats))
        v = c.zeroEvery && i % c.zeroEvery == 0 ? 0.0 : uniform(rng);
    else
      for (int64_t &v : arg.ints)
        v = std::uniform_int_distribution<int64_t>(0, c.indexBound - 1)(rng);
    args.push_back(arg);
  }
  FailureOr<SmallVector<HostTensor>> out = evaluateFunction(*grad, args);
  ASSERT_TRUE(succeeded(out));
  // Gradients follow the loss, one per weft.param argument in order.
  unsigned next = 1;
  for (unsigned i = 0; i < loss.getNumArguments(); ++i) {
    if (!loss.getArgAttr(i, WeftDialect::kParamAttrName))
      continue;
    const HostTensor &analytic = (*out)[next++];
    ASSERT_EQ(analytic.shape, args[i].shape);
    double scale = 1e-3;
    for (double v : analytic.floats)
      scale = std::max(scale, std::abs(v));
    for (size_t e = 0; e < args[i].floats.size(); ++e) {
      const double step = 1e-6;
      double saved = args[i].floats[e];
      args[i].floats[e] = saved + step;
      double up = evaluateLoss(loss, args);
      args[i].floats[e] = saved - step;
      double down = evaluateLoss(loss, args);
      args[i].floats[e] = saved;
      double numeric = (up - down) / (2 * step);
      EXPECT_NEAR(analytic.floats[e], numeric, 1e-5 * scale)
          << "argument " << i << ", element " << e;
    }
  }
}

const Case kCases[] = {
    {"add_broadcast", R"(
func.func @f(%a: tensor<2x3xf64> {weft.param = "a"}, %b: tensor<3xf64> {weft.param = "b"}) -> tensor<2x3xf64> {
  %0 = weft.add %a, %b : tensor<2x3xf64>, tensor<3xf64>
  return %0 : tensor<2x3xf64>
})"},
    {"sub_mul_div", R"(
func.func @f(%a: tensor<2x3xf64> {weft.param = "a"}, %b: tensor<2x1xf64> {weft.param = "b"}) -> tensor<2x3xf64> {
  %0 = weft.sub %a, %b : tensor<2x3xf64>, tensor<2x1xf64>
  %1 = weft.mul %0, %a : tensor<2x3xf64>, tensor<2x3xf64>
  %2 = weft.div %1, %b : tensor<2x3xf64>, tensor<2x1xf64>
  return %2 : tensor<2x3xf64>
})",
     0.5, 1.5},
    {"pow_max_min", R"(
func.func @f(%a: tensor<2x3xf64> {weft.param = "a"}, %b: tensor<2x3xf64> {weft.param = "b"}) -> (tensor<2x3xf64>, tensor<2x3xf64>, tensor<2x3xf64>) {
  %0 = weft.pow %a, %b : tensor<2x3xf64>, tensor<2x3xf64>
  %1 = weft.max %a, %b : tensor<2x3xf64>, tensor<2x3xf64>
  %2 = weft.min %a, %b : tensor<2x3xf64>, tensor<2x3xf64>
  return %0, %1, %2 : tensor<2x3xf64>, tensor<2x3xf64>, tensor<2x3xf64>
})",
     0.5, 1.5},
    {"unary", R"(
func.func @f(%a: tensor<5xf64> {weft.param = "a"}) -> (tensor<5xf64>, tensor<5xf64>, tensor<5xf64>, tensor<5xf64>, tensor<5xf64>, tensor<5xf64>, tensor<5xf64>) {
  %0 = weft.exp %a : tensor<5xf64>
  %1 = weft.log %a : tensor<5xf64>
  %2 = weft.sqrt %a : tensor<5xf64>
  %3 = weft.rsqrt %a : tensor<5xf64>
  %4 = weft.reciprocal %a : tensor<5xf64>
  %5 = weft.neg %a : tensor<5xf64>
  %6 = weft.abs %a : tensor<5xf64>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<5xf64>, tensor<5xf64>, tensor<5xf64>, tensor<5xf64>, tensor<5xf64>, tensor<5xf64>, tensor<5xf64>
})",
     0.5, 2.0},
    {"activations", R"(
func.func @f(%a: tensor<6xf64> {weft.param = "a"}) -> (tensor<6xf64>, tensor<6xf64>, tensor<6xf64>, tensor<6xf64>, tensor<6xf64>, tensor<6xf64>, tensor<6xf64>, tensor<6xf64>, tensor<6xf64>) {
  %0 = weft.tanh %a : tensor<6xf64>
  %1 = weft.sigmoid %a : tensor<6xf64>
  %2 = weft.silu %a : tensor<6xf64>
  %3 = weft.relu %a : tensor<6xf64>
  %4 = weft.gelu %a : tensor<6xf64>
  %5 = weft.gelu %a {approximate = "tanh"} : tensor<6xf64>
  %6 = weft.erf %a : tensor<6xf64>
  %7 = weft.sin %a : tensor<6xf64>
  %8 = weft.cos %a : tensor<6xf64>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8 : tensor<6xf64>, tensor<6xf64>, tensor<6xf64>, tensor<6xf64>, tensor<6xf64>, tensor<6xf64>, tensor<6xf64>, tensor<6xf64>, tensor<6xf64>
})",
     -2, 2},
    {"linear", R"(
func.func @f(%x: tensor<2x3x4xf64> {weft.param = "x"}, %w: tensor<4x5xf64> {weft.param = "w"}, %b: tensor<5xf64> {weft.param = "b"}, %wt: tensor<5x4xf64> {weft.param = "wt"}) -> (tensor<2x3x5xf64>, tensor<2x3x5xf64>) {
  %0 = weft.linear %x, %w, %b : tensor<2x3x4xf64>, tensor<4x5xf64>, tensor<5xf64>
  %1 = weft.linear %x, %wt <{transpose_weight}> : tensor<2x3x4xf64>, tensor<5x4xf64>
  return %0, %1 : tensor<2x3x5xf64>, tensor<2x3x5xf64>
})"},
    {"matmul_batch_broadcast", R"(
func.func @f(%a: tensor<2x3x4xf64> {weft.param = "a"}, %b: tensor<4x2xf64> {weft.param = "b"}) -> tensor<2x3x2xf64> {
  %0 = weft.matmul %a, %b : tensor<2x3x4xf64>, tensor<4x2xf64>
  return %0 : tensor<2x3x2xf64>
})"},
    {"layout", R"(
func.func @f(%a: tensor<2x6xf64> {weft.param = "a"}, %b: tensor<1x3xf64> {weft.param = "b"}) -> (tensor<3x4xf64>, tensor<6x2xf64>, tensor<2x3xf64>, tensor<2x2x3xf64>) {
  %0 = weft.reshape %a : tensor<2x6xf64> -> tensor<3x4xf64>
  %1 = weft.transpose %a <{permutation = array<i64: 1, 0>}> : tensor<2x6xf64>
  %2 = weft.expand %b : tensor<1x3xf64> -> tensor<2x3xf64>
  %3 = weft.unsqueeze %2 <{axes = array<i64: 0>}> : tensor<2x3xf64>
  %4 = weft.concat %3, %3 <{axis = 0 : i64}> : tensor<1x2x3xf64>, tensor<1x2x3xf64>
  return %0, %1, %2, %4 : tensor<3x4xf64>, tensor<6x2xf64>, tensor<2x3xf64>, tensor<2x2x3xf64>
})"},
    {"split_slice", R"(
func.func @f(%a: tensor<2x6xf64> {weft.param = "a"}) -> (tensor<2x2xf64>, tensor<2x4xf64>, tensor<1x3xf64>) {
  %0:2 = weft.split %a <{axis = 1 : i64, sizes = array<i64: 2, 4>}> : tensor<2x6xf64>
  %1 = weft.slice %a <{offsets = array<i64: 1, 2>, sizes = array<i64: 1, 3>, strides = array<i64: 1, 1>}> : tensor<2x6xf64>
  return %0#0, %0#1, %1 : tensor<2x2xf64>, tensor<2x4xf64>, tensor<1x3xf64>
})"},
    {"where_reductions", R"(
func.func @f(%a: tensor<2x3xf64> {weft.param = "a"}, %b: tensor<2x3xf64> {weft.param = "b"}) -> (tensor<2x3xf64>, tensor<3xf64>, tensor<2x1xf64>) {
  %zero = weft.constant dense<0.0> : tensor<f64>
  %c = weft.greater %a, %zero : tensor<2x3xf64>, tensor<f64>
  %0 = weft.where %c, %a, %b : tensor<2x3xi1>, tensor<2x3xf64>, tensor<2x3xf64>
  %1 = weft.reduce_sum %a <{axes = array<i64: 0>}> : tensor<2x3xf64>
  %2 = weft.reduce_mean %b <{axes = array<i64: 1>, keepdims}> : tensor<2x3xf64>
  return %0, %1, %2 : tensor<2x3xf64>, tensor<3xf64>, tensor<2x1xf64>
})"},
    {"softmax", R"(
func.func @f(%a: tensor<2x5xf64> {weft.param = "a"}) -> (tensor<2x5xf64>, tensor<2x5xf64>) {
  %0 = weft.softmax %a {axis = 1} : tensor<2x5xf64>
  %1 = weft.log_softmax %a {axis = 0} : tensor<2x5xf64>
  return %0, %1 : tensor<2x5xf64>, tensor<2x5xf64>
})",
     -2, 2},
    {"layer_norm", R"(
func.func @f(%x: tensor<2x3x4xf64> {weft.param = "x"}, %g: tensor<4xf64> {weft.param = "g"}, %b: tensor<4xf64> {weft.param = "b"}) -> tensor<2x3x4xf64> {
  %0 = weft.layer_norm %x, %g, %b {axis = 2, epsilon = 1.0e-5 : f64} : tensor<2x3x4xf64>, tensor<4xf64>, tensor<4xf64>
  return %0 : tensor<2x3x4xf64>
})"},
    {"rms_norm", R"(
func.func @f(%x: tensor<3x2x4xf64> {weft.param = "x"}, %g: tensor<2x4xf64> {weft.param = "g"}) -> tensor<3x2x4xf64> {
  %0 = weft.rms_norm %x, %g {axis = 1, epsilon = 1.0e-6 : f64} : tensor<3x2x4xf64>, tensor<2x4xf64>
  return %0 : tensor<3x2x4xf64>
})"},
    {"attention_causal", R"(
func.func @f(%q: tensor<2x2x3x4xf64> {weft.param = "q"}, %k: tensor<2x2x5x4xf64> {weft.param = "k"}, %v: tensor<2x2x5x3xf64> {weft.param = "v"}) -> tensor<2x2x3x3xf64> {
  %0 = weft.attention %q, %k, %v <{causal}> : tensor<2x2x3x4xf64>, tensor<2x2x5x4xf64>, tensor<2x2x5x3xf64>
  return %0 : tensor<2x2x3x3xf64>
})"},
    {"attention_grouped_masked", R"(
func.func @f(%q: tensor<1x4x3x2xf64> {weft.param = "q"}, %k: tensor<1x2x3x2xf64> {weft.param = "k"}, %v: tensor<1x2x3x2xf64> {weft.param = "v"}, %m: tensor<1x1x3x3xf64> {weft.param = "m"}) -> tensor<1x4x3x2xf64> {
  %0 = weft.attention %q, %k, %v, %m <{scale = 0.5 : f64}> : tensor<1x4x3x2xf64>, tensor<1x2x3x2xf64>, tensor<1x2x3x2xf64>, tensor<1x1x3x3xf64>
  return %0 : tensor<1x4x3x2xf64>
})"},
    // Differentiated into one weft.attention_grad (context parallelism),
    // whose reference evaluation is checked here.
    {"attention_grad_grouped_causal", R"(
func.func @f(%q: tensor<1x4x5x2xf64> {weft.param = "q"}, %k: tensor<1x2x5x2xf64> {weft.param = "k"}, %v: tensor<1x2x5x3xf64> {weft.param = "v"}) -> tensor<1x4x5x3xf64> {
  %0 = weft.attention %q, %k, %v <{causal, scale = 0.7 : f64}> {weft.fused_backward} : tensor<1x4x5x2xf64>, tensor<1x2x5x2xf64>, tensor<1x2x5x3xf64>
  return %0 : tensor<1x4x5x3xf64>
})"},
    {"gather_embedding", R"(
func.func @f(%table: tensor<5x3xf64> {weft.param = "table"}, %ids: tensor<2x3xi64> {weft.input = "ids"}) -> tensor<2x3x3xf64> {
  %0 = weft.gather %table, %ids <{axis = 0 : i64}> : tensor<5x3xf64>, tensor<2x3xi64>
  return %0 : tensor<2x3x3xf64>
})",
     -1, 1, 5},
    // Falcon's export picks its shared key and value heads by a scalar
    // index on an inner axis.
    {"gather_inner_axes", R"(
func.func @f(%data: tensor<2x5x3xf64> {weft.param = "data"}, %ids: tensor<2x2xi64> {weft.input = "ids"}, %id: tensor<i64> {weft.input = "id"}) -> (tensor<2x2x2x3xf64>, tensor<2x5xf64>) {
  %0 = weft.gather %data, %ids <{axis = 1 : i64}> : tensor<2x5x3xf64>, tensor<2x2xi64>
  %1 = weft.gather %data, %id <{axis = 2 : i64}> : tensor<2x5x3xf64>, tensor<i64>
  return %0, %1 : tensor<2x2x2x3xf64>, tensor<2x5xf64>
})",
     -1, 1, 3},
    // Ids drawn in [0, 5): id 4 is outside the 4 rows and adds nothing.
    {"scatter_add", R"(
func.func @f(%u: tensor<2x3x2xf64> {weft.param = "u"}, %ids: tensor<2x3xi64> {weft.input = "ids"}) -> tensor<4x2xf64> {
  %0 = weft.scatter_add %u, %ids : tensor<2x3x2xf64>, tensor<2x3xi64> -> tensor<4x2xf64>
  return %0 : tensor<4x2xf64>
})",
     -1, 1, 5},
    // Labels drawn in [0, 5): label 4 is the ignored one. Both results are
    // differentiated (the log-sum-exp's own rule too).
    {"softmax_cross_entropy", R"(
func.func @f(%x: tensor<2x3x5xf64> {weft.param = "x"}, %labels: tensor<2x3xi64> {weft.input = "labels"}) -> (tensor<2x3xf64>, tensor<2x3xf64>) {
  %loss, %lse = weft.softmax_cross_entropy %x, %labels <{ignore_index = 4 : i64}> : tensor<2x3x5xf64>, tensor<2x3xi64> -> tensor<2x3xf64>
  return %loss, %lse : tensor<2x3xf64>, tensor<2x3xf64>
})",
     -2, 2, 5},
    {"extrema_trilu", R"(
func.func @f(%a: tensor<3x4xf64> {weft.param = "a"}) -> (tensor<3xf64>, tensor<1x4xf64>, tensor<3x4xf64>, tensor<3x4xf64>) {
  %0 = weft.reduce_max %a <{axes = array<i64: 1>}> : tensor<3x4xf64>
  %1 = weft.reduce_min %a <{axes = array<i64: 0>, keepdims}> : tensor<3x4xf64>
  %2 = weft.trilu %a {diagonal = 1} : tensor<3x4xf64>
  %3 = weft.trilu %a {upper} : tensor<3x4xf64>
  return %0, %1, %2, %3 : tensor<3xf64>, tensor<1x4xf64>, tensor<3x4xf64>, tensor<3x4xf64>
})"},
    // Zeros at flat positions 0, 4, 8 and 12: row 0 holds two, rows 1 and
    // 2 one each; column 1 none, the others one each.
    {"reduce_prod_with_zeros", R"(
func.func @f(%a: tensor<3x5xf64> {weft.param = "a"}) -> (tensor<3xf64>, tensor<5xf64>) {
  %0 = weft.reduce_prod %a <{axes = array<i64: 1>}> : tensor<3x5xf64>
  %1 = weft.reduce_prod %a <{axes = array<i64: 0>}> : tensor<3x5xf64>
  return %0, %1 : tensor<3xf64>, tensor<5xf64>
})",
     0.5, 1.5, 4, 4},
};

class AutodiffRule : public ::testing::TestWithParam<Case> {};

TEST_P(AutodiffRule, MatchesFiniteDifferences) { checkGradients(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Weft, AutodiffRule, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case> &info) {
                           return std::string(info.param.name);
                         });

TEST(Autodiff, AnOpWithoutARuleIsAnErrorAtItSayingWhy) {
  MLIRContext ctx;
  ctx.loadDialect<WeftDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(R"(
func.func @loss(%x: tensor<1x2x5xf64> {weft.param = "x"}, %w: tensor<3x2x2xf64> {weft.param = "w"}) -> tensor<f64> {
  %0 = weft.conv %x, %w <{strides = array<i64: 1>, pads = array<i64: 0, 0>, dilations = array<i64: 1>, group = 1}> : tensor<1x2x5xf64>, tensor<3x2x2xf64>
  %1 = weft.reduce_sum %0 <{axes = array<i64: 0, 1, 2>}> : tensor<1x3x4xf64>
  return %1 : tensor<f64>
})",
                                                             &ctx);
  ASSERT_TRUE(module);
  std::string message;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  auto loss = module->lookupSymbol<func::FuncOp>("loss");
  EXPECT_TRUE(failed(buildGradientFunction(loss, "loss_grad")));
  EXPECT_EQ(message, "autodiff: weft.conv has no gradient rule: its input's "
                     "adjoint is a transposed convolution, which weft has no "
                     "op for");
}

} // namespace

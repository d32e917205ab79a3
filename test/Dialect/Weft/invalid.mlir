// RUN: weft-opt %s -split-input-file -verify-diagnostics

func.func @add_not_broadcastable(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'weft.add' operand #1 shape [4] does not broadcast with [2, 3]}}
  %0 = weft.add %a, %b : tensor<2x3xf32>, tensor<4xf32>
  return
}

// -----

func.func @add_element_types(%a: tensor<3xf32>, %b: tensor<3xi64>) {
  // expected-error @+1 {{requires the same element type for all operands}}
  %0 = "weft.add"(%a, %b) : (tensor<3xf32>, tensor<3xi64>) -> tensor<3xf32>
  return
}

// -----

func.func @wrong_result_shape(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "weft.mul"(%a, %b) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @gelu_approximation(%a: tensor<3xf32>) {
  // expected-error @+1 {{approximate must be "none" or "tanh", got "sigmoid"}}
  %0 = weft.gelu %a {approximate = "sigmoid"} : tensor<3xf32>
  return
}

// -----

func.func @gelu_grad_approximation(%a: tensor<3xf32>) {
  // expected-error @+1 {{approximate must be "none" or "tanh", got "exact"}}
  %0 = weft.gelu_grad %a, %a {approximate = "exact"} : tensor<3xf32>
  return
}

// -----

func.func @gelu_grad_types(%g: tensor<3xbf16>, %x: tensor<3xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "weft.gelu_grad"(%g, %x) : (tensor<3xbf16>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @sqrt_of_integers(%a: tensor<3xi64>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values}}
  %0 = weft.sqrt %a : tensor<3xi64>
  return
}

// -----

func.func @matmul_contraction(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{'weft.matmul' contraction dims differ: lhs [2, 3] has K = 3 but rhs [4, 5] has K = 4}}
  %0 = weft.matmul %a, %b : tensor<2x3xf32>, tensor<4x5xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x2x3xf32>, %b: tensor<3x3x5xf32>) {
  // expected-error @+1 {{'weft.matmul' batch dims of [2, 2, 3] and [3, 3, 5] do not broadcast}}
  %0 = weft.matmul %a, %b : tensor<2x2x3xf32>, tensor<3x3x5xf32>
  return
}

// -----

func.func @matmul_scalar(%a: tensor<f32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'weft.matmul' operands must have rank >= 1}}
  %0 = weft.matmul %a, %b : tensor<f32>, tensor<3xf32>
  return
}

// -----

func.func @linear_weight_rank(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'weft.linear' weight must be 2-D, got [8]}}
  %0 = weft.linear %x, %w : tensor<2x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @linear_k(%x: tensor<2x8xf32>, %w: tensor<4x16xf32>) {
  // expected-error @+1 {{'weft.linear' input's last dim 8 != weight's K 4}}
  %0 = weft.linear %x, %w : tensor<2x8xf32>, tensor<4x16xf32>
  return
}

// -----

func.func @linear_bias(%x: tensor<2x8xf32>, %w: tensor<8x16xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'weft.linear' bias must be [16], got [8]}}
  %0 = weft.linear %x, %w, %b : tensor<2x8xf32>, tensor<8x16xf32>, tensor<8xf32>
  return
}

// -----

func.func @conv_attrs(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x2x2xf32>) {
  // expected-error @+1 {{'weft.conv' needs 2 strides and dilations and 4 pads}}
  %0 = weft.conv %x, %w <{strides = array<i64: 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>}> : tensor<1x3x8x8xf32>, tensor<4x3x2x2xf32>
  return
}

// -----

func.func @conv_channels(%x: tensor<1x3x8x8xf32>, %w: tensor<4x2x2x2xf32>) {
  // expected-error @+1 {{'weft.conv' input channels 3 != weight channels 2 x group 1}}
  %0 = weft.conv %x, %w <{strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>}> : tensor<1x3x8x8xf32>, tensor<4x2x2x2xf32>
  return
}

// -----

func.func @conv_kernel(%x: tensor<1x3x2x2xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'weft.conv' kernel larger than the padded input in spatial dim 0}}
  %0 = weft.conv %x, %w <{strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>}> : tensor<1x3x2x2xf32>, tensor<4x3x3x3xf32>
  return
}

// -----

func.func @reduce_axes_order(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'weft.reduce_sum' axis must be strictly increasing}}
  %0 = weft.reduce_sum %x <{axes = array<i64: 2, 1>}> : tensor<2x3x4xf32>
  return
}

// -----

func.func @reduce_axis_range(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'weft.reduce_mean' axis 3 is out of range [0, 3)}}
  %0 = weft.reduce_mean %x <{axes = array<i64: 3>}> : tensor<2x3x4xf32>
  return
}

// -----

func.func @reduce_no_axes(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'weft.reduce_max' needs at least one axis}}
  %0 = weft.reduce_max %x <{axes = array<i64>}> : tensor<2x3x4xf32>
  return
}

// -----

func.func @softmax_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'weft.softmax' op axis 2 is out of range [0, 2)}}
  %0 = weft.softmax %x {axis = 2} : tensor<2x3xf32>
  return
}

// -----

func.func @softmax_negative_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'weft.log_softmax' op axis -1 is out of range [0, 2)}}
  %0 = weft.log_softmax %x {axis = -1} : tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_scale(%x: tensor<2x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'weft.layer_norm' op scale must have the normalized shape [8], got [4]}}
  %0 = weft.layer_norm %x, %g {axis = 1, epsilon = 1.0e-5 : f64} : tensor<2x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @layer_norm_bias(%x: tensor<2x8xf32>, %g: tensor<8xf32>, %b: tensor<2x8xf32>) {
  // expected-error @+1 {{'weft.layer_norm' op bias must have the normalized shape [8], got [2, 8]}}
  %0 = weft.layer_norm %x, %g, %b {axis = 1, epsilon = 1.0e-5 : f64} : tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_epsilon(%x: tensor<2x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'weft.layer_norm' op epsilon must be non-negative}}
  %0 = weft.layer_norm %x, %g {axis = 1, epsilon = -1.0 : f64} : tensor<2x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @rms_norm_axis(%x: tensor<2x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'weft.rms_norm' op axis 2 is out of range [0, 2)}}
  %0 = weft.rms_norm %x, %g {axis = 2, epsilon = 1.0e-6 : f64} : tensor<2x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @attention_rank(%q: tensor<4x16x8xf32>) {
  // expected-error @+1 {{'weft.attention' query, key and value must be 4-D [batch, heads, seq, head_dim]}}
  %0 = weft.attention %q, %q, %q : tensor<4x16x8xf32>, tensor<4x16x8xf32>, tensor<4x16x8xf32>
  return
}

// -----

func.func @attention_head_dim(%q: tensor<1x4x16x8xf32>, %k: tensor<1x4x16x6xf32>) {
  // expected-error @+1 {{'weft.attention' query head_dim 8 != key head_dim 6}}
  %0 = weft.attention %q, %k, %k : tensor<1x4x16x8xf32>, tensor<1x4x16x6xf32>, tensor<1x4x16x6xf32>
  return
}

// -----

func.func @attention_grad_out(%q: tensor<1x4x16x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{'weft.attention_grad' op out 'tensor<1x4x8x8xf32>' is not the attention's result 'tensor<1x4x16x8xf32>'}}
  %0:3 = weft.attention_grad %q, %q, %q, %o, %o : tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>
  return
}

// -----

func.func @attention_grad_heads(%q: tensor<1x4x16x8xf32>, %k: tensor<1x3x16x8xf32>) {
  // expected-error @+1 {{'weft.attention_grad' op query 'tensor<1x4x16x8xf32>', key 'tensor<1x3x16x8xf32>' and value 'tensor<1x3x16x8xf32>' are not the operands of one attention}}
  %0:3 = weft.attention_grad %q, %k, %k, %q, %q : tensor<1x4x16x8xf32>, tensor<1x3x16x8xf32>, tensor<1x3x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>
  return
}

// -----

func.func @attention_grad_log_sum_exp(%q: tensor<1x4x16x8xf32>, %lse: tensor<1x4x8xf32>) {
  // expected-error @+1 {{'weft.attention_grad' op log_sum_exp 'tensor<1x4x8xf32>' must be [batch, query heads, queries] [1, 4, 16]}}
  %0:3 = weft.attention_grad %q, %q, %q, %q, %q log_sum_exp(%lse : tensor<1x4x8xf32>) : tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>
  return
}

// -----

func.func @attention_grad_mask(%q: tensor<1x4x16x8xf32>, %m: tensor<1x1x8x16xi1>) {
  // expected-error @+1 {{'weft.attention_grad' mask [1, 1, 8, 16] does not broadcast to the scores [1, 4, 16, 16]}}
  %0:3 = weft.attention_grad %q, %q, %q, %q, %q mask(%m : tensor<1x1x8x16xi1>) : tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>
  return
}

// -----

func.func @attention_gqa(%q: tensor<1x4x16x8xf32>, %k: tensor<1x3x16x8xf32>) {
  // expected-error @+1 {{'weft.attention' query heads 4 must be a multiple of key/value heads 3}}
  %0 = weft.attention %q, %k, %k : tensor<1x4x16x8xf32>, tensor<1x3x16x8xf32>, tensor<1x3x16x8xf32>
  return
}

// -----

func.func @attention_kv(%q: tensor<1x4x16x8xf32>, %k: tensor<1x4x16x8xf32>, %v: tensor<1x4x12x8xf32>) {
  // expected-error @+1 {{'weft.attention' key [1, 4, 16, 8] and value [1, 4, 12, 8] differ in heads or length}}
  %0 = weft.attention %q, %k, %v : tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x12x8xf32>
  return
}

// -----

func.func @attention_batch(%q: tensor<1x4x16x8xf32>, %k: tensor<2x4x16x8xf32>) {
  // expected-error @+1 {{'weft.attention' batch sizes differ}}
  %0 = weft.attention %q, %k, %k : tensor<1x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>
  return
}

// -----

func.func @attention_mask_shape(%q: tensor<1x4x16x8xf32>, %m: tensor<16x15xi1>) {
  // expected-error @+1 {{'weft.attention' mask [16, 15] does not broadcast to the scores [1, 4, 16, 16]}}
  %0 = weft.attention %q, %q, %q, %m : tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<16x15xi1>
  return
}

// -----

func.func @attention_mask_type(%q: tensor<1x4x16x8xf32>, %m: tensor<16x16xi64>) {
  // expected-error @+1 {{'weft.attention' mask must be i1 or have the query's element type}}
  %0 = weft.attention %q, %q, %q, %m : tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<16x16xi64>
  return
}

// -----

func.func @attention_scale(%q: tensor<1x4x16x8xf32>) {
  // expected-error @+1 {{'weft.attention' scale must be positive}}
  %0 = weft.attention %q, %q, %q <{scale = 0.0 : f64}> : tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>
  return
}

// -----

func.func @gather_axis(%t: tensor<8x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{'weft.gather' axis 2 is out of range [0, 2)}}
  %0 = weft.gather %t, %i <{axis = 2}> : tensor<8x4xf32>, tensor<3xi64>
  return
}

// -----

func.func @reshape_count(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'weft.reshape' op input [2, 3] has 6 elements but the result [4, 2] has 8}}
  %0 = weft.reshape %x : tensor<2x3xf32> -> tensor<4x2xf32>
  return
}

// -----

func.func @transpose_perm(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'weft.transpose' permutation is not a permutation of [0, 2)}}
  %0 = weft.transpose %x <{permutation = array<i64: 1, 1>}> : tensor<2x3xf32>
  return
}

// -----

func.func @transpose_size(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'weft.transpose' permutation has 3 entries for rank 2}}
  %0 = weft.transpose %x <{permutation = array<i64: 0, 1, 2>}> : tensor<2x3xf32>
  return
}

// -----

func.func @concat_dims(%a: tensor<2x3xf32>, %b: tensor<4x4xf32>) {
  // expected-error @+1 {{'weft.concat' input #1 has dim 1 = 4, expected 3}}
  %0 = weft.concat %a, %b <{axis = 0}> : tensor<2x3xf32>, tensor<4x4xf32>
  return
}

// -----

func.func @concat_rank(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'weft.concat' input #1 has rank 1, expected 2}}
  %0 = weft.concat %a, %b <{axis = 0}> : tensor<2x3xf32>, tensor<3xf32>
  return
}

// -----

func.func @split_sizes(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{'weft.split' sizes sum to 5 but dim 1 is 6}}
  %0:2 = weft.split %x <{axis = 1, sizes = array<i64: 2, 3>}> : tensor<2x6xf32>
  return
}

// -----

func.func @slice_bounds(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{'weft.slice' dim 1: elements 4..8 are out of bounds of size 6}}
  %0 = weft.slice %x <{offsets = array<i64: 0, 4>, sizes = array<i64: 2, 3>, strides = array<i64: 1, 2>}> : tensor<2x6xf32>
  return
}

// -----

func.func @slice_stride(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{'weft.slice' dim 0: stride must be non-zero and size >= 0}}
  %0 = weft.slice %x <{offsets = array<i64: 0, 0>, sizes = array<i64: 2, 6>, strides = array<i64: 0, 1>}> : tensor<2x6xf32>
  return
}

// -----

func.func @slice_entries(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{'weft.slice' needs one offset, size and stride per dimension (rank 2)}}
  %0 = weft.slice %x <{offsets = array<i64: 0>, sizes = array<i64: 2>, strides = array<i64: 1>}> : tensor<2x6xf32>
  return
}

// -----

func.func @expand_shape(%x: tensor<3x4xf32>) {
  // expected-error @+1 {{'weft.expand' op input [3, 4] does not broadcast to the result [2, 4]}}
  %0 = weft.expand %x : tensor<3x4xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @squeeze_non_unit(%x: tensor<2x1xf32>) {
  // expected-error @+1 {{'weft.squeeze' dim 0 has size 2, not 1}}
  %0 = weft.squeeze %x <{axes = array<i64: 0>}> : tensor<2x1xf32>
  return
}

// -----

func.func @unsqueeze_axes(%x: tensor<2xf32>) {
  // expected-error @+1 {{'weft.unsqueeze' axis 5 is out of range [0, 2)}}
  %0 = weft.unsqueeze %x <{axes = array<i64: 5>}> : tensor<2xf32>
  return
}

// -----

func.func @trilu_rank(%x: tensor<4xf32>) {
  // expected-error @+1 {{'weft.trilu' op input must have rank >= 2, got rank 1}}
  %0 = weft.trilu %x : tensor<4xf32>
  return
}

// -----

func.func @range_type() {
  // expected-error @+1 {{'weft.range' op start and step must have the result element type 'i64'}}
  %0 = weft.range {start = 0 : i32, step = 1 : i64} : tensor<4xi64>
  return
}

// -----

// expected-error @+1 {{'weft.param' on argument #0 must be a string}}
func.func @param_attr(%w: tensor<4xf32> {weft.param = 3 : i64}) {
  return
}

// -----

// expected-error @+1 {{'weft.outputs' names 2 results but the function has 1}}
func.func @outputs_attr(%w: tensor<4xf32>) -> tensor<4xf32> attributes {weft.outputs = ["a", "b"]} {
  return %w : tensor<4xf32>
}

// -----

// expected-error @+1 {{unknown weft attribute 'weft.bogus'}}
func.func @unknown_attr() attributes {weft.bogus} {
  return
}

// -----

func.func @range_rank() {
  // expected-error @+1 {{'weft.range' op result must be 1-D}}
  %0 = weft.range {start = 0 : i64, step = 1 : i64} : tensor<2x2xi64>
  return
}

// -----

func.func @cast_shape(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'weft.cast' op all non-scalar operands/results must have the same shape and base type}}
  %0 = "weft.cast"(%x) : (tensor<2x3xf32>) -> tensor<3x2xi64>
  return
}

// -----

func.func @split_negative(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{'weft.split' sizes must be >= 0}}
  %0:2 = weft.split %x <{axis = 1, sizes = array<i64: 8, -2>}> : tensor<2x6xf32>
  return
}

// -----

func.func @conv_group(%x: tensor<1x4x8x8xf32>, %w: tensor<3x2x2x2xf32>) {
  // expected-error @+1 {{'weft.conv' output channels 3 not divisible by group 2}}
  %0 = weft.conv %x, %w <{strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 2}> : tensor<1x4x8x8xf32>, tensor<3x2x2x2xf32>
  return
}

// -----

func.func @conv_stride(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x2x2xf32>) {
  // expected-error @+1 {{'weft.conv' strides and dilations must be positive}}
  %0 = weft.conv %x, %w <{strides = array<i64: 0, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>}> : tensor<1x3x8x8xf32>, tensor<4x3x2x2xf32>
  return
}

// -----

func.func @conv_bias(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x2x2xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'weft.conv' bias must have 4 elements}}
  %0 = weft.conv %x, %w, %b <{strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>}> : tensor<1x3x8x8xf32>, tensor<4x3x2x2xf32>, tensor<3xf32>
  return
}

// -----

func.func @linear_scalar(%x: tensor<f32>, %w: tensor<1x4xf32>) {
  // expected-error @+1 {{'weft.linear' input must have rank >= 1}}
  %0 = weft.linear %x, %w : tensor<f32>, tensor<1x4xf32>
  return
}

// -----

func.func @unsqueeze_order(%x: tensor<2xf32>) {
  // expected-error @+1 {{'weft.unsqueeze' axis must be strictly increasing}}
  %0 = weft.unsqueeze %x <{axes = array<i64: 1, 0>}> : tensor<2xf32>
  return
}

// -----

// expected-error @+1 {{'weft.input' on argument #0 must be a string}}
func.func @input_attr(%x: tensor<4xf32> {weft.input = 1 : i64}) {
  return
}

// -----

// expected-error @+1 {{unknown weft argument attribute 'weft.weight'}}
func.func @unknown_arg_attr(%x: tensor<4xf32> {weft.weight = "w"}) {
  return
}

// -----

// expected-error @+1 {{'weft.weights' must be a string attribute on a module}}
func.func @weights_on_func() attributes {weft.weights = "model.onnx"} {
  return
}

// -----

// expected-error @+1 {{'weft.outputs' must be an array of strings on a function}}
func.func @outputs_not_strings(%w: tensor<4xf32>) -> tensor<4xf32> attributes {weft.outputs = [1]} {
  return %w : tensor<4xf32>
}

// -----

// expected-error @+1 {{'weft.context_attention' must be "ring", "ring-contiguous" or "all-to-all" on a shard.grid}}
shard.grid @mesh(shape = 2) {weft.axis_names = ["cp"], weft.context_axis = "cp", weft.context_attention = "zigzag"}

// -----

func.func @scatter_add_shape(%u: tensor<16x32xf32>, %ids: tensor<16xi64>) {
  // expected-error @+1 {{'weft.scatter_add' op updates 'tensor<16x32xf32>' must be shaped as the indices 'tensor<16xi64>' followed by the result's row 'tensor<256x64xf32>' without its first dim}}
  %0 = weft.scatter_add %u, %ids : tensor<16x32xf32>, tensor<16xi64> -> tensor<256x64xf32>
  return
}

// -----

func.func @cross_entropy_labels(%x: tensor<2x16x64xf32>, %labels: tensor<2x8xi64>) {
  // expected-error @+1 {{'weft.softmax_cross_entropy' op labels 'tensor<2x8xi64>' must be shaped as the logits 'tensor<2x16x64xf32>' without their class dim}}
  %0:2 = weft.softmax_cross_entropy %x, %labels <{ignore_index = -100 : i64}> : tensor<2x16x64xf32>, tensor<2x8xi64> -> tensor<2x8xf32>
  return
}

// -----

func.func @cross_entropy_grad_lse(%x: tensor<2x16x64xf32>, %labels: tensor<2x16xi64>, %lse: tensor<2x64xf32>) {
  // expected-error @+1 {{'weft.softmax_cross_entropy_grad' op per-position results 'tensor<2x64xf32>' must be 'tensor<2x16xf32>'}}
  %0 = weft.softmax_cross_entropy_grad %x, %labels, %lse, %lse <{ignore_index = -100 : i64}> : tensor<2x16x64xf32>, tensor<2x16xi64>, tensor<2x64xf32>
  return
}

// -----

// Per-position results are the logits' element type or f32, nothing else.
func.func @cross_entropy_result_type(%x: tensor<2x16x64xbf16>, %labels: tensor<2x16xi64>) {
  // expected-error @+1 {{'weft.softmax_cross_entropy' op per-position results 'tensor<2x16xf16>' must be 'tensor<2x16xbf16>'}}
  %0:2 = weft.softmax_cross_entropy %x, %labels <{ignore_index = -100 : i64}> : tensor<2x16x64xbf16>, tensor<2x16xi64> -> tensor<2x16xf16>
  return
}

// -----

func.func @norm_grad_stats(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'weft.norm_grad' op mean and inv_std 'tensor<2x16xf32>' must be 'tensor<2x16x1xf32>': the input with its normalized dims kept as 1}}
  %0:3 = weft.norm_grad %x, %g, %x <{axis = 2 : i64, centered, epsilon = 1.0e-05 : f64}> : tensor<2x16x64xf32>, tensor<64xf32> -> tensor<2x16xf32>
  return
}

// -----

func.func @norm_grad_wider_gradient(%x: tensor<2x16x64xbf16>, %g: tensor<64xbf16>, %dy: tensor<2x16x64xf32>) {
  // expected-error @+1 {{'weft.norm_grad' op result_grad 'tensor<2x16x64xf32>' must have the input's shape 'tensor<2x16x64xbf16>' and its element type or a narrower float}}
  %0:3 = weft.norm_grad %x, %g, %dy <{axis = 2 : i64, epsilon = 1.0e-05 : f64}> : tensor<2x16x64xbf16>, tensor<64xbf16>, tensor<2x16x64xf32> -> tensor<2x16x1xbf16>
  return
}

// -----

// expected-note @+1 {{prior use here}}
func.func @norm_grad_addend(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>, %r: tensor<2x16x64xbf16>) {
  // expected-error @+1 {{use of value '%r' expects different type than prior uses: 'tensor<2x16x64xf32>' vs 'tensor<2x16x64xbf16>'}}
  %0:3 = weft.norm_grad %x, %g, %x add %r <{axis = 2 : i64, epsilon = 1.0e-05 : f64}> : tensor<2x16x64xf32>, tensor<64xf32> -> tensor<2x16x1xf32>
  return
}

// -----

func.func @norm_grad_scale(%x: tensor<2x16x64xf32>, %g: tensor<32xf32>) {
  // expected-error @+1 {{'weft.norm_grad' op scale must have the normalized shape [64], got [32]}}
  %0:3 = weft.norm_grad %x, %g, %x <{axis = 2 : i64, epsilon = 1.0e-05 : f64}> : tensor<2x16x64xf32>, tensor<32xf32> -> tensor<2x16x1xf32>
  return
}

// -----

func.func @norm_wider_result(%x: tensor<2x16x64xbf16>, %g: tensor<64xbf16>) {
  // expected-error @+1 {{'weft.layer_norm' op result 'tensor<2x16x64xf32>' must have the input's shape 'tensor<2x16x64xbf16>' and its element type or a narrower float}}
  %0 = weft.layer_norm %x, %g {axis = 2, epsilon = 1.0e-05 : f64} : tensor<2x16x64xbf16>, tensor<64xbf16> -> tensor<2x16x64xf32>
  return
}

// -----

// A fused attention kernel's declaration says which signature it has.
// expected-error @+1 {{'weft.fused_attention' must be "forward" or "backward" on a function}}
func.func private @weft_cuda_attention_sideways_bf16(memref<*xbf16>) attributes {weft.fused_attention = "sideways"}

// -----

// A GEMM declaration is marked, not given a kind.
// expected-error @+1 {{'weft.gemm' must be a unit attribute on a function}}
func.func private @weft_cuda_gemm_f32(memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i64) attributes {weft.gemm = "f32"}

// -----

// expected-error @+1 {{'weft.block_segments' must be an ascending i64 array starting at 0 on a gpu.launch}}
func.func private @not_a_launch() attributes {weft.block_segments = array<i64: 0, 4>}

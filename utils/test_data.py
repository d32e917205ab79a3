"""Helpers shared by the scripts that run models on their ONNX test data
(test_data_set_0/input_<i>.pb, output_<i>.pb). They run compiled models
with weft.run_executable."""

import onnx
from onnx import numpy_helper


def graph_inputs(model):
    """The graph inputs that are not initializers, in order."""
    initializers = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in initializers]


def load_pb(path):
    tensor = onnx.TensorProto()
    tensor.ParseFromString(path.read_bytes())
    return numpy_helper.to_array(tensor)


def dim_bindings(model, shapes):
    """`name=value` for each symbolic input dim, read off the shapes of the
    input arrays (dims written as sums, like `past + seq`, follow from the
    others)."""
    bindings = {}
    for info, shape in zip(graph_inputs(model), shapes):
        for dim, size in zip(info.type.tensor_type.shape.dim, shape):
            if dim.dim_param and "+" not in dim.dim_param:
                bindings[dim.dim_param] = size
    return [f"{name}={size}" for name, size in sorted(bindings.items())]

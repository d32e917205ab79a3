"""Helpers shared by the scripts that run models on their ONNX test data
(test_data_set_0/input_<i>.pb, output_<i>.pb) and run compiled models."""

import subprocess

import numpy as np
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


def run_model(command, inputs, outputs, work, tag="run", timeout=600):
    """Runs a compiled model (`command`: its executable, behind a launcher
    if any) on `inputs` (name -> array, saved as .npy files in `work`) and
    returns its `outputs` (a list of names) as arrays. A failed run raises
    RuntimeError with the last line the model printed on stderr."""
    args = list(command)
    for i, (name, array) in enumerate(inputs.items()):
        path = work / f"{tag}_in{i}.npy"
        np.save(path, array)
        args += ["--input", f"{name}={path}"]
    for i, name in enumerate(outputs):
        args += ["--output", f"{name}={work / f'{tag}_out{i}.npy'}"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        raise RuntimeError(lines[-1] if lines else f"exit {proc.returncode}")
    return [np.load(work / f"{tag}_out{i}.npy") for i in range(len(outputs))]

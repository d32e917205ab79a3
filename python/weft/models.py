"""What weft.compile and weft.plan accept as a model: a path (.onnx,
.onnxtxt, .mlir), an onnx.ModelProto, or a torch.nn.Module with example
inputs (exported with torch.onnx.export when torch is installed)."""

import os
from pathlib import Path
from typing import List, Mapping, Optional, Sequence

from .errors import CompileError

# protobuf refuses to serialize a message of 2 GiB or more.
_PROTOBUF_LIMIT = 2**31 - 1


def _is_torch_module(model) -> bool:
    return any(cls.__module__.startswith("torch.nn") and cls.__name__ == "Module"
               for cls in type(model).__mro__)


def _is_onnx_model(model) -> bool:
    return (type(model).__name__ == "ModelProto"
            and type(model).__module__.startswith("onnx"))


def dims_list(dims) -> List[str]:
    """Symbolic dimension bindings as the compiler takes them: {"batch": 8}
    or ["batch=8"] -> ["batch=8"]."""
    if dims is None:
        return []
    if isinstance(dims, Mapping):
        return [f"{name}={value}" for name, value in dims.items()]
    return list(dims)


def model_file(model, workdir: Path, *, example_inputs: Optional[Sequence] = None,
               input_names: Optional[Sequence[str]] = None,
               output_names: Optional[Sequence[str]] = None,
               opset: int = 17) -> str:
    """A file holding `model`, written into `workdir` unless it is one."""
    if isinstance(model, (str, os.PathLike)):
        path = Path(model)
        if not path.is_file():
            raise CompileError(f"model file '{path}' does not exist")
        return str(path)
    if _is_onnx_model(model):
        path = workdir / "model.onnx"
        if model.ByteSize() < _PROTOBUF_LIMIT:
            path.write_bytes(model.SerializeToString())
        else:
            import onnx
            onnx.save(model, str(path), save_as_external_data=True,
                      location="model.onnx.data")
        return str(path)
    if _is_torch_module(model):
        if example_inputs is None:
            raise CompileError("a torch.nn.Module needs example_inputs to be "
                               "exported to ONNX")
        import torch
        inputs = tuple(example_inputs) if isinstance(example_inputs, (list, tuple)) \
            else (example_inputs,)
        path = workdir / "model.onnx"
        names = list(input_names) if input_names else [f"input_{i}" for i in range(len(inputs))]
        try:
            torch.onnx.export(model, inputs, str(path), input_names=names,
                              output_names=list(output_names) if output_names else None,
                              opset_version=opset)
        except Exception as error:  # torch's exporter raises many kinds
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise CompileError(f"torch.onnx.export failed: {first}") from error
        return str(path)
    raise CompileError("a model is a path, an onnx.ModelProto or a torch.nn.Module, "
                       f"not {type(model).__name__}")

#!/usr/bin/env python3
"""Print an ONNX model's opsets, inputs/outputs and op_type counts per domain.

Nodes inside subgraphs (If/Loop/Scan bodies) and model-local functions are
counted too.  External data is never loaded, so huge models are cheap to list.

Example:  python3 utils/list_onnx_ops.py model.onnx
"""

import argparse
import collections
import sys

import onnx


def walk(nodes):
    """Yields every node of `nodes`, descending into subgraph attributes."""
    for node in nodes:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from walk(attr.g.node)
            for sub in attr.graphs:
                yield from walk(sub.node)


def type_string(type_proto):
    """Renders a TypeProto as e.g. ``FLOAT[batch,seq,768]``."""
    kind = type_proto.WhichOneof("value")
    if kind == "tensor_type":
        tensor = type_proto.tensor_type
        elem = onnx.TensorProto.DataType.Name(tensor.elem_type)
        if not tensor.HasField("shape"):
            return elem + "[?]"
        dims = [d.dim_param or (str(d.dim_value) if d.HasField("dim_value")
                                else "?") for d in tensor.shape.dim]
        return f"{elem}[{','.join(dims)}]"
    if kind == "sequence_type":
        return f"seq({type_string(type_proto.sequence_type.elem_type)})"
    if kind == "optional_type":
        return f"optional({type_string(type_proto.optional_type.elem_type)})"
    return kind or "?"


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="path to an .onnx file")
    args = parser.parse_args(argv)
    model = onnx.load(args.model, load_external_data=False)
    graph = model.graph

    producer = " ".join(filter(None, [model.producer_name,
                                      model.producer_version]))
    print(f"ir_version {model.ir_version}, producer '{producer}'")
    print("opsets: " + ", ".join(f"{o.domain or 'ai.onnx'} {o.version}"
                                 for o in model.opset_import))
    initializers = {t.name for t in graph.initializer}
    print(f"initializers: {len(initializers)}")
    for title, values in (("inputs", [v for v in graph.input
                                      if v.name not in initializers]),
                          ("outputs", graph.output)):
        print(f"{title}:")
        for value in values:
            print(f"  {value.name}: {type_string(value.type)}")

    counts = collections.Counter()
    for nodes in [graph.node] + [f.node for f in model.functions]:
        for node in walk(nodes):
            counts[(node.domain or "ai.onnx", node.op_type)] += 1
    for domain in sorted({d for d, _ in counts}):
        ops = sorted(((op, n) for (d, op), n in counts.items() if d == domain),
                     key=lambda item: (-item[1], item[0]))
        print(f"domain {domain}: {sum(n for _, n in ops)} nodes")
        for op, n in ops:
            print(f"  {n:6d}  {op}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

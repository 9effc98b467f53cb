"""The prepared embedding model made leaner after onnxruntime optimized it: fewer nodes, the
same numbers.

onnxruntime runs a text through the graph node by node, and a short chat text spends much of
its time between nodes rather than in them. `prepare` (`onnx_session`) saves the optimized
graph; four rewrites of that graph are then made, each only where its pattern is found:

- Each layer's keys reach the attention product through Transpose, Reshape, Transpose,
  Reshape and the Shape, Gather, Slice and Concat nodes that compute those shapes (what
  onnxruntime's transpose optimizer leaves): eleven nodes become one Transpose that moves
  the same numbers to the same places.
- The query, key and value products of a layer read the same input: they become one
  `DynamicQuantizeMatMul` over their weight columns side by side, then a Split. Its input is
  quantized once instead of three times, with the same scale (one for the whole input, from
  its minimum and maximum), and each output column is computed as before.
- The attention mask is added to every layer's scores. A text embedded alone is never
  padded (`LocalEmbedder` runs each text alone), so the mask adds zeros: the Add and the
  nodes that build the mask go. The prepared model therefore attends to every position it
  is given, whatever `attention_mask` says.
- Each layer's query, value and (once transposed) key were copied into (heads, length,
  size) order before the two attention products, and the result copied back: the products
  now read the heads where they lie, in (length, heads, size) views (onnxruntime's
  `FusedMatMul` with `transBatchA`/`transBatchB`), so one copy a layer is left of four. The
  views hold no batch: the prepared model takes one text a run, as the mask's removal
  already assumes.

`onnx_session.prepare` keeps the lean graph only if it gives exactly the vectors (every bit)
of the graph it came from, on probe texts of several lengths. Bit-equal, not merely close:
each int8 product quantizes its input with the text's own scale, so a last-bit difference
now and then flips one value by a whole int8 step, and attention spreads it to every token
(SkipLayerNormalization as Add and LayerNormalization: 14-15% less CPU, but 37% of 400
LoCoMo texts moved by over 1e-5, the worst by 0.02; docs/benchmarks.md). Measured on
2,000 texts of the import bench's ChatGPT export (one thread, both models in turn, load
2.5-4): 5.76 ms of CPU per text → 5.20 (the keys 5.52, with the fused products 5.47,
without the mask 5.20); 264 nodes → 125. The heads read in place: 125 → 107 nodes, 5.03 →
4.87 ms per text on 1,200 LoCoMo and import-bench texts (four rounds alternated, load 8-9;
the same bits on 2,000 texts of 3-256 pieces).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from seelen.models.int8_graph import CONTRIB, live_nodes, producers, readers

if TYPE_CHECKING:
    from onnx import GraphProto, NodeProto

MASK_INPUT = "attention_mask"


def lean(graph: GraphProto) -> int:
    """Rewrite `graph` in place (see the module); returns how many nodes went."""
    before = len(graph.node)
    _one_key_transpose(graph)
    _fuse_shared_products(graph)
    _drop_mask(graph)
    _heads_in_place(graph)
    _prune(graph)
    return before - len(graph.node)


def _perm(node: NodeProto) -> list[int]:
    from onnx import helper

    perms = [helper.get_attribute_value(a) for a in node.attribute if a.name == "perm"]
    return list(perms[0]) if perms else []


def _one_key_transpose(graph: GraphProto) -> None:
    """Reshape(Transpose(Reshape(Transpose(keys, 0213), ·), 021), ·) before an attention
    product → Transpose(keys, 0231): (batch, length, heads, size) to (batch, heads, size,
    length), as the chain does, in one copy."""
    from onnx import helper

    made = producers(graph)
    swaps: dict[int, NodeProto] = {}
    for product in graph.node:
        if product.op_type not in ("MatMul", "FusedMatMul") or len(product.input) != 2:
            continue
        last = made.get(product.input[1])
        second = made.get(last.input[0]) if last is not None else None
        middle = made.get(second.input[0]) if second is not None else None
        first = made.get(middle.input[0]) if middle is not None else None
        chain = (last, second, middle, first)
        if any(n is None for n in chain) or [n.op_type for n in chain if n] != [
            "Reshape",
            "Transpose",
            "Reshape",
            "Transpose",
        ]:
            continue
        assert first is not None and second is not None and last is not None
        if _perm(first) != [0, 2, 1, 3] or _perm(second) != [0, 2, 1]:
            continue
        swaps[id(last)] = helper.make_node(
            "Transpose",
            [first.input[0]],
            [last.output[0]],
            perm=[0, 2, 3, 1],
            name=f"{last.name}_t",
        )
    nodes = [swaps.get(id(node), node) for node in graph.node]
    del graph.node[:]
    graph.node.extend(nodes)


def _fuse_shared_products(graph: GraphProto) -> None:
    """DynamicQuantizeMatMuls that read the same input, with per-column int8 weights, zero
    points and biases → one over the columns side by side, then a Split."""
    readers: dict[str, list[NodeProto]] = {}
    for node in graph.node:
        if node.op_type == "DynamicQuantizeMatMul" and len(node.input) == 5:
            readers.setdefault(node.input[0], []).append(node)
    weights = {w.name: w for w in graph.initializer}
    fused: dict[int, list[NodeProto]] = {}
    gone: set[int] = set()
    for group in readers.values():
        parts = [_columns(node, weights) for node in group]
        if len(group) < 2 or any(p is None for p in parts):
            continue
        fused[id(group[0])] = _fused(graph, group, [p for p in parts if p is not None])
        gone.update(id(node) for node in group[1:])
    nodes = []
    for node in graph.node:
        if id(node) not in gone:
            nodes.extend(fused.get(id(node), [node]))
    del graph.node[:]
    graph.node.extend(nodes)


def _columns(node: NodeProto, weights: dict[str, object]) -> list[np.ndarray] | None:
    """The weight, scales, zero points and bias of a product, when all are per column."""
    from onnx import numpy_helper

    tensors = [weights.get(name) for name in node.input[1:5]]
    if any(t is None for t in tensors):
        return None
    arrays = [numpy_helper.to_array(t) for t in tensors]  # type: ignore[arg-type]
    weight, *per_column = arrays
    if weight.ndim != 2 or any(a.shape != (weight.shape[1],) for a in per_column):
        return None
    return arrays


def _fused(
    graph: GraphProto, group: list[NodeProto], parts: list[list[np.ndarray]]
) -> list[NodeProto]:
    from onnx import helper, numpy_helper

    name = f"{group[0].name}_shared"
    joined = [np.concatenate([p[i] for p in parts], axis=-1) for i in range(4)]
    widths = np.array([p[0].shape[1] for p in parts], dtype=np.int64)
    names = [f"{name}_{what}" for what in ("weight", "scale", "zero", "bias", "widths")]
    graph.initializer.extend(
        numpy_helper.from_array(array, n) for array, n in zip([*joined, widths], names, strict=True)
    )
    product = helper.make_node(
        "DynamicQuantizeMatMul",
        [group[0].input[0], *names[:4]],
        [f"{name}_out"],
        name=name,
        domain=CONTRIB,
    )
    split = helper.make_node(
        "Split",
        [f"{name}_out", names[4]],
        [n.output[0] for n in group],
        axis=-1,
        name=f"{name}_split",
    )
    return [product, split]


def _drop_mask(graph: GraphProto) -> None:
    """Add(scores, mask) before a Softmax → scores, where the mask is computed from the
    attention_mask input and constants only (see the module: a lone text is never padded)."""
    made = producers(graph)
    masked = _depends_on_only(graph, made)
    renamed: dict[str, str] = {}
    kept = []
    for node in graph.node:
        if node.op_type == "Add" and len(node.input) == 2:
            scores, mask = node.input
            source = made.get(scores)
            if (
                source is not None
                and source.op_type in ("MatMul", "FusedMatMul")
                and mask in masked
            ):
                renamed[node.output[0]] = scores
                continue
        kept.append(node)
    for node in kept:
        for i, name in enumerate(node.input):
            node.input[i] = renamed.get(name, name)
    del graph.node[:]
    graph.node.extend(kept)


def _depends_on_only(graph: GraphProto, made: dict[str, NodeProto]) -> set[str]:
    """Names computed from the mask input (and the others' shapes, and constants) alone:
    none reads a token's embedding or any activation."""
    weights = {w.name for w in graph.initializer}
    shapes_only = {i.name for i in graph.input if i.name != MASK_INPUT}
    found: set[str] = set()
    for node in graph.node:  # the graph is topologically sorted
        reads = [i for i in node.input if i and i not in weights]
        shape_of = node.op_type == "Shape" and reads and reads[0] in shapes_only
        if shape_of or (reads and all(i in found or i == MASK_INPUT for i in reads)):
            found.update(node.output)
    return {name for name in found if _reads_mask(name, made, set())}


def _reads_mask(name: str, made: dict[str, NodeProto], seen: set[str]) -> bool:
    if name == MASK_INPUT:
        return True
    node = made.get(name)
    if node is None or name in seen:
        return False
    seen.add(name)
    return any(_reads_mask(i, made, seen) for i in node.input)


def _heads_in_place(graph: GraphProto) -> None:
    """Softmax(FusedMatMul(Transpose(Reshape(q), 0213), Transpose(Reshape(k), 0231))), then
    MatMul(·, Transpose(Reshape(v), 0213)) and Transpose(·, 0213) → the same two products over
    (length, heads, size) views, reading the heads where they lie (`transBatchA`,
    `transBatchB`, `transB`), and Transpose(·, 102): three copies a layer fewer. The views
    leave the batch out: the model then takes one text a run, as `LocalEmbedder` runs it."""
    made, read_by = producers(graph), readers(graph)
    swaps: dict[int, list[NodeProto]] = {}
    shapes: dict[str, NodeProto] = {}
    reshaped: set[str] = set()
    for scores in graph.node:
        found = _attention(scores, made, read_by)
        if found is None:
            continue
        reshapes, values, back = found
        shape = made[reshapes[0].input[1]]
        first = shape.output[0] not in shapes
        shapes.setdefault(shape.output[0], _without_batch(shape))
        views = [_view(r, shapes[shape.output[0]].output[0]) for r in reshapes]
        swaps[id(scores)] = [
            *([shapes[shape.output[0]]] if first else []),
            *views[:2],
            _product(scores, views[0], views[1], transBatchA=1, transBatchB=1, transB=1),
        ]
        swaps[id(values)] = [views[2], _product(values, None, views[2], transBatchB=1)]
        _set_perm(back, [1, 0, 2])
        reshaped.update((values.input[0], back.output[0]))  # the softmax's and the copy's
    nodes = [new for node in graph.node for new in swaps.get(id(node), [node])]
    del graph.node[:]
    graph.node.extend(nodes)
    reshaped.update(name for new in swaps.values() for node in new for name in node.output)
    kept = [v for v in graph.value_info if v.name not in reshaped]  # shapes now 3-d
    del graph.value_info[:]
    graph.value_info.extend(kept)


def _attention(
    scores: NodeProto, made: dict[str, NodeProto], read_by: dict[str, list[NodeProto]]
) -> tuple[list[NodeProto], NodeProto, NodeProto] | None:
    """The query, key and value Reshapes, the values' product and the Transpose after it, of
    one layer's attention whose scores `scores` makes; None when it is not that pattern."""
    if scores.op_type != "FusedMatMul" or any(
        a.i for a in scores.attribute if a.name.startswith("trans")
    ):
        return None
    softmax = _only_reader(scores, read_by, "Softmax")
    values = _only_reader(softmax, read_by, "MatMul") if softmax else None
    back = _only_reader(values, read_by, "Transpose") if values else None
    if softmax is None or values is None or back is None or values.input[0] != softmax.output[0]:
        return None
    if [a.i for a in softmax.attribute if a.name == "axis"] != [-1] or _perm(back) != [0, 2, 1, 3]:
        return None
    operands = zip((scores.input[0], scores.input[1], values.input[1]), _HEAD_PERMS, strict=True)
    reshapes = []
    for name, perm in operands:
        turn = made.get(name)
        reshape = made.get(turn.input[0]) if turn is not None and _perm(turn) == perm else None
        if reshape is None or reshape.op_type != "Reshape":
            return None
        reshapes.append(reshape)
    shape = made.get(reshapes[0].input[1])
    same_shape = all(r.input[1] == reshapes[0].input[1] for r in reshapes)
    if not same_shape or shape is None or shape.op_type != "Concat" or len(shape.input) != 4:
        return None
    return reshapes, values, back


# How the query, the key and the value reach the two products: (batch, heads, length, size),
# (batch, heads, size, length), (batch, heads, length, size).
_HEAD_PERMS = ([0, 2, 1, 3], [0, 2, 3, 1], [0, 2, 1, 3])


def _only_reader(node: NodeProto, read_by: dict[str, list[NodeProto]], op: str) -> NodeProto | None:
    readers = read_by.get(node.output[0], [])
    return readers[0] if len(readers) == 1 and readers[0].op_type == op else None


def _without_batch(shape: NodeProto) -> NodeProto:
    """Concat(batch, length, heads, size) → Concat(length, heads, size)."""
    from onnx import helper

    name = f"{shape.output[0]}_3d"
    return helper.make_node("Concat", list(shape.input[1:]), [name], axis=0, name=name)


def _view(reshape: NodeProto, shape: str) -> NodeProto:
    from onnx import helper

    name = f"{reshape.output[0]}_3d"
    return helper.make_node("Reshape", [reshape.input[0], shape], [name], name=name)


def _product(old: NodeProto, a: NodeProto | None, b: NodeProto, **trans: int) -> NodeProto:
    """`old` (a MatMul or FusedMatMul, its scale kept) as a FusedMatMul reading the views."""
    from onnx import helper

    alpha = [x.f for x in old.attribute if x.name == "alpha"] or [1.0]
    node = helper.make_node(
        "FusedMatMul",
        [a.output[0] if a is not None else old.input[0], b.output[0]],
        list(old.output),
        name=f"{old.name}_3d",
        domain=CONTRIB,
        alpha=alpha[0],
    )
    node.attribute.extend(helper.make_attribute(k, v) for k, v in trans.items())
    return node


def _set_perm(node: NodeProto, perm: list[int]) -> None:
    for attribute in node.attribute:
        if attribute.name == "perm":
            del attribute.ints[:]
            attribute.ints.extend(perm)


def _prune(graph: GraphProto) -> None:
    """Drop nodes and weights nothing reads any more."""
    nodes = live_nodes(list(graph.node), {o.name for o in graph.output})
    read = {name for node in nodes for name in node.input}
    weights = [w for w in graph.initializer if w.name in read]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend(weights)

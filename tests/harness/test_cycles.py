"""The cycle explainer on hand-made cycles, and the aggregation of cycle shapes."""

from __future__ import annotations

import gc
import inspect
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from harness.analysis.cycle_shapes import aggregate_cycles, cycle_shape
from harness.worker.heapgraph.cycles import explain_garbage, explain_object, shortest_cycle
from harness.worker.heapgraph.naming import edge_name, label, named_referents
from harness.worker.heapgraph.tensor_views import storage_bytes
from tests.harness.doubles import FakeStorage, FakeTensor


class TreeNode:
    """Like a radix-cache node: LRU pointers and a parent link."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.prev: object = None
        self.next: object = None
        self.parent: object = None
        self.children: dict[int, TreeNode] = {}


class SlotNode:
    __slots__ = ("__hidden", "parent", "prev")

    def __init__(self) -> None:
        self.prev: object = None
        self.parent: object = None


def members(*objects: object) -> dict[int, object]:
    return {id(obj): obj for obj in objects}


def two_cycle() -> tuple[TreeNode, TreeNode]:
    """``x.prev -> y``, ``y.parent -> x``: the LRU-unlink incident's cycle."""
    x, y = TreeNode("x"), TreeNode("y")
    x.prev, y.parent = y, x
    return x, y


def test_two_cycle_names_both_attributes() -> None:
    x, y = two_cycle()
    explained = explain_object(x, members(x, y))
    assert explained is not None
    assert explained["type"] == "TreeNode"
    assert explained["path"] == ["TreeNode.prev", "TreeNode.parent"]
    assert explained["length"] == 2
    assert explained["retained_objects"] >= 2  # plus their attribute dicts
    assert explained["retained_bytes"] > 0


def test_three_cycle_and_self_cycle() -> None:
    a, b, c = TreeNode("a"), TreeNode("b"), TreeNode("c")
    a.next, b.parent, c.prev = b, c, a
    found = shortest_cycle(a, members(a, b, c))
    assert found is not None
    names, nodes = found
    assert names == ["TreeNode.next", "TreeNode.parent", "TreeNode.prev"]
    assert nodes == [a, b, c]
    alone = TreeNode("alone")
    alone.prev = alone
    explained = explain_object(alone, members(alone))
    assert explained is not None
    assert (explained["path"], explained["length"]) == (["TreeNode.prev"], 1)


def test_shortest_cycle_wins_over_a_longer_one() -> None:
    x, y, z = TreeNode("x"), TreeNode("y"), TreeNode("z")
    x.next, y.next, z.parent = y, z, x  # 3-cycle x -> y -> z -> x
    x.prev, y.parent = y, x  # and a 2-cycle x -> y -> x
    found = shortest_cycle(x, members(x, y, z))
    assert found is not None and len(found[0]) == 2


def test_cycles_through_containers_name_keys_and_indices() -> None:
    parent, child = TreeNode("p"), TreeNode("c")
    parent.children[7] = child
    child.parent = parent
    found = shortest_cycle(parent, members(parent, child, parent.children))
    assert found is not None
    assert found[0] == ["TreeNode.children", "dict[7]", "TreeNode.parent"]
    box: list[object] = []
    holder = {"box": box}
    box.append(holder)
    found = shortest_cycle(box, members(box, holder))
    assert found is not None and found[0] == ["list[0]", "dict['box']"]


def test_slots_are_named_including_private_ones() -> None:
    a, b = SlotNode(), SlotNode()
    a.prev, b.parent = b, a
    setattr(a, "_SlotNode__hidden", b)  # noqa: B010 - a name-mangled slot, set from outside
    names = {name for name, target in named_referents(a) if target is b}
    assert names == {"SlotNode.prev", "SlotNode.__hidden"}
    found = shortest_cycle(a, members(a, b))
    assert found is not None and found[0][-1] == "SlotNode.parent"


def make_closure_cycle() -> Callable[[], object]:
    """``json.encoder``'s shape: a closure whose variable holds the closure."""
    markers: dict[str, object] = {}

    def _iterencode() -> object:
        return markers

    markers["self"] = _iterencode
    return _iterencode


def raise_and_keep() -> BaseException:
    """A frame that keeps its own exception: frame -> err -> traceback -> frame."""
    try:
        raise ValueError("kept")
    except ValueError as exc:
        err = exc
    return err


def line_of(func: Callable[..., Any]) -> int:
    return inspect.getsourcelines(func)[1]


def test_closures_name_the_function_its_source_line_and_the_variable() -> None:
    func = make_closure_cycle()
    assert func.__closure__ is not None
    (cell,) = func.__closure__
    markers = cell.cell_contents
    found = shortest_cycle(func, members(func, func.__closure__, cell, markers))
    assert found is not None
    where = f"test_cycles.py:{line_of(make_closure_cycle) + 4}"
    qualified = f"{__name__}.make_closure_cycle.<locals>._iterencode"
    assert found[0] == [f"function {qualified} ({where}).markers", "cell.cell_contents",
                        "dict['self']"]


def test_frames_name_their_function_line_and_locals() -> None:
    err = raise_and_keep()
    tb = err.__traceback__
    assert tb is not None
    frame = tb.tb_frame
    explained = explain_object(err, members(err, tb, frame))
    assert explained is not None
    assert explained["path"][:2] == ["ValueError.__traceback__", "traceback.tb_frame"]
    assert re.fullmatch(rf"frame {__name__}\.raise_and_keep \(test_cycles\.py:\d+\)\.err",
                        explained["path"][2])
    del err, tb, frame, explained


def test_labels_of_methods_code_classes_and_keys() -> None:
    node = TreeNode("n")
    first = line_of(TreeNode.__init__)
    assert label(node.__init__) == (
        f"method {__name__}.TreeNode.__init__ (test_cycles.py:{first})"
    )
    assert label(TreeNode.__init__.__code__) == f"code TreeNode.__init__ (test_cycles.py:{first})"
    assert label(TreeNode) == "TreeNode" and label(node) == "TreeNode"
    registry = {make_closure_cycle: 1, (1, "a"): 2, None: 3}
    assert edge_name(registry, 2) == "dict[(1, 'a')]"
    assert edge_name(registry, 3) == "dict[None]"
    assert re.fullmatch(rf"dict\[<function {__name__}\.make_closure_cycle "
                        r"\(test_cycles\.py:\d+\)>\]", edge_name(registry, 1) or "")
    assert edge_name(TreeNode, TreeNode.__init__) == "TreeNode.__init__"
    assert edge_name([node, 5], 5) == "list[1]" and edge_name(node, 7) is None


def test_only_garbage_is_walked() -> None:
    """A path through live objects does not explain garbage: it is not followed."""
    x, _ = two_cycle()
    assert shortest_cycle(x, members(x)) is None
    lonely = TreeNode("lonely")
    assert explain_object(lonely, members(lonely)) is None


def test_retained_bytes_follow_what_hangs_off_the_cycle() -> None:
    x, y = two_cycle()
    shared = FakeStorage(ptr=1234, nbytes=10_000_000)
    first, view = FakeTensor(shared), FakeTensor(shared)  # a view: same storage
    x.children = {0: first, 1: view}  # type: ignore[dict-item]
    garbage = members(x, y, x.children, first, view, first.__dict__, view.__dict__)
    explained = explain_object(x, garbage)
    assert explained is not None
    assert explained["retained_objects"] >= 5
    assert 10_000_000 < explained["retained_bytes"] < 20_000_000  # storage counted once


def test_storage_bytes_is_duck_typed_and_safe() -> None:
    seen: set[int] = set()
    assert storage_bytes(FakeTensor(FakeStorage(1, 64)), seen) == 64
    assert storage_bytes(FakeTensor(FakeStorage(1, 64)), seen) == 0  # same storage
    assert storage_bytes(object(), seen) == 0

    class Broken:
        def untyped_storage(self) -> FakeStorage:
            raise RuntimeError("meta tensor")

    assert storage_bytes(Broken(), seen) == 0


def test_explain_garbage_takes_top_types_first_and_honours_the_limit() -> None:
    pairs = [two_cycle() for _ in range(5)]
    keys = [[node.name] for pair in pairs for node in pair]  # garbage on no cycle
    garbage: list[object] = [node for pair in pairs for node in pair]
    garbage += keys + keys[:3]
    found = explain_garbage(garbage, limit=3)
    assert [c["type"] for c in found] == ["TreeNode"]  # lists sit on no cycle
    assert found[0]["path"] == ["TreeNode.prev", "TreeNode.parent"]
    assert explain_garbage(garbage, limit=0) == []


def test_explainer_on_real_debug_saveall_garbage() -> None:
    """What the garbage sampler does: collect with DEBUG_SAVEALL, explain, clean up."""
    flags = gc.get_debug()
    gc.collect()
    x, y = two_cycle()
    x.next = [bytearray(4096)]
    del x, y
    first = len(gc.garbage)
    gc.set_debug(flags | gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found = explain_garbage(gc.garbage[first:], limit=3)
    finally:
        gc.set_debug(flags)
        del gc.garbage[first:]
        gc.collect()
    assert {"type": "TreeNode", "length": 2}.items() <= found[0].items()
    assert sorted(found[0]["path"]) == ["TreeNode.parent", "TreeNode.prev"]
    assert found[0]["retained_bytes"] > 4096


def test_explainer_leaves_no_garbage_of_its_own() -> None:
    pairs = [two_cycle() for _ in range(50)]
    garbage = [node for pair in pairs for node in pair]
    gc.collect()
    gc.disable()
    try:
        explain_garbage(garbage, limit=3)
        made = gc.collect()
    finally:
        gc.enable()
    assert made == 0


@pytest.mark.parametrize(
    ("path", "shape"),
    [
        (["TreeNode.parent", "TreeNode.prev"], ("TreeNode.parent", "TreeNode.prev")),
        (["TreeNode.prev", "TreeNode.parent"], ("TreeNode.parent", "TreeNode.prev")),
        (["list[3]", "dict['box']"], ("dict[]", "list[]")),
        ([], ()),
    ],
)
def test_cycle_shape_blanks_indices_and_rotates(path: list[str], shape: tuple[str, ...]) -> None:
    assert cycle_shape(path) == shape


def windows_of_cycles() -> Iterator[dict[str, Any]]:
    for window in range(4):
        yield {"type": "TreeNode", "path": ["TreeNode.prev", "TreeNode.parent"],
               "retained_bytes": 100}
        yield {"type": "TreeNode", "path": ["TreeNode.parent", "TreeNode.prev"],
               "retained_bytes": 50}
        if window % 2:
            yield {"type": "dict", "path": ["dict[5]", "TreeNode.parent", "TreeNode.children"],
                   "retained_bytes": 10}
    yield {"type": "odd", "path": []}


def test_aggregate_cycles_counts_shapes_across_windows() -> None:
    shapes = aggregate_cycles(windows_of_cycles())
    assert [(s.count, s.retained_bytes) for s in shapes] == [(8, 600), (2, 20)]
    assert shapes[0].shape == ("TreeNode.parent", "TreeNode.prev")
    assert shapes[0].types == ("TreeNode",)
    assert shapes[0].describe() == "TreeNode.parent -> TreeNode.prev -> (back)"
    assert shapes[1].shape == ("TreeNode.children", "dict[]", "TreeNode.parent")
    assert len(aggregate_cycles(windows_of_cycles(), top=1)) == 1


def test_worker_side_import_stays_light() -> None:
    """The worker imports the explainer in its garbage sampler: no numpy, no scipy."""
    code = ("import sys, harness.worker.heapgraph.cycles; "
            "print(sorted({'numpy', 'scipy'} & {*sys.modules}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_explainer_keeps_to_its_time_budget_on_garbage_heavy_with_lists(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A bench run on SGLang 0.5.11 ended 'hung': its last garbage window walked the
    leaked trees' token lists for over 30 s. The budget cuts the walk (about 3 s
    without it here); the cycle is still named, its retained size a lower bound."""
    import time

    from harness.worker.heapgraph import cycles

    x, y = two_cycle()
    x.children = {k: [k] * 2000 for k in range(2000)}  # type: ignore[misc]
    garbage = [x, y, x.__dict__, y.__dict__, x.children, *x.children.values()]
    monkeypatch.setattr(cycles, "BUDGET_S", 0.05)
    began = time.monotonic()
    found = explain_garbage(garbage, limit=1)
    assert time.monotonic() - began < 1.0
    assert found and found[0]["path"] == ["TreeNode.prev", "TreeNode.parent"]

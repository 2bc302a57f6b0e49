"""Python lists as stacks and queues of scalars in data-dependent loops (issue #47).

``stack = [source]; while stack: node = stack.pop(); ...; stack.append(nb)``: a list whose every
use is a creation, ``pop()`` / ``pop(0)`` / ``popleft()``, ``append`` / ``extend``, ``len()``, an
item read or an emptiness test is one tensor of its items while converted code runs
(converters/list_stacks.py, operators/lists/stacks.py), so the loop that pushes and pops it is an
ONNX ``Loop`` whose carried value grows and shrinks. Differential: eager vs ONNX Runtime, exact
(int64), on graphs of 1 node and more (revisits taking the ``continue``, several components),
stacks drained after 0, 1, 2 and N trips; a float pushed onto an int64 stack is refused in one
line at the push; a stack of Python ints over a Python structure stays Python's list.
"""

from __future__ import annotations

import pytest
import torch

import fxport
from fxport.controlflow import converted_source
from tests.controlflow import list_stack_models as m
from tests.controlflow._util import (assert_every_branch_taken, assert_matches_eager, export_to_ort, line_in_source,
                                     trip_counts)

N = torch.export.Dim("n", min=1, max=64)
GRAPH = ({0: N, 1: N}, None)

#: graphs with a source: 1 node (1 trip), a triangle (revisits: `continue`), two components,
#: a path with a branch, a tree, a star from a leaf
GRAPHS = [(m.adjacency(1, []), torch.tensor(0)),
          (m.adjacency(3, [(0, 1), (1, 2), (0, 2)]), torch.tensor(1)),
          (m.adjacency(5, [(0, 1), (2, 3)]), torch.tensor(2)),
          (m.adjacency(6, [(0, 1), (1, 2), (2, 3), (3, 4), (1, 5)]), torch.tensor(0)),
          (m.adjacency(4, [(0, 1), (1, 2), (0, 3)]), torch.tensor(0)),
          (m.adjacency(7, [(0, k) for k in range(1, 7)]), torch.tensor(3))]


def _converts_on_graphs(model, example=GRAPHS[4], inputs=GRAPHS, dynamic_shapes=GRAPH, min_loops=1):
    exported = export_to_ort(model, example, dynamic_shapes=dynamic_shapes)
    assert exported.ops.get("Loop", 0) >= min_loops
    assert_matches_eager(model, exported, inputs, atol=0, rtol=0)
    return exported


@pytest.mark.slow  # about 25 s
def test_a_dfs_with_a_list_stack_converts():
    model = m.DfsStack()
    assert_every_branch_taken(model, GRAPHS)
    assert {1, 3, 7, 11} <= trip_counts(model, GRAPHS)[line_in_source(m.DfsStack.forward, "while stack")]
    assert "lists.stacks.take_last" in converted_source(m.DfsStack.forward)
    _converts_on_graphs(model, min_loops=2)


@pytest.mark.slow  # about 15 s
def test_a_bfs_queue_popped_at_the_front_converts():
    model = m.BfsQueue()
    assert_every_branch_taken(model, GRAPHS)
    assert "lists.stacks.take_first" in converted_source(m.BfsQueue.forward)
    _converts_on_graphs(model, min_loops=2)


@pytest.mark.slow  # about 8 s
def test_a_deque_popped_left_and_extended_by_a_tensor_converts():
    assert "lists.stacks.take_first" in converted_source(m.DequeFrontier.forward)
    _converts_on_graphs(m.DequeFrontier())


@pytest.mark.slow  # about 26 s
def test_a_stack_of_a_python_int_root_extended_by_tensors_converts():
    """``stack = [0]``: Python's list until the first push of tensors; the branch that pushes none
    leaves it empty, which is the tensor of no items beside the other branch's."""
    graphs = [(a,) for a, _ in GRAPHS]
    _converts_on_graphs(m.DfsFromRootZero(), graphs[4], graphs, ({0: N, 1: N},))


def test_a_stack_drained_after_0_1_2_and_n_trips_converts():
    model = m.DrainedStack()
    inputs = [(torch.tensor([-1.0]),), (torch.tensor([2.0]),), (torch.tensor([-1.0, 2.0, 3.0]),),
              (torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),), (torch.tensor([-1.0, -2.0]),),
              (torch.tensor([1.0, -2.0, 3.0, 4.0]),)]
    assert {0, 1, 2, 3, 6} <= set().union(*trip_counts(model, inputs).values())
    exported = export_to_ort(model, inputs[-1], dynamic_shapes=({0: N},))
    assert exported.ops.get("Loop", 0) >= 1
    assert_matches_eager(model, exported, inputs, atol=0, rtol=0)


def test_a_float_pushed_onto_an_int64_stack_is_refused_at_the_push():
    with pytest.raises(fxport.ControlFlowError) as info:
        export_to_ort(m.FloatOntoIntStack(), GRAPHS[4], dynamic_shapes=GRAPH)
    message = str(info.value)
    assert "is pushed onto list 'stack', held as a torch.int64 tensor" in message and "\n" not in message
    assert f":{line_in_source(m.FloatOntoIntStack.forward, 'stack.append(acc / 2)')}" in message


def test_a_stack_of_python_ints_over_a_python_tree_stays_a_list():
    model = m.StaticTreeWalk()
    inputs = [(torch.tensor([1.0, 2.0]),), (torch.tensor([-0.5]),)]
    exported = export_to_ort(model, inputs[0], dynamic_shapes=({0: N},))
    assert exported.ops.get("Loop", 0) == 0
    assert_matches_eager(model, exported, inputs)


def test_a_stack_used_another_way_is_left_as_written():
    assert "lists.stacks" not in converted_source(m.ReturnedStack.forward)
    assert "lists.stacks" in converted_source(m.StaticTreeWalk.forward)


@pytest.mark.slow  # about 6 s
def test_a_stack_peeked_and_popped_under_a_bound_and_a_tensor_test_converts():
    """``while stack and steps < limit``: ended by the emptied stack and by the bound; ``stack[-1]``,
    ``len(stack)`` read each trip, a push under a tensor condition."""
    model = m.PeekAndBoundedPops()
    inputs = [(torch.tensor([-1.0]), torch.tensor(5)), (torch.tensor([3.0, 1.0, 4.0]), torch.tensor(2)),
              (torch.tensor([3.0, 1.0, 4.0, -2.0, 5.0]), torch.tensor(20)), (torch.tensor([1.0, 2.0]), torch.tensor(0)),
              (torch.tensor([0.5, 3.5, 2.5, 1.0]), torch.tensor(1)), (torch.tensor([2.0, 1.0]), torch.tensor(9))]
    assert_every_branch_taken(model, inputs)
    assert {0, 1, 2, 11} <= set().union(*trip_counts(model, inputs).values())
    exported = export_to_ort(model, inputs[2], dynamic_shapes=({0: N}, None))
    assert exported.ops.get("Loop", 0) >= 1
    assert_matches_eager(model, exported, inputs, atol=1e-6, rtol=1e-6)

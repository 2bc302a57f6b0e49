"""Models whose Python list is a stack or a queue of scalars that a data-dependent loop pushes
onto and pops from (tests/controlflow/test_list_stacks.py)."""

import collections

import torch
from torch import nn


def adjacency(n: int, edges, directed: bool = False) -> torch.Tensor:
    """An n x n 0/1 float adjacency matrix of ``edges``."""
    a = torch.zeros(n, n)
    for i, j in edges:
        a[i, j] = 1.0
        if not directed:
            a[j, i] = 1.0
    return a


class DfsStack(nn.Module):
    """Iterative DFS: ``stack = [source]``, ``node = stack.pop()``, ``continue`` on visited nodes,
    neighbours pushed one by one in a ``for`` over ``nonzero()``; the visiting order per node."""

    def forward(self, adj, source):
        visited = torch.zeros(adj.shape[0], dtype=torch.bool)
        order = torch.full((adj.shape[0],), -1)
        stack = [source]
        count = 0
        while stack:
            node = stack.pop()
            if visited[node]:
                continue
            visited[node] = True
            order[node] = count
            count += 1
            for nb in adj[node].nonzero().flatten():
                stack.append(nb)
        return order


class BfsQueue(nn.Module):
    """BFS distances with a list queue popped at the front (``queue.pop(0)``), a neighbour pushed
    under a tensor test (``if dist[nb] < 0``) in the ``for`` over its neighbours."""

    def forward(self, adj, source):
        dist = torch.full((adj.shape[0],), -1)
        dist[source] = 0
        queue = [source]
        while len(queue) > 0:
            v = queue.pop(0)
            for nb in adj[v].nonzero().flatten():
                if dist[nb] < 0:
                    dist[nb] = dist[v] + 1
                    queue.append(nb)
        return dist


class DequeFrontier(nn.Module):
    """BFS with ``collections.deque([source])`` and ``popleft()``, the unseen neighbours pushed at
    once (``q.extend(new.nonzero().flatten())``); the step each node is taken off the queue."""

    def forward(self, adj, source):
        seen = torch.zeros(adj.shape[0], dtype=torch.bool)
        seen[source] = True
        taken = torch.full((adj.shape[0],), -1)
        q = collections.deque([source])
        step = 0
        while q:
            v = q.popleft()
            taken[v] = step
            step += 1
            new = (adj[v] > 0) & ~seen
            seen = seen | new
            q.extend(new.nonzero().flatten())
        return taken


class DrainedStack(nn.Module):
    """A stack that starts empty, filled with the positions of the positive entries, drained by a
    ``while stack:`` (0, 1, 2 or N trips), each pop weighting the entry by how many are left;
    ``if not stack`` after it."""

    def forward(self, x):
        stack = []
        stack.extend((x > 0).nonzero().flatten())
        total = x.new_zeros(())
        while stack:
            i = stack.pop()
            total = total + x[i] * (len(stack) + 1)
        if not stack:
            total = total + 0.5
        return total


class FloatOntoIntStack(nn.Module):
    """A float pushed onto a stack of int64 nodes (``stack.append(acc / 2)``): refused at the push."""

    def forward(self, adj, source):
        stack = [source]
        acc = adj.new_zeros(())
        while stack:
            v = stack.pop()
            acc = acc + v + 1
            if acc < 5:
                stack.append(acc / 2)
        return acc


class DfsFromRootZero(nn.Module):
    """DFS from the constant root ``stack = [0]`` (a Python int; the pushed neighbours are
    tensors), pushing all unvisited neighbours at once with ``extend``."""

    def forward(self, adj):
        visited = torch.zeros(adj.shape[0], dtype=torch.bool)
        order = torch.full((adj.shape[0],), -1)
        stack = [0]
        count = 0
        while stack:
            node = stack.pop()
            if not visited[node]:
                visited[node] = True
                order[node] = count
                count += 1
                stack.extend(((adj[node] > 0) & ~visited).nonzero().flatten())
        return order


class StaticTreeWalk(nn.Module):
    """A stack of Python ints over a tree held in a dict: every pop a Python int, the walk unrolled
    as Python runs it (the stack stays Python's list)."""

    tree = {0: [1, 2], 1: [], 2: [3, 4], 3: [], 4: []}

    def forward(self, x):
        stack = [0]
        while stack:
            v = stack.pop()
            x = x * (v + 1) - v
            stack.extend(self.tree[v])
        return x


class ReturnedStack(nn.Module):
    """A stack that is also returned: used another way, so it stays a Python list as written."""

    def forward(self, x):
        stack = [x.sum()]
        top = stack.pop()
        stack.append(top * 2)
        return stack


class PeekAndBoundedPops(nn.Module):
    """``while stack and steps < limit``: the top read with ``stack[-1]`` before it is popped,
    a second pop under a tensor condition (``if x[top] < 0``), ``len(stack)`` read each trip."""

    def forward(self, x, limit):
        stack = [torch.tensor(0)]
        stack.extend((x > 0).nonzero().flatten())
        total = x.new_zeros(())
        steps = 0
        while stack and steps < limit:
            top = stack[-1]
            total = total + x[top] * len(stack)
            stack.pop()
            if x[top] > 2:
                stack.append(top - 1)
            steps += 1
        return total, len(stack)

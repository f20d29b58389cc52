"""The chain solver of the replay (tracekit.whatif.replay.solve_chains) against the recurrence of
docs/whatif.md evaluated node by node, on hand-made and random chains (hypothesis)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tracekit.whatif.graph import NEG
from tracekit.whatif.replay import solve_chains


def by_node(first, lead, d1, d2, anchor, R, W):
    """start_i = max(end_{i-1}, R_i, anchor_i) + lead_i; end_i = max(start_i + d1_i, W_i) + d2_i
    (no time where every term is missing), one node at a time."""
    n = len(first)
    start = np.full(n, NEG, dtype=np.int64)
    end = np.full(n, NEG, dtype=np.int64)
    for i in range(n):
        prev = NEG if first[i] else end[i - 1]
        s = max(prev, R[i], anchor[i])
        if s > NEG // 2:
            start[i] = s + lead[i]
        e = max(start[i] + d1[i] if start[i] > NEG // 2 else NEG, W[i])
        if e > NEG // 2:
            end[i] = e + d2[i]
    return start, end


def test_many_one_node_chains_with_the_same_start():
    """1,024 replicas of one rank put the same node of each copy in one replay window: 128
    one-node chains whose only start dependency is the same time. Every value the running
    maximum saw was then equal, and its batches were all dropped (the ends came out as whatever
    memory held: a 1,024-rank job's baseline was off by 26 hours on 2 steps of 3)."""
    n = 128
    first = np.ones(n, dtype=bool)
    zeros = np.zeros(n, dtype=np.int64)
    R = np.full(n, 120_589_292, dtype=np.int64)
    lead, d1 = np.full(n, 3_018, dtype=np.int64), np.full(n, 5_445, dtype=np.int64)
    anchor, W = np.full(n, NEG, dtype=np.int64), np.full(n, NEG, dtype=np.int64)
    start, end = solve_chains(first, lead, d1, zeros, anchor, R, W)
    assert (start == 120_592_310).all() and (end == 120_597_755).all()


def test_a_sync_waits_for_its_work():
    """Chain: a call [0, 10], then a sync that waits for work ending at 500 and returns 20 later."""
    first = np.array([True, False])
    start, end = solve_chains(first, np.array([0, 5]), np.array([10, 0]), np.array([0, 20]),
                              np.array([0, NEG]), np.array([NEG, NEG]), np.array([NEG, 500]))
    assert start.tolist() == [0, 15] and end.tolist() == [10, 520]


times = st.one_of(st.just(int(NEG)), st.integers(0, 10**9), st.sampled_from([7, 10**12]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(-1000, 10**6), st.integers(0, 10**6),
                          st.integers(0, 10**4), times, times, times), min_size=1, max_size=60))
def test_solve_chains_is_the_recurrence(rows):
    first, lead, d1, d2, anchor, R, W = (np.array(c, dtype=bool if k == 0 else np.int64)
                                         for k, c in enumerate(zip(*rows)))
    first[0] = True
    got = solve_chains(first, lead, d1, d2, anchor, R, W)
    want = by_node(first, lead, d1, d2, anchor, R, W)
    assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()

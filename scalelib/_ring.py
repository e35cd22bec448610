"""What one link of a ring carries during a collective (chapter 3, the book's Q10).

A ring of D devices, each holding 1/D of an array of V bytes. In an AllGather
every device's shard must reach the D − 1 others, so, pipelined around a one-way
ring, every link carries D − 1 shards: V·(D − 1)/D. In an AllToAll each device
sends a different block of V/D² to each other device, and the block for the
device k steps ahead crosses k links: every link carries
(1 + 2 + … + (D − 1))·V/D² = V·(D − 1)/(2D), half an AllGather's load.

With links in both directions an AllGather sends half of each shard each way,
halving the load per link; an AllToAll sends each block the shorter way round,
so no block travels more than D/2 links, which quarters it: about V/8 against
V/2, the factor of 4 between the two collectives on a TPU torus
(:func:`alltoall_time_s`). A ReduceScatter is the transpose of an AllGather and
loads the links the same; an AllReduce is both, twice.
"""

from __future__ import annotations

import numpy as np

from ._derivation import Derivation, derivable, plain, q
from ._errors import InvalidValueError
from ._validate import count, flag, nonnegative, shown

_KINDS = {"allgather": "AllGather", "reducescatter": "ReduceScatter", "allreduce": "AllReduce",
          "alltoall": "AllToAll"}


@derivable
def ring_link_bytes(nbytes, devices, *, collective="allgather", bidirectional=True):
    """Bytes that cross each link of a ring of `devices`, in one direction, during a collective of `nbytes`.

    Every link of the ring carries the same load, by symmetry. One-way links
    (``bidirectional=False``) form a ring in which data goes one way only; with
    bidirectional links, an AllGather sends half of each shard each way round
    and an AllToAll sends each block the shorter way (half each way at exactly
    D/2). Divide by a link's one-way bandwidth for the time the collective takes
    when bandwidth-bound.

    Formula:
        one-way: AllGather = ReduceScatter = V·(D−1)/D, AllToAll = Σ_k k·V/D² = V·(D−1)/(2D);
        bidirectional: AllGather = V·(D−1)/(2D), AllToAll = Σ_k min(k, D−k)·V/(2D²) ≈ V/8;
        AllReduce = 2 · AllGather

    Args:
        nbytes: V, bytes of the whole array (B), >= 0: the gathered array of an
            AllGather, the unreduced array of a ReduceScatter or AllReduce, the
            array an AllToAll re-shards. Counting scalars instead of bytes works
            the same way.
        devices: D, the devices in the ring (>= 1).
        collective: "allgather", "reducescatter", "allreduce" or "alltoall".
        bidirectional: whether the links carry data both ways at once.

    Returns:
        bytes (B) per link and direction, in the unit `nbytes` was given in.

    Chapter:
        3 (Sharded matrices)

    Example:
        >>> N, D = 1024, 8                       # an N x N array of scalars on a ring of 8
        >>> ring_link_bytes(N * N, D, collective="allgather", bidirectional=False) / N**2
        0.875
        >>> ring_link_bytes(N * N, D, collective="alltoall", bidirectional=False) / N**2
        0.4375
        >>> ring_link_bytes(N * N, D) / ring_link_bytes(N * N, D, collective="alltoall")
        3.5
    """
    V = nonnegative("nbytes", nbytes)
    D = count("devices", devices)
    two_way = flag("bidirectional", bidirectional)
    if not isinstance(collective, str) or collective.lower() not in _KINDS:
        raise InvalidValueError(f"`collective` must be one of {', '.join(_KINDS)}, got {shown(collective)}")
    kind = _KINDS[collective.lower()]
    way = "bidirectional" if two_way else "one-way"
    symbol = f"V_link({kind}, {way} ring of {D})"
    where = "V: bytes of the whole array; D: devices in the ring"
    if D == 1:
        return Derivation(symbol, "0 (one device: no link)", "", plain(0.0 * np.asarray(V)), "B")
    if kind == "AllToAll":
        hops = D * D // 4 if two_way else D * (D - 1) // 2  # Σ_k min(k, D − k), or Σ_k k, for k = 1 … D − 1
        per = 2 * D * D if two_way else D * D
        formula = "Σ_k min(k, D−k) · V / (2·D²)" if two_way else "Σ_k k · V / D²"
        value = plain(hops * np.asarray(V) / per)
        return Derivation(symbol, formula, lambda: f"{hops} · {q(nbytes, 'B')} / {per}", value, "B",
                          where=(f"{where}; k: how many steps ahead a block's destination is, 1 to D−1"
                                 + (" (each block goes the shorter way)" if two_way else ""),))
    passes = 2 if kind == "AllReduce" else 1
    split = 2 if two_way else 1
    value = plain(passes * np.asarray(V) * (D - 1) / (split * D))
    formula = (f"{'2 · ' if passes == 2 else ''}V·(D−1)/{'(2D)' if two_way else 'D'}")
    return Derivation(symbol, formula,
                      lambda: f"{'2 · ' if passes == 2 else ''}{q(nbytes, 'B')}·{D - 1}/{split * D}",
                      value, "B", where=(where,))

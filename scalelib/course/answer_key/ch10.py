"""Chapter 10 exercises: programming with JAX.

Most exercises here are ``kind="jax"``: the learner writes a JAX function, which
the checker runs under ``jax.jit`` on a mesh of simulated devices, with inputs
drawn from a seed and sharded as each case writes them in the book's notation
(see :mod:`scalelib.course.jax_check`). A reference is a NumPy function of the
whole inputs (the unsharded result); a :class:`CollectiveRule` says what the
compiled program may and must communicate. The sizes below are small enough for
a laptop's CPU; the questions follow ch. 10 "Programming TPUs in JAX" of How to
Scale Your Model (Austin et al., 2025), whose items ``book=`` names.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..check import Exercise, register
from ..jax_check import CollectiveRule
from ._tools import define, slip
from ..._derivation import Derivation, explain
from ..._jax_collectives import collective_matmul_time_s
from ..._roofline import matmul_flops, t_comms_s, t_math_s
from ..._specs import bytes_per_value, chip as chip_spec


def _case(mesh, sizes, arrays, seed, **extra) -> dict:
    return {"mesh": mesh, "sizes": sizes, "arrays": list(arrays), "seed": seed, **extra}


M24, M42 = {"X": 2, "Y": 4}, {"X": 4, "Y": 2}
F32 = bytes_per_value("f32")


def _blocks(a, n: int, axis: int) -> list[np.ndarray]:
    """`a` cut into `n` equal blocks along `axis`, as a mesh axis of n devices splits it."""
    return np.split(np.asarray(a), n, axis=axis)


# 10.1 ------------------------------------------------------------------------

def _shard_means(a, *, mesh):
    """[X, Y]: the mean of each device's block of A[S_X, D_Y]."""
    X, Y = mesh["X"], mesh["Y"]
    return a.reshape(X, a.shape[0] // X, Y, a.shape[1] // Y).mean(axis=(1, 3))


register(Exercise(
    id="10.1",
    title="The mean of each shard, with no communication",
    reference=lambda: _shard_means,
    kind="jax",
    rtol=1e-4,
    cases=(
        _case(M24, {"S": 64, "D": 32}, ["A[S_X, D_Y]"], 1),
        _case(M42, {"S": 32, "D": 16}, ["A[S_X, D_Y]"], 2),
    ),
    rule=CollectiveRule(forbid=("any",), why="Each device already holds the whole of its shard, so its mean needs "
                                             "nothing from any other device."),
    wrong=(
        (lambda a, *, mesh: np.full((mesh["X"], mesh["Y"]), a.mean()),
         "every entry holds the mean of the whole array; each entry is one device's block only"),
        (lambda a, *, mesh: _shard_means(a, mesh=mesh) * (a.size / (mesh["X"] * mesh["Y"])),
         "these are sums over each block; divide by the number of values a block holds"),
    ),
    reason="A device computes its block's mean from its own block: the [X, Y] result holds one value per device, "
           "and nothing crosses between chips.",
    book=("Q1",),
))


# 10.2 ------------------------------------------------------------------------

def _roll_in_shards(a, *, mesh, shift):
    """roll(block, shift, axis=0) - block, for each block of rows A[S_X, ...] holds on one X position."""
    return np.concatenate([np.roll(b, shift, axis=0) - b for b in _blocks(a, mesh["X"], 0)], axis=0)


register(Exercise(
    id="10.2",
    title="Roll the rows inside each shard along X",
    reference=lambda: _roll_in_shards,
    kind="jax",
    rtol=1e-4,
    cases=(
        _case(M24, {"S": 64, "D": 32}, ["A[S_X, D_Y]"], 3, kwargs={"shift": 3}),
        _case(M42, {"S": 32, "D": 16}, ["A[S_X, D_Y]"], 4, kwargs={"shift": 5}),
    ),
    rule=CollectiveRule(forbid=("any",), why="Rolling inside a shard keeps every row on its device: no "
                                             "collective-permute is needed, as one would be for a roll of the whole "
                                             "array."),
    wrong=(
        (lambda a, *, mesh, shift: np.roll(a, shift, axis=0) - a,
         "you rolled the whole array: rows moved from one X shard into the next; roll each shard on its own"),
        (lambda a, *, mesh, shift: np.concatenate([np.roll(b, shift, axis=0) for b in _blocks(a, mesh["X"], 0)]),
         "that is the rolled array; the exercise asks for the rolled array minus the array"),
        (lambda a, *, mesh, shift: _roll_in_shards(a, mesh=mesh, shift=-shift),
         "you rolled the other way: roll(x, shift) moves row i to row i + shift"),
    ),
    reason="Inside shard_map each device sees its own [S/X, D/Y] block, so jnp.roll of that block is the roll within "
           "the shard; the compiled program moves nothing between devices.",
    book=("Q1",),
))


# 10.3 ------------------------------------------------------------------------

register(Exercise(
    id="10.3",
    title="An AllGather built from ppermute",
    reference=lambda: (lambda a, *, mesh: a),
    kind="jax",
    rtol=1e-6,
    cases=(
        _case(M24, {"S": 32, "D": 16}, ["A[S_Y, D]"], 5),
        _case({"X": 1, "Y": 8}, {"S": 32, "D": 8}, ["A[S_Y, D]"], 6),
    ),
    rule=CollectiveRule(forbid=("all-gather", "all-reduce", "reduce-scatter", "all-to-all"),
                        require=("collective-permute",), replicated=True,
                        why="Build it from Y - 1 neighbour-to-neighbour steps (jax.lax.ppermute), each passing on "
                            "the block a device received the step before."),
    reason="Y - 1 steps round the ring, each moving one block of S/Y rows: (Y - 1)/Y of the array reaches every "
           "device, the same bytes as an AllGather, and each step could overlap with work on the block it brings.",
))


# 10.4 ------------------------------------------------------------------------

def _moe(a, w, b, *, mesh):
    """Out[i] = A[i] @ W[B[i]] (one expert per token)."""
    return np.einsum("sd,sdf->sf", a.astype(np.float64), w[b].astype(np.float64))


def _moe_top_k(a, w, b, *, mesh):
    """Out[i] = the mean over j of A[i] @ W[B[i, j]] (k experts per token; one chosen twice counts twice)."""
    return np.einsum("sd,skdf->sf", a.astype(np.float64), w[b].astype(np.float64)) / b.shape[1]


def _less_than_sdf(sizes, mesh):
    """Fewer values than [S, D, F]: an array with an expert matrix per token is that large or larger."""
    return sizes["S"] * sizes["D"] * sizes["F"] - 1


_MOE_LOCAL = ["A[S, D]", "W[E, D, F]", "B[S, K]"]

register(Exercise(
    id="10.4",
    title="A mixture of experts with k experts per token, without an [S, D, F] array",
    reference=lambda: _moe_top_k,
    kind="jax",
    rtol=1e-4,
    cases=(
        _case({"X": 1}, {"S": 64, "D": 64, "F": 48, "E": 4, "K": 2}, _MOE_LOCAL, 7, integers={"B": "E"}),
        _case({"X": 1}, {"S": 48, "D": 64, "F": 40, "E": 4, "K": 2}, _MOE_LOCAL, 8, integers={"B": "E"}),
    ),
    rule=CollectiveRule(max_values=_less_than_sdf,
                        why="W[B] copies an expert's whole [D, F] matrix for every token (and every choice): "
                            "group the tokens by expert, or loop over the experts with a mask, so that each "
                            "expert's matrix is used as it is."),
    wrong=(
        (lambda a, w, b, *, mesh: _moe(a, w, b[:, 0], mesh=mesh),
         "only each token's first choice counts; average over all k of its experts"),
        (lambda a, w, b, *, mesh: _moe_top_k(a, w, b, mesh=mesh) * b.shape[1],
         "that is the sum over the k experts; the exercise asks for their mean"),
    ),
    reason="Each expert's matrix meets the tokens that chose it, weighted by how many of their k choices it got; "
           "no array holds an expert matrix per token.",
    book=("Q2",),
))


# 10.5 ------------------------------------------------------------------------

_MOE_SHARDED = ["A[S_X, D]", "W[E_X, D, F]", "B[S_X]"]

register(Exercise(
    id="10.5",
    title="The mixture of experts sharded over X, tokens moved by all_to_all",
    reference=lambda: _moe,
    kind="jax",
    rtol=1e-4,
    points=2,
    cases=(
        _case(M24, {"S": 64, "D": 32, "F": 48, "E": 8}, _MOE_SHARDED, 9, integers={"B": "E"}),
        _case(M42, {"S": 64, "D": 16, "F": 32, "E": 8}, _MOE_SHARDED, 10, integers={"B": "E"}),
    ),
    rule=CollectiveRule(forbid=("all-gather", "all-reduce", "reduce-scatter"), require=("all-to-all",),
                        why="Send each token to the device holding its expert and the result back with "
                            "jax.lax.all_to_all over X; gathering every token (or every expert) on every device "
                            "moves X times more and needs X times the memory."),
    reason="Each device sends, for each other device, the tokens whose experts live there (a fixed-size buffer of "
           "S/X rows per destination, since all of them may go to one device), multiplies what it receives by its "
           "own experts, and all_to_all brings the results home.",
    book=("Q2",),
))


# 10.6 ------------------------------------------------------------------------

def _matmul(a, w, *, mesh):
    return a.astype(np.float64) @ w.astype(np.float64)


#: 10.6 to 10.8 contract over X and split the batch over Y: the chapter's worked versions (cells of
#: book/ch10_jax.ipynb) contract over Y, so a learner writes the variant rather than lifting them.
_AR_ARRAYS = ["A[B_Y, D_X]", "W[D_X, F]"]


def _half_output_block(sizes, mesh):
    """Bytes of half a device's [B/Y, F] block of the result (f32): no one all-reduce may carry more."""
    return sizes["B"] // mesh["Y"] * sizes["F"] * F32 / 2


register(Exercise(
    id="10.6",
    title="An AllReduce collective matmul, tiled over F",
    reference=lambda: _matmul,
    kind="jax",
    rtol=1e-4,
    points=2,
    cases=(
        _case(M24, {"B": 64, "D": 128, "F": 256}, _AR_ARRAYS, 11),
        _case(M42, {"B": 64, "D": 64, "F": 128}, _AR_ARRAYS, 12),
    ),
    rule=CollectiveRule(forbid=("all-gather", "reduce-scatter", "all-to-all"),
                        max_bytes={"all-reduce": _half_output_block},
                        why="One all-reduce of the whole [B/Y, F] block can only start once the local matmul has "
                            "finished, so nothing overlaps: compute the result a tile of F at a time and reduce each "
                            "tile while the next is computed (inside a jax.lax.fori_loop, so that XLA does not merge "
                            "the tiles' all-reduces back into one)."),
    reason="Each tile's AllReduce carries a fraction of the block and can run while the next tile is multiplied; in "
           "all, the bytes are those of one AllReduce of the block.",
    book=("Q3",),
))


# 10.7 ------------------------------------------------------------------------

def _output_block(sizes, mesh):
    """Bytes of one device's [B/Y, D/X] block of the result (f32): the partial sum one step may pass on."""
    return sizes["B"] // mesh["Y"] * (sizes["D"] // mesh["X"]) * F32


_RS_ARRAYS = ["T[B_Y, F_X]", "W2[F_X, D]"]  # contracted over X: the chapter's cell contracts over Y
_RS_FORBID = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all")

register(Exercise(
    id="10.7",
    title="A ReduceScatter collective matmul: pass the partial sums round the ring",
    reference=lambda: _matmul,
    kind="jax",
    rtol=1e-4,
    points=2,
    cases=(
        _case(M24, {"B": 64, "F": 256, "D": 128}, _RS_ARRAYS, 13),
        _case(M42, {"B": 64, "F": 128, "D": 64}, _RS_ARRAYS, 14),
    ),
    rule=CollectiveRule(forbid=_RS_FORBID, require=("collective-permute",),
                        max_bytes={"collective-permute": _output_block},
                        why="At each step a device adds its own contribution to one block of the output and hands "
                            "that block to its neighbour along X (jax.lax.ppermute); after X - 1 steps each device "
                            "holds the finished block it keeps. Pass one [B/Y, D/X] block per step, never the whole "
                            "partial result."),
    reason="X - 1 steps, each passing one [B/Y, D/X] block of partial sums while the next block's contribution is "
           "multiplied: the bytes of one ReduceScatter, spread over the matmul.",
    book=("Q3",),
))


# 10.8 ------------------------------------------------------------------------

register(Exercise(
    id="10.8",
    title="The ReduceScatter collective matmul, sending both ways round the ring",
    reference=lambda: _matmul,
    kind="jax",
    rtol=1e-4,
    points=2,
    cases=(
        _case(M24, {"B": 64, "F": 256, "D": 128}, _RS_ARRAYS, 15),
        _case({"X": 8, "Y": 1}, {"B": 32, "F": 128, "D": 128}, _RS_ARRAYS, 16),
    ),
    rule=CollectiveRule(forbid=_RS_FORBID, require=("collective-permute",), both_ways=True,
                        max_bytes={"collective-permute": lambda sizes, mesh: _output_block(sizes, mesh) / 2},
                        why="Split each output block into two halves: one half travels one way round the ring and "
                            "the other the opposite way, each step passing half a block in each direction, so both "
                            "directions of every link carry data."),
    reason="Half a block each way per step: with links that carry both directions at once, each step's transfer "
           "takes half the time of the one-way version.",
    book=("Q4",),
))


# 10.9 ------------------------------------------------------------------------

_STEP = dict(B=2048, D=5120, F=13824, X=4, Y=4)  # LLaMA-2-13B's MLP widths, a 4x4 mesh of TPU v5p


def _step_times(value_bytes: int = 2, two_way_share: float = 0.5, two_way_directions: int = 1,
                one_way_directions: int = 1, flops_per_mac: int = 2, peak: str = "bf16",
                F_per_device: int | None = None) -> np.ndarray:
    """[one-way permute, two-way permute, matmul] of one collective-matmul step on TPU v5p, with these figures.

    The defaults give the reference; a slip of 10.9 is one of them changed: the bytes per value, the share
    of the block one direction carries in the two-way version, the links' directions counted in the
    bandwidth, the FLOPs per multiply-add, the peak's precision, or W's columns per device.
    """
    B, D, F, X, Y = _STEP.values()
    block = B // X * (D // Y) * value_bytes
    w = t_comms_s(1, "tpu-v5p", bandwidth="ici")   # seconds per byte over one link, one way
    F_dev = F // Y if F_per_device is None else F_per_device
    return np.array([block * w / one_way_directions, block * two_way_share * w / two_way_directions,
                     flops_per_mac / 2 * t_math_s(matmul_flops(B // X, D // Y, F_dev), "tpu-v5p", dtype=peak)])


def _collective_matmul_step() -> Derivation:
    """Reference for 10.9: [one-way permute, two-way permute, matmul] times of one collective-matmul step on v5p."""
    B, D, F, X, Y = _STEP.values()
    block = B // X * (D // Y) * bytes_per_value("bf16")
    v_blk = Derivation("V_blk", "b·(B/X)·(D/Y)", f"{int(bytes_per_value('bf16'))}·{B // X}·{D // Y}", block, "B")
    one_way = replace(explain(t_comms_s, block, "tpu-v5p", bandwidth="ici"), symbol="T_one_way",
                      formula="V_blk / W")
    two_ways = replace(explain(t_comms_s, block / 2, "tpu-v5p", bandwidth="ici"), symbol="T_two_ways",
                       formula="(V_blk / 2) / W")
    flops = Derivation("FLOPs", "2·(B/X)·(D/Y)·(F/Y)", f"2·{B // X}·{D // Y}·{F // Y}",
                       matmul_flops(B // X, D // Y, F // Y), "FLOP")
    math = replace(explain(t_math_s, flops.value, "tpu-v5p", dtype="bf16"), symbol="T_matmul")
    result = Derivation("answer", "[T_one_way, T_two_ways, T_matmul]", "", _step_times(), "s",
                        (v_blk, one_way, two_ways, flops, math))
    return define(result, {"b": "bytes per bf16 value",
                           "B, D, F": "the tokens, and LLaMA-2-13B's model width and MLP width",
                           "X, Y": "the mesh's axes (4 each); a step moves one block of In[B_X, D_Y]",
                           "W": "one ICI link's one-way bandwidth on a TPU v5p",
                           "C": "the TPU v5p's bf16 peak"})


_10_9 = _step_times()

register(Exercise(
    id="10.9",
    title="One step of a collective matmul on TPU v5p, one way and both ways",
    reference=_collective_matmul_step,
    unit="s",
    involves=frozenset(),
    mistakes={
        slip(_step_times(two_way_share=1), _10_9):
            "in the two-way version the block is split between the two directions of the link: each direction "
            "carries only its own part of it, not the whole block",
        slip(_step_times(value_bytes=4), _10_9):
            "check the bytes per value: the blocks are bf16",
        slip(_step_times(one_way_directions=2, two_way_directions=2), _10_9):
            "a collective-permute step sends over one link in one direction: use the link's one-way figure",
        slip(_step_times(two_way_directions=2), _10_9):
            "in the two-way version each part of the block travels in its own direction at the one-way figure; "
            "splitting the block already puts both directions to use, so the bandwidth is not counted twice",
        slip(_step_times(flops_per_mac=1), _10_9):
            "either you counted a multiply-add as one FLOP (a matmul does two FLOPs per multiply-add), or you "
            "took the chip's int8 peak for bf16 arithmetic",
        slip(_step_times(F_per_device=_STEP["F"]), _10_9):
            "the matmul of one step multiplies a block by the matching rows of the device's own shard of "
            "W_in, which holds only its share of the columns",
    },
    book=("Ex1", "Q4"),
))


# 10.10 -----------------------------------------------------------------------

_V6E = dict(B=2048, D=4096, F=16384, mesh={"X": 2, "Y": 4})  # a TPU v6e 2x4 slice: Y is a line of four chips


def _v6e_times(chip: str = "tpu-v6e", value_bytes: float = 2, wraparound: bool = False, W_scale: float = 1.0,
               last_step: bool = True, steps_with_transfer: int = 3) -> np.ndarray:
    """[gather first, one way] of the collective matmul on the v6e slice; the defaults give the reference.

    A slip of 10.10 is one of them changed: the chip, the bytes per value, Y taken as a ring, the link's bandwidth
    counted both ways (W_scale=2), the last multiplication left out, or every one of the Y steps counted as
    waiting for a transfer (steps_with_transfer=4).
    """
    B, D, F, mesh = _V6E["B"], _V6E["D"], _V6E["F"], _V6E["mesh"]
    X, Y = mesh["X"], mesh["Y"]
    spec = chip_spec(chip)
    t_blk = value_bytes * (B // X) * (D // Y) / (W_scale * spec.ici_link_bytes_per_s_one_way)
    t_mm = matmul_flops(B // X, D // Y, F // Y) / spec.bf16_flops_per_s
    gather = (Y - 1) * t_blk / (2 if wraparound else 1) + Y * t_mm
    one_way = steps_with_transfer * max(t_blk, t_mm) + (t_mm if last_step else 0)
    return np.array([gather, one_way])


def _without_spec_lines(d: Derivation) -> Derivation:
    """`d` without the lines that only quote a chip's figure (W, C): the `where` lines say what they are."""
    return replace(d, steps=tuple(_without_spec_lines(s) for s in d.steps if not s.symbol.startswith(("W(", "C("))))


def _v6e_collective_matmul() -> Derivation:
    """Reference for 10.10: the book's collective matmul on a TPU v6e 2x4 slice, gathering first and one way."""
    B, D, F, mesh = _V6E["B"], _V6E["D"], _V6E["F"], _V6E["mesh"]
    first = explain(collective_matmul_time_s, B, D, F, "tpu-v6e", mesh=mesh, schedule="gather first",
                    wraparound=False)
    one_way = explain(collective_matmul_time_s, B, D, F, "tpu-v6e", mesh=mesh, schedule="one way",
                      wraparound=False)
    result = Derivation("answer", "[T(gather first), T(one way)]", "", np.array([first.value, one_way.value]),
                        "s", (_without_spec_lines(first), _without_spec_lines(one_way)))
    return define(result, {"b": "bytes per bf16 value",
                           "B, D, F": "the tokens, the model width and the MLP width",
                           "X, Y": "the slice's axes, 2 and 4 chips (a 2x4 slice: Y is a line, without wraparound)",
                           "W": "one ICI link's one-way bandwidth on a TPU v6e",
                           "C": "the TPU v6e's bf16 peak"})


_10_10 = _v6e_times()

register(Exercise(
    id="10.10",
    title="The collective matmul on a TPU v6e 2x4 slice: does the overlap pay?",
    reference=_v6e_collective_matmul,
    unit="s",
    involves=frozenset(),
    mistakes={
        slip(_v6e_times(wraparound=True), _10_10):
            "a 2x4 slice has no wraparound links: Y is a line, so the AllGather's blocks reach an end chip over one "
            "link, one way, (Y − 1)·T_blk, not half of that",
        slip(_v6e_times(wraparound=True, W_scale=2), _10_10):
            "a step sends its block over one link in one direction: use the link's one-way bandwidth",
        slip(_v6e_times(value_bytes=4), _10_10):
            "check the bytes per value: the blocks are bf16, 2 bytes a value",
        slip(_v6e_times(chip="tpu-v5e"), _10_10):
            "those are a TPU v5e's figures; the slice is a TPU v6e",
        slip(_v6e_times(last_step=False), _10_10):
            "after the Y − 1 steps that each overlap a transfer, the last block still has to be multiplied: "
            "add one T_mm",
        slip(_v6e_times(steps_with_transfer=4), _10_10):
            "only Y − 1 steps send a block; the last step multiplies the block that has just arrived",
    },
    book=("Ex1",),
))

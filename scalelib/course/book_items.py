"""The book's questions, chapter by chapter, and where the course answers each one.

The course mirrors *How to Scale Your Model* (Austin et al., Google DeepMind, 2025):
every question the book asks in a chapter has a counterpart in the course's chapter,
either an auto-graded exercise (its registration names the item: ``book=("Q3",)``)
or, where no single number answers it, a worked problem in the chapter notebook (a
Markdown cell whose metadata names the item: ``{"scalelib": {"book": ["Q6"]}}``).
:func:`claims` collects both; ``tests/test_book_coverage.py`` checks that every item
of every chapter on the site is claimed.

Item ids follow the book's numbering: ``Q<n>`` for a numbered question, ``Pop quiz``
for an unnumbered pop quiz, ``Quiz m Qn`` and ``Pop quiz n`` in chapter 12 (whose
quizzes restart their numbering). Titles are short labels of our own; ``Ex<n>``
items (worked examples the book poses in its text) are listed as optional.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class BookItem:
    """One question of the book: its id in the book's chapter, a short label, whether coverage needs it."""

    id: str
    title: str
    required: bool = True


def _items(*rows) -> tuple[BookItem, ...]:
    return tuple(BookItem(*row) for row in rows)


#: chapter number -> the book's items in that chapter, in the book's order.
ITEMS: dict[int, tuple[BookItem, ...]] = {
    1: _items(
        ("Ex1", "intensity of a dot product", False),
        ("Ex2", "a matmul split over two chips", False),
        ("Q1", "an int8 matmul: bytes, OPs, intensity and time bounds"),
        ("Q2", "int8 weights with bf16 activations: the critical batch"),
        ("Q3", "attainable FLOP/s against batch for two matrix sizes"),
        ("Q4", "a weight matrix per example"),
        ("Q5", "the H100's critical batch from its data sheet"),
    ),
    2: _items(
        ("Q1", "weight-loading floor of a sampling step on 32 v4p chips"),
        ("Q2", "hosts, cores, FLOP/s and HBM of a v5e and a v5p pod"),
        ("Q3", "the smallest batch that stays compute-bound over PCIe"),
        ("Q4", "an int8 matmul's time against batch, from HBM and from VMEM"),
        ("Q5", "first byte and whole transfer between two chips of a 4x4 slice"),
        ("Q6", "host DRAM to HBM to one chip over ICI, then a matmul"),
        ("Pop quiz", "a v5p VPU's vector throughput"),
    ),
    3: _items(
        ("Pop quiz a", "bytes per device and HBM load time of an array sharded over two axes"),
        ("Pop quiz b", "per-device and total memory of an array replicated over one axis"),
        ("Pop quiz 2", "an AllGather on a v5e axis without wraparound, large and latency-bound"),
        ("Q1", "total bytes over all chips against one copy of a replicated array"),
        ("Q2", "AllGather and AllReduce times on a v4p 4x4x4"),
        ("Q3", "a latency-bound AllGather"),
        ("Q4", "AllGather the weights first, or multiply and AllReduce after"),
        ("Q5", "the input shardings that give the lowest latency"),
        ("Q6", "the collectives of three matmul shardings on a v5e 4x4"),
        ("Q7", "sharding an MLP that does not fit in one chip's memory"),
        ("Q8", "benchmarking the collectives with shard_map"),
        ("Q9", "a sharded contraction computed as partial sums and an AllReduce"),
        ("Q10", "AllToAll against AllGather on a ring, one-way and bidirectional"),
    ),
    4: _items(
        ("Q1", "parameters, attention's share and KV bytes per token of a 64-layer model"),
        ("Q2", "total and per-chip FLOPs of a matmul sharded over two of three axes"),
        ("Q3", "FLOPs of a general einsum"),
        ("Q4", "arithmetic intensity of dot-product attention in prefill and decode"),
        ("Q5", "the sequence length where attention FLOPs match the projections'"),
        ("Q6", "extra backward FLOPs when only seven matmul outputs are saved"),
        ("Q7", "DeepSeek-V3's FLOPs utilisation"),
        ("Q8", "the batch an MoE needs to be compute-bound"),
    ),
    5: _items(
        ("Ex1", "how far each scheme scales LLaMA-3 70B at a 2M-token batch", False),
        ("Q1", "LLaMA-2 13B's parameter count"),
        ("Q2", "memory for weights, optimizer state and checkpointed activations"),
        ("Q3", "DP, FSDP or FSDP + TP for 32k sequences on a v5p 16x16x16"),
    ),
    6: _items(
        ("Text Q1", "LLaMA 3-70B's parameter count"),
        ("Text Q2", "training FLOPs per token"),
        ("Text Q3", "total training FLOPs for 15T tokens"),
        ("Text Q4", "training time on a full v5p pod at 40% MFU"),
        ("Text Q5", "the fewest chips whose memory holds a 4M-token batch"),
        ("Text Q6", "memory per chip on 8960 chips"),
        ("Text Q7", "whether FSDP alone, without sequence sharding, suffices"),
        ("Text Q8", "whether FSDP over batch and sequence stays compute-bound"),
        ("Text Q9", "the FSDP x TP split that stays compute-bound"),
        ("Q1", "LLaMA 3-70B on four v5p pods"),
        ("Q2", "LLaMA 3-405B: parameters, FLOPs and a plan on eight pods"),
    ),
    7: _items(
        ("Pop quiz", "the lower bound on a generate step at batch 4 and 256"),
        ("Ex1", "LLaMA 2-13B's throughput as the batch grows", False),
        ("Q1", "parameters and KV bytes per token"),
        ("Q2", "the largest batch at a 128k context"),
        ("Q3", "the weight-loading floor of a decode step"),
        ("Q4", "shardings for prefill and decode"),
        ("Q5", "the model as a mixture of experts"),
        ("Q6", "sharding the experts"),
        ("Q7", "2D weight-stationary sharding against 1D"),
    ),
    8: _items(
        ("Text Q1", "KV bytes per token of LLaMA 3-70B"),
        ("Text Q2", "memory at batch 32 and 8k context, and the smallest slice"),
        ("Text Q3", "decode latency on a 4x2 and a 4x4"),
        ("Text Q4", "the critical batch by precision"),
        ("Text Q5", "the smallest topology in bf16, int8 and int4"),
        ("Text Q6", "step latency at the largest batch"),
        ("Text Q7", "queries per second per chip"),
        ("Text Q8", "throughput on twice the chips"),
        ("Text Q9", "decode sharding on a 4x8 in bf16"),
        ("Text Q10", "the time of an 8192-token prefill"),
        ("Text Q11", "sequences finished and KV freed per step"),
        ("Text Q12", "the ratio of prefill to generation servers"),
        ("Q1", "LLaMA 3-405B's forward FLOPs and time bounds"),
        ("Q2", "LLaMA 3-8B at batch 240: bytes and the smallest topology"),
        ("Q3", "LLaMA 3-405B within 15 ms per token"),
    ),
    9: _items(
        ("Ex1", "predicting the example profile's matmul and ReduceScatter times", False),
        ("Ex2", "predicting the attention projection's time", False),
        ("Q1", "what a profile computes: its shapes and sharding from the HLO"),
        ("Q2", "fixing the mock Transformer's sharding"),
    ),
    10: _items(
        ("Ex1", "a collective matmul that overlaps the AllGather with compute", False),
        ("Q1", "per-shard means and a roll inside each shard, without communication"),
        ("Q2", "a toy mixture of experts, local then sharded"),
        ("Q3", "AllReduce and ReduceScatter collective matmuls for a Transformer block"),
        ("Q4", "bidirectional collective matmuls"),
    ),
    # The book's chapter 11 ("Conclusions and Further Reading") is a reading list: it asks nothing. The
    # course's chapter 11 is a capstone instead, whose exercises are each learner's own brief.
    11: (),
    12: _items(
        ("Quiz 1 Q1", "CUDA cores of an H100 and a B200 against a v5p's ALUs"),
        ("Quiz 1 Q2", "an H100's vector FLOP/s"),
        ("Quiz 1 Q3", "fp16 and fp8 critical intensity of the H100 and B200"),
        ("Quiz 1 Q4", "two matmuls' runtimes on a B200"),
        ("Quiz 1 Q5", "SMEM and registers of an H100 against a TPU's VMEM"),
        ("Quiz 1 Q6", "the B200's clock from its vector rate"),
        ("Quiz 1 Q7", "adding two fp32 vectors on an H100"),
        ("Quiz 2 Q1", "total bandwidth of an H100 node"),
        ("Quiz 2 Q2", "bisection bandwidth of an H100 node"),
        ("Quiz 2 Q3", "an AllGather inside an H100 node"),
        ("Quiz 3 Q1", "bisection bandwidth of the 1024-GPU SuperPod's fat tree"),
        ("Quiz 3 Q2", "growing the SuperPod to 2048 and 4096 GPUs"),
        ("Pop quiz 1", "AllGather time in a node"),
        ("Pop quiz 2", "AllToAll time in a node, dense and half-sparse"),
        ("Pop quiz 3", "an AllGather with the array sharded along two axes"),
        ("Quiz 4 Q1", "bytes through the node and leaf switches of an SU AllGather"),
        ("Quiz 4 Q2", "an AllReduce reduced in the switches (SHARP) in one node"),
        ("Quiz 4 Q3", "a SHARP AllReduce of a two-axis sharded array, and beyond one node"),
        ("Quiz 4 Q4", "a SHARP AllReduce reduced at the spine"),
        ("Quiz 4 Q5", "an AllGather over exactly two nodes"),
        ("Quiz 5 Q1", "B200 SuperPod rooflines for TP and DP"),
        ("Quiz 5 Q2", "sharding LLaMA-3 70B on 4096 H100s"),
        ("Quiz 5 Q3", "Megatron-LM's batch per GPU and whether it is compute-bound"),
    ),
}

ROOT = Path(__file__).resolve().parents[2]


def _chapter_notebook(chapter: int, root: Path) -> Path | None:
    found = sorted((root / "book").glob(f"ch{chapter:02d}_*.ipynb"))
    return found[0] if found else None


def claims(chapter: int, root: Path = ROOT) -> dict[str, list[str]]:
    """Item id -> what claims it: exercise ids (``"exercise 1.7"``) and worked problems (``"worked problem in ..."``)."""
    from .check import exercises, get_exercise

    found: dict[str, list[str]] = {}
    for eid in exercises(chapter):
        for item in get_exercise(eid).book:
            found.setdefault(item, []).append(f"exercise {eid}")
    notebook = _chapter_notebook(chapter, root)
    if notebook is not None:
        for index, cell in enumerate(json.loads(notebook.read_text(encoding="utf-8"))["cells"]):
            for item in cell.get("metadata", {}).get("scalelib", {}).get("book", []):
                found.setdefault(item, []).append(f"worked problem in {notebook.name}, cell {index + 1}")
    return found


def unclaimed(chapter: int, root: Path = ROOT) -> list[BookItem]:
    """The required items of `chapter` that no exercise or worked problem claims."""
    have = claims(chapter, root)
    return [item for item in ITEMS.get(chapter, ()) if item.required and item.id not in have]


def unknown_claims(chapter: int, root: Path = ROOT) -> dict[str, list[str]]:
    """Claims naming an item the chapter does not have (a typo in an id)."""
    known = {item.id for item in ITEMS.get(chapter, ())}
    return {item: where for item, where in claims(chapter, root).items() if item not in known}

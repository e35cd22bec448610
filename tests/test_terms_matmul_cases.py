"""The book's cases of a sharded matmul (ch. 3) for a batched einsum: a batch dimension sharded differently on the
two operands is case 2 (an operand must be resharded) whichever operand has which axes; sharded alike, case 1."""

import pytest

import scalelib as sl

SIZES = {"B": 8, "I": 16, "J": 32, "K": 64}
MESH = {"X": 4, "Y": 2}


@pytest.mark.parametrize("a, b, cases", [
    ("B_X", "B_X", (1,)),
    ("B_X", "B_Y", (2,)),
    ("B_Y", "B_X", (2,)),
    ("B_XY", "B_X", (2,)),
    ("B_X", "B_XY", (2,)),
    ("B_YX", "B_XY", (2,)),
])
def test_a_batch_dimension_sharded_differently_is_case_2_either_way(a, b, cases):
    plan = sl.plan_matmul(f"A[{a}, I, J] * B[{b}, J, K] -> C[B_X, I, K]", SIZES, MESH)
    assert plan.cases == cases
    assert str(plan.result) == "C[B_X, I, K]"


@pytest.mark.parametrize("result, got", [("C[B, K]", "B, K"), ("C[B, I]", "B, I")])
def test_a_result_missing_a_kept_dimension_is_not_a_batched_einsum(result, got):
    # B is shared and kept, but the result drops I or K: B is contracted after all, and the result must be [I, K]
    with pytest.raises(sl.InvalidValueError, match=rf"^`expr`: the result {result.replace('[', '.').replace(']', '.')} "
                                                   rf"must have the dimensions I, K \(those not contracted\), got {got}$"):
        sl.plan_matmul(f"A[B, I] * B[B, K] -> {result}", {"B": 8, "I": 16, "K": 64}, {"X": 4, "Y": 2})


@pytest.mark.parametrize("expr, kind, group, moved", [
    # a [64, 128] bf16 array: each device's block is 64·128·2 / 4 = 4096 bytes
    ("A[I_X, J] -> A[I, J_X]", "AllToAll", 4, 4096 * 3 / 4),   # sends all but its own quarter of its block
    ("A[I_X, J] -> A[I, J]", "AllGather", 4, 4096 * 3),        # takes in the three other blocks
    ("A[I_XY, J] -> A[I, J_XY]", "AllToAll", 8, 2048 * 7 / 8),  # one AllToAll over the 8 devices of X and Y
])
def test_a_reshard_moves_by_hand_what_each_device_sends(expr, kind, group, moved):
    plan = sl.plan_reshard(expr, {"I": 64, "J": 128}, {"X": 4, "Y": 2})
    (step,) = plan.steps
    assert (step.kind, step.group) == (kind, group)
    assert step.moved_bytes == pytest.approx(moved, rel=1e-12)
    assert step.nbytes == 64 * 128 * 2

"""Exercises graded on JAX code (kind="jax"): seeded sharded inputs, the checker's judgement of values
and of compiled collectives, and the grader end to end on a submission whose kernel runs JAX.

Most tests here need no JAX devices: they judge results (an output and its compiled HLO, as the kernel
sends them) in this process, as the grader does. JAX fixes its device count when it starts, so the
checks that run learners' functions on 8 simulated devices run in one fresh Python process; the grader
test runs a kernel of its own.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import grading_notebooks as nbs
import scalelib as sl
from scalelib.course import check as _check
from scalelib.course import record
from scalelib.course.check import Exercise, get_exercise, register
from scalelib.course.grade import Limits, grade_notebook, grading_cases, judge
from scalelib.course.jax_check import (CollectiveRule, draw_cases, host_callback, judge_results, label, rule_problem,
                                       value_problem)

MESH = {"X": 2, "Y": 4}


# ---------------------------------------------------------------------------
# Inputs: the same numbers on both sides, from the seed


def test_inputs_are_numpy_draws_from_the_seed_array_by_array():
    a, w, b = sl.input_values(["A[S_X, D_Y]", "W[E_X, D, F]", "B[S_X]"], {"S": 8, "D": 4, "E": 2, "F": 3}, MESH,
                              seed=5, integers={"B": "E"})
    assert (a.shape, a.dtype, w.shape, b.shape, b.dtype) == ((8, 4), np.float32, (2, 4, 3), (8,), np.int32)
    np.testing.assert_array_equal(a, np.random.default_rng([5, 0]).standard_normal((8, 4), dtype=np.float32))
    np.testing.assert_array_equal(b, np.random.default_rng([5, 2]).integers(0, 2, size=8, dtype=np.int32))
    again = sl.input_values(["A[S_X, D_Y]"], {"S": 8, "D": 4}, MESH, seed=5)[0]
    other = sl.input_values(["A[S_X, D_Y]"], {"S": 8, "D": 4}, MESH, seed=6)[0]
    np.testing.assert_array_equal(again, a)
    assert not np.allclose(other, a)


@pytest.mark.parametrize("arrays, sizes, integers, message", [
    (["A[S_X, D_Y]"], {"S": 8, "D": 6}, None, "`sizes`: D = 6 does not split into 4 equal blocks over Y in "
                                               "'A[S_X, D_Y]'; choose a multiple of 4"),
    (["A[S_X, D_Y]"], {"S": 8}, None, "`sizes` has no size for 'D', which 'A[S_X, D_Y]' uses"),
    (["A[S_X]", "A[D]"], {"S": 8, "D": 4}, None, "`arrays`: the name 'A' is given to two arrays"),
    (["A[S_Z]"], {"S": 8}, None, "`arrays`: unknown mesh axis 'Z'"),
    (["[S_X]"], {"S": 8}, None, "`arrays`: give each array a name, as in 'A[S_X, D_Y]', got '[S_X]'"),
    (["A[S_X]"], {"S": 8}, {"B": 3}, "`integers` names 'B', which is none of the arrays (A)"),
    (["B[S_X]"], {"S": 8}, {"B": "E"}, "`integers`: the bound of 'B' names a dimension that `sizes` lacks"),
    (["A[S_X]"], {"S": 2**27}, None, "test inputs hold at most"),
])
def test_an_input_description_with_a_mistake_is_refused_saying_what_to_fix(arrays, sizes, integers, message):
    with pytest.raises(sl.InvalidValueError, match=None) as err:
        sl.input_values(arrays, sizes, MESH, integers=integers)
    assert message in str(err.value)


# ---------------------------------------------------------------------------
# Registering a jax exercise


def test_a_rule_names_kinds_of_collective_as_hlo_does():
    with pytest.raises(sl.InvalidValueError, match="`forbid` must be a tuple of all-gather"):
        CollectiveRule(forbid=("AllGather",))
    with pytest.raises(sl.InvalidValueError, match="`require` must be a tuple"):
        CollectiveRule(require=("any",))
    assert CollectiveRule(forbid=("any",)).forbidden() == sl._jax_bridge.KINDS


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.setattr(_check, "_REGISTRY", {})
    return _check._REGISTRY


def _means(a, *, mesh):
    return a.reshape(mesh["X"], a.shape[0] // mesh["X"], -1).mean(axis=(1, 2))


CASES = ({"mesh": {"X": 2}, "sizes": {"S": 8, "D": 4}, "arrays": ["A[S_X, D]"], "seed": 1},
         {"mesh": {"X": 4}, "sizes": {"S": 8, "D": 2}, "arrays": ["A[S_X, D]"], "seed": 2})
NO_COMMS = CollectiveRule(forbid=("any",), why="Each device has its rows.")


def _register_means(**changes):
    fields = dict(id="99.1", title="means of row blocks", reference=lambda: _means, kind="jax", rtol=1e-5,
                  cases=CASES, rule=NO_COMMS, mistakes={4.0: "a sum over the block's D values, not a mean"},
                  wrong=((lambda a, *, mesh: np.full(mesh["X"], a.mean()), "the mean of the whole array"),),
                  reason="Each device averages its own block.")
    fields.update(changes)
    return register(Exercise(**fields))


@pytest.mark.parametrize("changes, message", [
    ({"cases": ()}, "a jax exercise needs `cases` to run on"),
    ({"cases": ({"mesh": {"X": 2}, "sizes": {"S": 7, "D": 4}, "arrays": ["A[S_X, D]"], "seed": 1},)},
     "S = 7 does not split into 2 equal blocks"),
    ({"cases": ({"mesh": {"X": 2}, "arrays": ["A[S_X, D]"], "seed": 1},)}, "case 1 must be a dict with mesh, sizes"),
    ({"rule": "no comms"}, "`rule` must be a CollectiveRule"),
    ({"wrong": ((np.mean,),)}, "`wrong` must hold pairs"),
])
def test_a_jax_exercise_with_a_mistake_is_refused_at_registration(registry, changes, message):
    with pytest.raises(sl.InvalidValueError, match=None) as err:
        _register_means(**changes)
    assert message in str(err.value)


# ---------------------------------------------------------------------------
# What the compiled program communicates, read from its HLO

GATHER_X = ("%ag = f32[64,128]{1,0} all-gather(f32[32,128]{1,0} %p), replica_groups=[4,2]<=[2,4]T(1,0), "
            "dimensions={0}")
RIGHT = ", ".join(f"{{{i},{4 * (i // 4) + (i + 1) % 4}}}" for i in range(8))  # one step forward along Y
LEFT = ", ".join(f"{{{i},{4 * (i // 4) + (i - 1) % 4}}}" for i in range(8))
PERMUTE_RIGHT = f"%cp = f32[16,8]{{1,0}} collective-permute(f32[16,8]{{1,0}} %p), source_target_pairs={{{RIGHT}}}"
PERMUTE_LEFT = f"%cq = f32[16,8]{{1,0}} collective-permute(f32[16,8]{{1,0}} %q), source_target_pairs={{{LEFT}}}"
CASE = {"mesh": MESH, "sizes": {"B": 32, "D": 64}, "arrays": ["A[B_X, D_Y]"], "seed": 0}


@pytest.mark.parametrize("rule, hlo, replicated, problem", [
    (CollectiveRule(forbid=("any",), why="Why."), GATHER_X, True,
     "your compiled program has an all-gather over X (32.8 kB per device); this exercise asks for no "
     "communication. Why."),
    (CollectiveRule(forbid=("all-gather",), over=("Y",)), GATHER_X, True, None),
    (CollectiveRule(forbid=("all-gather",), over=("X",)), GATHER_X, True,
     "your compiled program has an all-gather over X (32.8 kB per device); this exercise asks for no all-gather "
     "over X."),
    (CollectiveRule(require=("collective-permute",)), GATHER_X, True,
     "your compiled program has no collective-permute (it has all-gather); this exercise asks for one."),
    (CollectiveRule(max_bytes={"collective-permute": lambda sizes, mesh: sizes["B"] * 8}), PERMUTE_RIGHT, True,
     "your compiled program has a collective-permute over Y (512 B per device), more than this exercise lets one "
     "collective-permute move (256 B)."),
    (CollectiveRule(max_values=1000), GATHER_X, True,
     "your compiled program builds an array f32[64,128] of 8,192 values on a device, more than this exercise "
     "allows (1,000)."),
    (CollectiveRule(both_ways=True), PERMUTE_RIGHT, True,
     "your compiled program sends its blocks one way round the ring only."),
    (CollectiveRule(both_ways=True), PERMUTE_RIGHT + "\n" + PERMUTE_LEFT, True, None),
    (CollectiveRule(replicated=True), "", False,
     "your function's result is split over the devices; this exercise asks for it whole on every device."),
    (CollectiveRule(replicated=True, forbid=("all-reduce",)), PERMUTE_RIGHT, True, None),
])
def test_the_rule_is_judged_on_the_collectives_of_the_compiled_hlo(rule, hlo, replicated, problem):
    assert rule_problem(rule, CASE, hlo, replicated) == problem


# ---------------------------------------------------------------------------
# Values: how far off, and the likely slip, never the answer


def test_values_are_told_how_many_entries_differ_and_the_likely_slip(registry):
    exercise = _register_means()
    a = sl.input_values(["A[S_X, D]"], {"S": 8, "D": 4}, {"X": 2}, seed=1)[0]
    want = _means(a, mesh={"X": 2})
    apply = lambda f: f(a, mesh={"X": 2})  # noqa: E731
    assert value_problem(exercise, want * (1 + 1e-7), want, apply) == (None, None)
    assert value_problem(exercise, want[:1], want, apply)[0] == (
        "your function returned an array of shape (1,), and the unsharded result has shape (2,)")
    assert value_problem(exercise, -want, want, apply) == (
        "your values differ from the unsharded result on every entry", "every value has the wrong sign")
    assert value_problem(exercise, 4 * want, want, apply)[1] == "a sum over the block's D values, not a mean"
    assert value_problem(exercise, want[::-1], want, apply)[1] == (
        "the right values, in the wrong places (check which block goes where)")
    assert value_problem(exercise, np.full(2, a.mean()), want, apply)[1] == "the mean of the whole array"
    off = want.copy()
    off[1] += 1.0
    assert value_problem(exercise, off, want, apply) == (
        "your values differ from the unsharded result on 1 of 2 entries (50%)", None)
    nan = want.copy()
    nan[0] = np.nan
    assert "(some are NaN or infinite)" in value_problem(exercise, nan, want, apply)[0]


# ---------------------------------------------------------------------------
# Judging what the kernel sent back (the grader's side: no JAX devices needed)


def _value(output, hlo="", replicated=True):
    return {"result": "value", "answer": record.describe(np.asarray(output)), "hlo": hlo, "replicated": replicated}


def _right(case, hlo="", seed2=777_777_777):
    a = sl.input_values(case["arrays"], case["sizes"], case["mesh"], seed=case["seed"])[0]
    a2 = sl.input_values(case["arrays"], case["sizes"], case["mesh"], seed=seed2)[0]
    return _value(_means(a, mesh=case["mesh"]), hlo) | {
        "seed2": seed2, "answer2": record.describe(np.asarray(_means(a2, mesh=case["mesh"])))}


def test_a_constant_right_only_on_the_case_s_own_draw_fails_on_the_second_draw(registry):
    exercise = _register_means()
    constant = [_right(c) | {"answer2": _right(c)["answer"]} for c in CASES]  # the same output on both draws
    v = judge_results(exercise, CASES, constant)
    assert v.status == "incorrect" and "on a second draw of inputs" in v.message, v.message
    v = judge_results(exercise, CASES, [{k: x for k, x in _right(c).items() if k != "answer2"} for c in CASES])
    assert v.status == "incorrect" and "was not run on a second draw of inputs" in v.message


def test_a_host_callback_in_the_compiled_program_is_refused():
    assert host_callback('%c = custom-call(%x), custom_call_target="xla_python_cpu_callback"') == \
        "xla_python_cpu_callback"
    assert host_callback('%c = custom-call(%x), custom_call_target="__cublas$gemm"') is None
    # as JAX 0.7 compiles them on CPU: pure_callback and io_callback with a result, then jax.debug.print
    returns = ('ROOT %pure_callback.1 = f32[4]{0} custom-call(%x.1), custom_call_target="xla_ffi_python_cpu_callback", '
               'operand_layout_constraints={f32[4]{0}}, api_version=API_VERSION_TYPED_FFI')
    assert host_callback(returns) == "xla_ffi_python_cpu_callback"
    assert host_callback('%io = (f32[4]{0}, token[]) custom-call(%x, %t), custom_call_target="xla_python_cpu_callback"')
    prints = ('%debug_print.1 = () custom-call(%wrapped_reduce), custom_call_target="xla_ffi_python_cpu_callback", '
              'operand_layout_constraints={f32[]}, custom_call_has_side_effect=true')
    assert host_callback(prints) is None
    assert host_callback('%io = (token[]) custom-call(%x, %t), custom_call_target="xla_python_cpu_callback"') is None


def test_right_values_with_no_collectives_are_correct_and_say_why(registry):
    exercise = _register_means()
    v = judge_results(exercise, CASES, [_right(c) for c in CASES])
    assert v.status == "correct"
    assert v.message == ("✅ Exercise 99.1: correct — your function matches the unsharded result on all 2 cases, "
                         "and its compiled program has no collectives.\n   Each device averages its own block.")


def test_right_values_with_a_forbidden_collective_are_incorrect_and_name_it(registry):
    exercise = _register_means()
    hlo = "%ar = f32[1]{0} all-reduce(f32[1]{0} %p), replica_groups={{0,1}}, to_apply=%add"
    v = judge_results(exercise, CASES, [_right(CASES[0], hlo), _right(CASES[1])])
    assert v.status == "incorrect"
    assert v.message == ("❌ Exercise 99.1: the values are right on mesh X=2 with S=8, D=4, but your compiled "
                         "program has an all-reduce over X (4 B per device); this exercise asks for no "
                         "communication. Each device has its rows.")


@pytest.mark.parametrize("result, status, message", [
    ({"result": "not implemented"}, "not attempted",
     "⬜ Exercise 99.1: not attempted (your function still raises NotImplementedError)."),
    ({"result": "error", "type": "TypeError", "message": "dot_general requires ... got (4,) and (3,)."}, "incorrect",
     "❌ Exercise 99.1: your function raised TypeError: dot_general requires ... got (4,) and (3,) "
     "(on mesh X=2 with S=8, D=4)."),
    ({"result": "timeout", "limit_s": 2.0}, "incorrect",
     "❌ Exercise 99.1: your function did not finish within 2 s on mesh X=2 with S=8, D=4."),
    ({"result": "none"}, "incorrect",
     "❌ Exercise 99.1: your function returned None on mesh X=2 with S=8, D=4; did it forget `return`?"),
    ({"result": "unavailable", "message": "InvalidValueError: a mesh of 2 needs 2 devices, but JAX has 1"},
     "incorrect", "❌ Exercise 99.1: your function could not be run on mesh X=2 with S=8, D=4: InvalidValueError: "
                  "a mesh of 2 needs 2 devices, but JAX has 1"),
    (_value(np.zeros(2)) | {"answer": record.describe((1.0, "x"))}, "incorrect",
     "❌ Exercise 99.1: your function returned tuple (1.0, 'x'), which cannot be read as an array of numbers "
     "(TypeError: a list holding a str ('x') is not a list of numbers) (on mesh X=2 with S=8, D=4)."),
    (_value(np.zeros(2)) | {"answer": {"kind": "none"}}, "incorrect",
     "❌ Exercise 99.1: your function returned None; did it forget `return`? (on mesh X=2 with S=8, D=4)."),
])
def test_every_way_a_run_can_end_gets_a_verdict_and_never_a_crash(registry, result, status, message):
    exercise = _register_means()
    v = judge_results(exercise, CASES, [result, _right(CASES[1])])
    assert (v.status, v.message) == (status, message)


def test_the_grader_judges_a_recorded_jax_function_and_flags_a_malformed_record(registry):
    _register_means()
    cases = list(grading_cases("99.1", seed=4))
    payload = {"kind": "function", "exercise": "99.1", "name": "f",
               "_calls": (cases, [_right(c) for c in cases], None)}
    assert judge("99.1", payload) == (judge_results(get_exercise("99.1"), cases, [_right(c) for c in cases]), None)
    assert judge("99.1", payload)[0].status == "correct"
    broken = dict(payload, _calls=(cases, [{"result": "value", "answer": {"kind": "number", "value": "1.0"}}] * 4,
                                   None))
    result, flag = judge("99.1", broken)
    assert result.status == "incorrect" and "malformed" in flag and "without its output or its compiled HLO" in flag
    result, _ = judge("99.1", {"kind": "function", "exercise": "99.1", "name": "f"})
    assert "could not be run on the test cases (it was never called)" in result.message
    assert judge("99.1", record.describe(3.0))[0].message == (
        "❌ Exercise 99.1: expected a function of JAX arrays (the function itself, not a call to it), got float 3.0.")


def test_cases_drawn_at_grading_time_keep_mesh_and_arrays_with_new_seeds_and_sizes():
    for eid in sl.exercises(10):
        exercise = get_exercise(eid)
        if exercise.kind != "jax":
            continue
        cases = grading_cases(eid, seed=11)
        n = len(exercise.cases)
        assert cases[:n] == tuple(dict(c) for c in exercise.cases) and len(cases) == 2 * n
        for base, drawn in zip(cases[:n], cases[n:]):
            assert (drawn["mesh"], drawn["arrays"], drawn.get("kwargs")) == (base["mesh"], base["arrays"],
                                                                             base.get("kwargs"))
            assert drawn["seed"] != base["seed"]
            assert all(drawn["sizes"][d] in (n, 2 * n) for d, n in base["sizes"].items())
        assert grading_cases(eid, seed=11) == cases and grading_cases(eid, seed=12) != cases
    drawn = draw_cases(CASES, random.Random(0))
    assert label(drawn[0]).startswith("on mesh X=2 with S=")


# ---------------------------------------------------------------------------
# Learners' functions run on 8 simulated devices (a fresh process: JAX fixes its device count at start)

CHAPTER_10 = str(Path(__file__).resolve().parents[1] / "book" / "ch10_jax.ipynb")

SCRIPT = textwrap.dedent("""
    import jax
    jax.config.update("jax_num_cpu_devices", 8)
    import json
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import PartitionSpec as P
    import scalelib as sl

    def means(a, mesh):
        return jax.shard_map(lambda x: x.mean(keepdims=True), mesh=mesh, in_specs=P("X", "Y"),
                             out_specs=P("X", "Y"))(a)

    def means_by_psum(a, mesh):  # right values, but it all-reduces over Y for nothing
        def local(x):
            m = x.mean(keepdims=True)
            return m + jax.lax.psum(m, "Y") - jax.lax.psum(m, "Y")
        return jax.shard_map(local, mesh=mesh, in_specs=P("X", "Y"), out_specs=P("X", "Y"))(a)

    def means_of_everything(a, mesh):
        return jnp.full((mesh.shape["X"], mesh.shape["Y"]), a.mean())

    def stub(a, mesh):
        raise NotImplementedError("write your solution here")

    def means_by_callback(a, mesh):  # the mean taken in NumPy on the host, through pure_callback
        X, Y = mesh.shape["X"], mesh.shape["Y"]
        host = lambda x: np.asarray(x).reshape(X, x.shape[0] // X, Y, -1).mean(axis=(1, 3)).astype(np.float32)
        return jax.pure_callback(host, jax.ShapeDtypeStruct((X, Y), jnp.float32), a)

    def means_from_frames(a, mesh):  # the concrete input found in a caller's frame while tracing, as a constant
        import inspect
        X, Y = mesh.shape["X"], mesh.shape["Y"]
        for info in inspect.stack():
            for v in list(info.frame.f_locals.values()):
                for w in (v if isinstance(v, (list, tuple)) else [v]):
                    if isinstance(w, jax.Array) and not isinstance(w, jax.core.Tracer) and w.shape == a.shape:
                        x = np.asarray(w)
                        return jnp.asarray(x.reshape(X, x.shape[0] // X, Y, -1).mean(axis=(1, 3)), dtype=a.dtype)
        return jnp.zeros((X, Y), a.dtype)

    def means_printing(a, mesh):  # right, and prints while it runs: jax.debug.print gives the program nothing back
        def local(x):
            m = x.mean(keepdims=True)
            jax.debug.print("mean {m}", m=m)
            return m
        return jax.shard_map(local, mesh=mesh, in_specs=P("X", "Y"), out_specs=P("X", "Y"))(a)

    def raises(a, mesh):
        return a @ jnp.ones(3)

    def roll_whole(a, mesh, shift):
        return jnp.roll(a, shift, axis=0) - a

    def reduce_scatter_by_psum_scatter(t, w2, mesh):
        local = lambda t, w: jax.lax.psum_scatter(t @ w, "X", scatter_dimension=1, tiled=True)
        return jax.shard_map(local, mesh=mesh, in_specs=(P("Y", "X"), P("X", None)), out_specs=P("Y", "X"))(t, w2)

    # chapter 10's own collective matmuls (book/ch10_jax.ipynb), lifted as a learner would copy them: the
    # exercises ask for the variant contracted over X, so the copies must earn nothing
    import pathlib
    cells = ["".join(c["source"]) for c in json.loads(pathlib.Path(CHAPTER_10).read_text())["cells"]
             if c["cell_type"] == "code"]
    space = {"jax": jax, "jnp": jnp, "np": np, "P": P}
    for name in ("reducescatter_local", "allreduce_both_ways_local"):
        (source,) = [s for s in cells if f"def {name}(" in s]
        exec(source.split(chr(10) * 3)[0], space)

    def lifted(local, in_specs, out_specs, **kw):
        return lambda x, w, mesh: jax.shard_map(local, mesh=mesh, in_specs=in_specs, out_specs=out_specs, **kw)(x, w)

    chapter_rs = lifted(space["reducescatter_local"], (P("X", "Y"), P("Y", None)), P("X", "Y"))
    chapter_ar = lifted(space["allreduce_both_ways_local"], (P("X", "Y"), P("Y", None)), P("X", None),
                        check_vma=False)
    chapter_psum = lifted(lambda a, w: jax.lax.psum(a @ w, "Y"), (P("X", "Y"), P("Y", None)), P("X", None))

    out = {}
    for name, eid, f in [("right", "10.1", means), ("psum", "10.1", means_by_psum),
                         ("whole mean", "10.1", means_of_everything), ("stub", "10.1", stub),
                         ("callback", "10.1", means_by_callback), ("frames", "10.1", means_from_frames),
                         ("debug print", "10.1", means_printing),
                         ("raises", "10.1", raises), ("roll whole", "10.2", roll_whole),
                         ("psum_scatter", "10.7", reduce_scatter_by_psum_scatter),
                         ("chapter 10.6", "10.6", chapter_ar), ("chapter psum 10.6", "10.6", chapter_psum),
                         ("chapter 10.7", "10.7", chapter_rs), ("chapter 10.8", "10.8", chapter_rs)]:
        v = sl.verdict(eid, f)
        out[name] = [v.status, v.message]
    a, b = sl.sharded_inputs(["A[S_X, D_Y]", "B[S_X]"], {"S": 16, "D": 8, "E": 3}, {"X": 2, "Y": 4}, seed=3,
                             integers={"B": "E"})
    va, vb = sl.input_values(["A[S_X, D_Y]", "B[S_X]"], {"S": 16, "D": 8, "E": 3}, {"X": 2, "Y": 4}, seed=3,
                             integers={"B": "E"})
    out["inputs"] = [list(a.sharding.spec), list(b.sharding.spec), bool(np.array_equal(np.asarray(a), va)),
                     bool(np.array_equal(np.asarray(b), vb)), str(b.dtype)]
    out["time"] = sl.measure_jax_time_s(jnp.sin, a, repeats=2)
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def on_8_devices():
    script = SCRIPT.replace("CHAPTER_10", repr(CHAPTER_10))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_host_callback_or_a_constant_found_while_tracing_earns_nothing(on_8_devices):
    status, message = on_8_devices["callback"]
    assert status == "incorrect" and "calls back into Python on the host (xla_ffi_python_cpu_callback)" in message
    status, message = on_8_devices["frames"]
    assert status == "incorrect" and message.startswith("❌ Exercise 10.1: not quite"), message


def test_a_right_function_is_correct(on_8_devices):
    status, message = on_8_devices["right"]
    assert status == "correct" and "matches the unsharded result on all 2 cases" in message
    assert "its compiled program has no collectives" in message
    status, message = on_8_devices["debug print"]
    assert status == "correct", message  # a host callback that returns nothing to the program is allowed


def test_right_values_through_a_forbidden_collective_fail_on_the_collective(on_8_devices):
    status, message = on_8_devices["psum"]
    assert status == "incorrect" and message.startswith("❌ Exercise 10.1: the values are right on mesh X=2, Y=4")
    assert "your compiled program has an all-reduce over Y (4 B per device); this exercise asks for no " \
           "communication." in message
    status, message = on_8_devices["psum_scatter"]
    assert status == "incorrect" and "a reduce-scatter over X" in message and "asks for no reduce-scatter" in message


def test_chapter_10_s_own_collective_matmuls_copied_earn_nothing(on_8_devices):
    # 10.6 to 10.8 contract over X; the chapter's cells contract over Y: lifted unchanged they are refused
    for name in ("chapter 10.6", "chapter psum 10.6", "chapter 10.7", "chapter 10.8"):
        status, message = on_8_devices[name]
        assert status == "incorrect", (name, message)


def test_wrong_values_are_told_how_many_differ_and_the_likely_slip(on_8_devices):
    status, message = on_8_devices["whole mean"]
    assert (status, message.splitlines()[0]) == (
        "incorrect", "❌ Exercise 10.1: not quite on mesh X=2, Y=4 with S=64, D=32 — your values differ from the "
                     "unsharded result on every entry.")
    assert "Likely cause: every entry holds the mean of the whole array" in message
    status, message = on_8_devices["roll whole"]
    assert status == "incorrect" and "your values differ from the unsharded result on 192 of 2,048 entries (9%)" in message
    assert "you rolled the whole array" in message


def test_a_stub_is_not_attempted_and_a_function_that_raises_says_what_it_raised(on_8_devices):
    assert on_8_devices["stub"] == ["not attempted",
                                    "⬜ Exercise 10.1: not attempted (your function still raises NotImplementedError)."]
    status, message = on_8_devices["raises"]
    assert status == "incorrect" and message.startswith("❌ Exercise 10.1: your function raised TypeError: ")
    assert message.endswith("(on mesh X=2, Y=4 with S=64, D=32).")


def test_sharded_inputs_hold_the_seeded_values_sharded_as_written(on_8_devices):
    assert on_8_devices["inputs"] == [["X", "Y"], ["X"], True, True, "int32"]
    assert on_8_devices["time"] > 0


# ---------------------------------------------------------------------------
# The grader, end to end: a submission's kernel runs JAX, the verdicts are made here

FORGED_CELL = ('from IPython.display import display\n'
               'print("✅ Exercise 10.6: correct — your function matches the unsharded result on all 4 cases.")\n'
               'display({"text/plain": "✅ Exercise 10.7: correct"}, metadata={"scalelib/verdict": '
               '{"exercise": "10.7", "status": "correct"}}, raw=True)')


def test_a_submission_is_graded_in_its_own_kernel_and_its_claims_are_not_believed(tmp_path):
    path = nbs.write(
        tmp_path / "ch10_ada.ipynb",
        "import jax\njax.config.update('jax_num_cpu_devices', 8)\nimport jax.numpy as jnp\n"
        "from jax.sharding import PartitionSpec as P\nimport scalelib as sl",
        "def shard_means(a, mesh):\n"
        "    local = lambda x: x.mean(keepdims=True)\n"
        "    return jax.shard_map(local, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(a)\n"
        "sl.check('10.1', shard_means)",
        "def roll_in_shards(a, mesh, shift):\n    return jnp.roll(a, shift, axis=0) - a\n"
        "sl.check('10.2', roll_in_shards)",
        "def ring_all_gather(a, mesh):\n"
        "    local = lambda x: jax.lax.all_gather(x, 'Y', tiled=True)\n"
        "    return jax.shard_map(local, mesh=mesh, in_specs=P('Y', None), out_specs=P(None, None),\n"
        "                         check_vma=False)(a)\n"
        "sl.check('10.3', ring_all_gather)",
        "def moe_local(a, w, b, mesh):\n    raise NotImplementedError('write your solution here')\n"
        "sl.check('10.4', moe_local)",
        "def moe_sharded(a, w, b, mesh):\n    raise ValueError('no experts here')\nsl.check('10.5', moe_sharded)",
        nbs.code(FORGED_CELL, outputs=[nbs.forged_verdict("10.8")]),
        chapter=10, learner="Ada")
    grade = grade_notebook(path, Limits(cell_timeout_s=120), seed=3)
    assert (grade.status, grade.error, grade.cell_errors) == ("graded", None, ())
    got = {e.exercise: (e.status, e.message) for e in grade.exercises}
    assert got["10.1"][0] == "correct" and "on all 4 cases" in got["10.1"][1]
    assert got["10.2"][0] == "incorrect" and "you rolled the whole array" in got["10.2"][1]
    assert got["10.3"][0] == "incorrect" and "an all-gather over Y" in got["10.3"][1]
    assert got["10.4"][0] == "not attempted"
    assert got["10.5"][0] == "incorrect" and "your function raised ValueError: no experts here" in got["10.5"][1]
    assert {e: got[e][0] for e in ("10.6", "10.7", "10.8", "10.9")} == dict.fromkeys(
        ("10.6", "10.7", "10.8", "10.9"), "missing")
    assert grade.points == get_exercise("10.1").points
    assert any("writes verdict metadata" in flag for flag in grade.flags)  # the instructor sees the attempt

"""The learner's side of a grading run: answers recorded for the grader, never judged here.

In the kernels ``scalelib grade`` starts (environment variable
:data:`~scalelib.course.check.GRADING_ENV` set to "1"), :func:`scalelib.check` calls
:func:`record`, which displays the answer, decoded into plain JSON, under
:data:`ANSWER_MIME`; the grader reads it back from the cell's output and judges it in
its own process. Nothing here needs (or can reach) the answer key, and nothing here
says whether an answer is right.

What a recorded answer looks like (``{"exercise": "1.3", "kind": ..., ...}``):

* ``"none"``: ``None`` or ``...`` (not attempted);
* ``"number"``: ``{"value": "0.25"}``; numbers travel as ``repr(float(x))``, so that
  ``nan`` and ``inf`` survive JSON;
* ``"numbers"``: a list, tuple or array (nested lists only if rectangular):
  ``{"shape": [2], "values": ["1.0", "2.0"]}``, at most :data:`MAX_VALUES` values;
* ``"text"``: a string (a multiple-choice answer), at most :data:`MAX_TEXT` characters;
* ``"function"``: the function stays in this kernel; the grader then runs
  :func:`call_recorded`, which calls it on the cases the grader sends and displays,
  under :data:`CALLS_MIME`, one result per case (for a ``kind="jax"`` exercise,
  :func:`call_recorded_jax`, which compiles it under ``jax.jit`` on a simulated mesh,
  runs it and sends back its output and compiled HLO: :func:`compile_jax_case`; then
  :func:`call_recorded_jax_second` runs the compiled programs on a second draw of
  inputs, whose seeds the grader sends only then);
* ``"unreadable"``: anything else, with its type name, a short ``repr`` and the error
  met while reading it (an answer whose ``__float__`` raises, a ragged list, ...).

Neither :func:`record` nor :func:`call_recorded` ever raises because of an answer.
"""

from __future__ import annotations

import json
import signal
import threading
from typing import Any

from .verdict import MAX_VALUES, decode_number  # noqa: F401 - decode_number: encode_number's inverse, re-exported

#: MIME type of a recorded answer in a cell's output.
ANSWER_MIME = "application/vnd.scalelib.answer+json"
#: MIME type of the results of :func:`call_recorded`.
CALLS_MIME = "application/vnd.scalelib.calls+json"
#: Most characters of a text answer that are recorded.
MAX_TEXT = 1_000
#: Most characters of an exercise id, a type name, a repr or an error message that are recorded.
MAX_NOTE = 300
#: Answer kinds a record can carry.
KINDS = ("none", "number", "numbers", "text", "function", "unreadable")

#: exercise id -> the function last recorded for it in this kernel.
_FUNCTIONS: dict[str, Any] = {}


def _short(text: object, limit: int = MAX_NOTE) -> str:
    text = str(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _safe_repr(value) -> str:
    try:
        return _short(repr(value))
    except Exception as err:  # noqa: BLE001 - a learner's __repr__ may raise
        return f"<{type(value).__name__} whose repr raised {type(err).__name__}>"


def encode_number(x: float) -> str:
    """`x` as text that :func:`decode_number` reads back exactly (``nan`` and ``inf`` included)."""
    return repr(float(x))


def describe(answer) -> dict:
    """`answer` decoded into a JSON-ready dict with a ``kind`` (see the module's docstring); never raises."""
    try:
        return _describe(answer)
    except Exception as err:  # noqa: BLE001 - whatever the answer does, it is recorded as unreadable
        return _unreadable(answer, err)


def _unreadable(answer, err) -> dict:
    return {"kind": "unreadable", "type": _short(type(answer).__name__, 80), "repr": _safe_repr(answer),
            "error": _short(f"{type(err).__name__}: {err}")}


def _describe(answer) -> dict:
    import numpy as np

    from .._derivation import Derivation

    if answer is None or answer is Ellipsis:
        return {"kind": "none"}
    if isinstance(answer, Derivation):  # sl.explain(...) as an answer: its number
        answer = answer.value
    if isinstance(answer, str):
        return {"kind": "text", "value": answer[:MAX_TEXT]}
    if isinstance(answer, (bytes, bytearray, bool, np.bool_, complex, np.complexfloating, dict, set, frozenset)):
        return _unreadable(answer, TypeError(f"a {type(answer).__name__} is not a number, a list of numbers or a text"))
    if callable(answer) and not isinstance(answer, np.ndarray):
        return {"kind": "function", "name": _short(getattr(answer, "__name__", type(answer).__name__), 80)}
    if hasattr(answer, "__array__") and not isinstance(answer, (np.ndarray, np.generic)):
        answer = np.asarray(answer)  # a pandas Series, a jax array, ...
    if isinstance(answer, (list, tuple, np.ndarray)):
        return _describe_numbers(answer)
    value = float(answer)  # int, float, numpy scalars, anything with __float__
    return {"kind": "number", "value": encode_number(value)}


def _describe_numbers(answer) -> dict:
    import numpy as np

    def leaves(x, depth=0):
        if depth > 32:
            raise ValueError("nested too deeply")
        if isinstance(x, (list, tuple)):
            for item in x:
                yield from leaves(item, depth + 1)
        else:
            yield x

    if isinstance(answer, np.ndarray) and answer.dtype.kind == "O" and answer.size <= MAX_VALUES:
        answer = answer.tolist()  # an array of objects (Derivations, say): read as a list
    if isinstance(answer, np.ndarray):
        if answer.dtype.kind not in "iuf":
            raise TypeError(f"an array of dtype {answer.dtype} is not an array of numbers")
        array = answer
    else:
        for count, leaf in enumerate(leaves(answer)):
            if count >= MAX_VALUES:
                raise ValueError(f"too many values (more than {MAX_VALUES})")
            if isinstance(leaf, (str, bytes, bool, np.bool_)):
                raise TypeError(f"a list holding a {type(leaf).__name__} ({_safe_repr(leaf)}) is not a list of numbers")
            if isinstance(leaf, np.ndarray) and leaf.size > MAX_VALUES:
                raise ValueError(f"too many values (more than {MAX_VALUES})")
        array = np.asarray(answer, dtype=float)  # a ragged list raises here
    if array.size > MAX_VALUES:
        raise ValueError(f"too many values ({array.size}; at most {MAX_VALUES} are read)")
    array = np.asarray(array, dtype=float)
    if array.ndim == 0:
        return {"kind": "number", "value": encode_number(array)}
    return {"kind": "numbers", "shape": [int(n) for n in array.shape],
            "values": [encode_number(v) for v in array.ravel().tolist()]}


def record(exercise_id, answer) -> None:
    """Display `answer` to `exercise_id` under :data:`ANSWER_MIME`, for the grader; never raises.

    A function answer is kept in this kernel for :func:`call_recorded`.
    """
    try:
        payload = describe(answer)
        if isinstance(exercise_id, str):
            payload["exercise"] = _short(exercise_id.strip(), 50)
        else:  # check(1.1, ...): the grader reports it and ignores it
            payload["exercise"] = None
            payload["exercise_repr"] = _safe_repr(exercise_id)
        from .capstone_core import current

        brief = current()
        if brief is not None:  # chapter 11: whose brief the answers were worked for (the grader cross-checks it)
            payload["brief"] = _short(brief.learner, 100)
        if payload["kind"] == "function" and payload["exercise"] is not None:
            _FUNCTIONS[payload["exercise"]] = answer
        from IPython.display import display

        display({"text/plain": f"answer to {payload['exercise'] or payload.get('exercise_repr')} recorded for grading",
                 ANSWER_MIME: payload}, raw=True)
    except Exception:  # noqa: BLE001 - nothing a learner passes may stop the notebook
        pass


# ---------------------------------------------------------------------------
# Cases: keyword arguments sent from the grader to call_recorded, as JSON.

def encode_value(value):
    """A case's argument as JSON: tuples, floats (``nan``, ``inf``) and ints kept apart."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return {"int": str(value)}
    if isinstance(value, float):
        return {"float": encode_number(value)}
    if isinstance(value, tuple):
        return {"tuple": [encode_value(v) for v in value]}
    if isinstance(value, list):
        return [encode_value(v) for v in value]
    if isinstance(value, dict):
        return {"dict": {str(k): encode_value(v) for k, v in value.items()}}
    raise TypeError(f"a case's argument of type {type(value).__name__} cannot be sent to the kernel")


def decode_value(data):
    """The value :func:`encode_value` encoded."""
    if isinstance(data, list):
        return [decode_value(v) for v in data]
    if isinstance(data, dict):
        (kind, inner), = data.items()
        if kind == "int":
            return int(inner)
        if kind == "float":
            return decode_number(inner)
        if kind == "tuple":
            return tuple(decode_value(v) for v in inner)
        if kind == "dict":
            return {k: decode_value(v) for k, v in inner.items()}
        raise ValueError(f"unknown encoded value {kind!r}")
    return data


def encode_cases(cases) -> str:
    """`cases` (a list of keyword-argument dicts) as the JSON text :func:`call_recorded` takes."""
    return json.dumps([{k: encode_value(v) for k, v in case.items()} for case in cases])


def case_key(case) -> str:
    """A canonical text for one case, to match a call with its result."""
    return json.dumps({k: encode_value(v) for k, v in case.items()}, sort_keys=True)


class _CallTimeout(BaseException):  # not an Exception: a learner's `except Exception` does not swallow it
    pass


def _safe_text(err) -> str:
    """str(`err`) on one line, cut short; never raises (a learner's exception may have a broken __str__)."""
    try:
        text = " ".join(str(err).split())
    except Exception:  # noqa: BLE001
        text = f"<{type(err).__name__} whose message could not be read>"
    return _short(text)


def _timed(thunk, time_limit_s: float):
    """("ok", what `thunk()` returned), or ("failed", a result dict): a timeout, NotImplementedError or an error."""
    alarm = (hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
             and time_limit_s > 0)
    if alarm:
        def on_alarm(signum, frame):
            raise _CallTimeout()

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, time_limit_s)
    try:
        try:
            return "ok", thunk()
        finally:
            if alarm:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
    except _CallTimeout:
        return "failed", {"result": "timeout", "limit_s": time_limit_s}
    except NotImplementedError:
        return "failed", {"result": "not implemented"}
    except Exception as err:  # noqa: BLE001 - a learner's bug is a result, not a crash
        return "failed", {"result": "error", "type": _short(type(err).__name__, 80), "message": _safe_text(err)}


def _call(function, case: dict, time_limit_s: float) -> dict:
    status, value = _timed(lambda: function(**case), time_limit_s)
    if status == "failed":
        return value
    if value is None:
        return {"result": "none"}
    return {"result": "value", "answer": describe(value)}


def call_recorded(exercise_id: str, cases_json: str, time_limit_s: float = 5.0) -> None:
    """Call the function last recorded for `exercise_id` on each case of `cases_json`; display the results.

    The grader runs this in the kernel right after the cell that recorded the
    function. Each call runs under `time_limit_s` seconds. Results, one per case
    and in order, go under :data:`CALLS_MIME`: ``{"result": "value", "answer":
    <as describe() gives>}``, ``{"result": "none"}`` (returned None), ``"not
    implemented"``, ``"error"`` (with its type and message) or ``"timeout"``.
    """
    from IPython.display import display

    function = _FUNCTIONS.get(exercise_id)
    results = []
    try:
        cases = [{k: decode_value(v) for k, v in case.items()} for case in json.loads(cases_json)]
        if function is None:
            results = [{"result": "error", "type": "LookupError", "message": "no function was recorded"}] * len(cases)
        else:
            results = [_call(function, case, time_limit_s) for case in cases]
    except Exception as err:  # noqa: BLE001
        results = [{"result": "error", "type": type(err).__name__, "message": _short(err)}]
    display({"text/plain": f"{len(results)} calls of the function answering {exercise_id}",
             CALLS_MIME: {"exercise": exercise_id, "results": results}}, raw=True)


# ---------------------------------------------------------------------------
# kind="jax": the learner's JAX function run on a mesh, its output and compiled HLO sent back


#: Most characters of compiled HLO a result carries; a longer text keeps only its collectives' lines.
MAX_HLO = 2_000_000


def _hlo_for_grader(text: str) -> str:
    if len(text) <= MAX_HLO:
        return text
    from .._jax_bridge import KINDS

    lines = [line for line in text.splitlines()
             if line.startswith("HloModule") or "callback" in line or any(k in line for k in KINDS)]
    return "\n".join(lines)[:MAX_HLO]


#: exercise id -> per case, the compiled program and its input draw, kept from :func:`call_recorded_jax` for
#: :func:`call_recorded_jax_second` (None where the first run did not give a value).
_COMPILED: dict[str, list] = {}


def second_seed(case: dict) -> int:
    """The seed of a learner's own check's second draw of inputs: follows from the case's seed, so that the same
    check gives the same verdict. (The grader's comes from the operating system's randomness instead, and is
    sent to the kernel only after the function is compiled: :func:`call_recorded_jax_second`.)"""
    return 10**6 + (int(case["seed"]) * 7919 + 104_729) % 10**9


def compile_jax_case(function, case: dict, time_limit_s: float = 0.0) -> tuple[dict, tuple | None]:
    """Compile a learner's JAX `function` for one case of a ``kind="jax"`` exercise and run it on the case's
    inputs: (the result as JSON, the program kept for a second draw or None). Never raises.

    The case (see :mod:`scalelib.course.jax_check`) gives a mesh, the arrays in the
    book's notation, their sizes and a seed: the inputs are drawn from the seed and
    sharded on a simulated mesh (:func:`scalelib.sharded_inputs`), then
    ``jax.jit(function)`` is compiled and run on them, called as
    ``function(*arrays, mesh=mesh, **kwargs)``. It is traced and compiled from the
    inputs' shapes alone: no input value exists anywhere while it is traced, so
    nothing it finds (in a caller's frame, say) can stand in for the computation, and
    no second draw's seed exists yet. The result: ``{"result": "value", "answer":
    <the output, as describe() gives it>, "hlo": <the compiled HLO text>,
    "replicated": <whether the output is whole on every device>}``, or ``"none"``,
    ``"not implemented"``, ``"error"`` (type, message), ``"timeout"`` or
    ``"unavailable"`` (the mesh or the inputs could not be made here: too few
    devices, no JAX). Nothing here judges anything.
    """
    try:
        import functools

        import jax

        from .._jax_bridge import simulated_mesh
        from .._jax_collectives import sharded_inputs

        mesh = simulated_mesh(dict(case["mesh"]))

        def draw(seed):
            return sharded_inputs(list(case["arrays"]), dict(case["sizes"]), mesh, seed=seed,
                                  integers=case.get("integers"))

        shapes = [jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding) for x in draw(case["seed"])]
        bound = functools.partial(function, mesh=mesh, **dict(case.get("kwargs") or {}))
    except Exception as err:  # noqa: BLE001 - no JAX, too few devices, a malformed case
        return {"result": "unavailable", "message": f"{type(err).__name__}: {_safe_text(err)}"}, None

    def attempt():
        compiled = jax.jit(bound).lower(*shapes).compile()
        output = compiled(*draw(case["seed"]))
        jax.block_until_ready(output)
        return compiled, output

    status, value = _timed(attempt, time_limit_s)
    if status == "failed":
        return value, None
    compiled, output = value
    if output is None:
        return {"result": "none"}, None
    replicated = None
    if isinstance(output, jax.Array):
        replicated = bool(output.sharding.is_fully_replicated)
        answer = describe(output)
    elif isinstance(output, (tuple, list, dict)):
        answer = _unreadable(output, TypeError(f"a {type(output).__name__} of {len(output)} items; return one array"))
    else:
        answer = describe(output)
    return ({"result": "value", "answer": answer, "hlo": _hlo_for_grader(compiled.as_text()), "replicated": replicated},
            (compiled, draw))


def run_second_draw(program: tuple, seed2: int, time_limit_s: float = 0.0) -> dict:
    """Run a program :func:`compile_jax_case` kept on the inputs drawn from `seed2`: ``{"result": "value",
    "answer": <its output>}``, or what stopped it (``"timeout"``, ``"error"``, ...). Never raises.

    One compiled program answers both draws, so an output baked into it as a constant is
    right for one draw at most."""
    compiled, draw = program

    def attempt():
        output = compiled(*draw(int(seed2)))
        import jax

        jax.block_until_ready(output)
        return output

    status, value = _timed(attempt, time_limit_s)
    if status == "failed":
        return value
    if isinstance(value, (tuple, list, dict)):
        return {"result": "value", "answer": _unreadable(value, TypeError(f"a {type(value).__name__}; return one array"))}
    return {"result": "value", "answer": describe(value)}


def run_jax_case(function, case: dict, time_limit_s: float = 0.0, seed2: int | None = None) -> dict:
    """:func:`compile_jax_case`, then :func:`run_second_draw` on the draw of `seed2` (by default
    :func:`second_seed`), in one go: the result with ``"seed2"`` and ``"answer2"`` (the output on the second draw)
    added. For a learner's own check; the grader runs the two steps apart. Never raises."""
    result, program = compile_jax_case(function, case, time_limit_s)
    if program is None:
        return result
    seed2 = second_seed(case) if seed2 is None else int(seed2)
    second = run_second_draw(program, seed2, time_limit_s)
    if second.get("result") != "value":
        return second
    return {**result, "seed2": seed2, "answer2": second["answer"]}


def call_recorded_jax(exercise_id: str, cases_json: str, time_limit_s: float = 30.0) -> None:
    """Compile and run the JAX function last recorded for `exercise_id` on each case of `cases_json`; display the
    results.

    The grader's counterpart of :func:`call_recorded` for ``kind="jax"`` exercises:
    one :func:`compile_jax_case` result per case, in order, under :data:`CALLS_MIME`.
    The compiled programs are kept for :func:`call_recorded_jax_second`.
    """
    from IPython.display import display

    function = _FUNCTIONS.get(exercise_id)
    results = []
    _COMPILED.pop(exercise_id, None)
    try:
        cases = [{k: decode_value(v) for k, v in case.items()} for case in json.loads(cases_json)]
        if function is None:
            results = [{"result": "error", "type": "LookupError", "message": "no function was recorded"}] * len(cases)
        else:
            programs = []
            for case in cases:
                result, program = compile_jax_case(function, case, time_limit_s)
                results.append(result)
                programs.append(program)
            _COMPILED[exercise_id] = programs
    except Exception as err:  # noqa: BLE001
        results = [{"result": "error", "type": type(err).__name__, "message": _safe_text(err)}]
    display({"text/plain": f"{len(results)} runs of the JAX function answering {exercise_id}",
             CALLS_MIME: {"exercise": exercise_id, "results": results}}, raw=True)


def call_recorded_jax_second(exercise_id: str, seeds_json: str, time_limit_s: float = 30.0) -> None:
    """Run the programs :func:`call_recorded_jax` compiled for `exercise_id` on a second draw of inputs each, from
    the seeds of `seeds_json` (one per case, sent by the grader only now); display the results
    (:func:`run_second_draw`'s, one per case, ``{"result": "skipped"}`` where the first run gave no value)."""
    from IPython.display import display

    programs = _COMPILED.pop(exercise_id, None) or []
    results = []
    try:
        seeds = json.loads(seeds_json)
        for i, seed2 in enumerate(seeds):
            program = programs[i] if i < len(programs) else None
            results.append({"result": "skipped"} if program is None or isinstance(seed2, bool)
                           or not isinstance(seed2, int) else run_second_draw(program, seed2, time_limit_s))
    except Exception as err:  # noqa: BLE001
        results = [{"result": "error", "type": type(err).__name__, "message": _safe_text(err)}]
    display({"text/plain": f"{len(results)} second draws of the JAX function answering {exercise_id}",
             CALLS_MIME: {"exercise": exercise_id, "results": results}}, raw=True)

"""Exercises in which the learner writes JAX code (``kind="jax"``): judged on numerics and on compiled collectives.

A ``kind="jax"`` exercise registers (see :class:`~scalelib.course.check.Exercise`):

* ``cases``: each a JSON-able description of one run, ``{"mesh": {"X": 2, "Y": 4},
  "sizes": {"S": 64, "D": 32}, "arrays": ["A[S_X, D_Y]"], "seed": 1}``, with
  optionally ``"integers": {"B": "E"}`` (an array of int32 routing choices from 0
  to E - 1) and ``"kwargs": {"shift": 3}`` (static arguments). The input values
  are drawn by NumPy from the seed (:func:`scalelib._jax_collectives.input_values`),
  the same in the learner's kernel and in the grader's process;
* ``reference``: returns a NumPy function of the whole (unsharded) inputs, called
  as ``f(*arrays, mesh={"X": 2, "Y": 4}, **kwargs)``, whose result the learner's
  must match (the grader's process needs no JAX devices);
* ``rule``: a :class:`CollectiveRule`, what the compiled program may and must
  communicate, with the teaching text shown when it does not.

The learner's function is called as ``fn(*arrays, mesh=mesh, **kwargs)`` under
``jax.jit`` on a mesh of simulated devices, the arrays sharded as the case writes
them; :func:`scalelib.course.record.compile_jax_case` runs it (in the learner's kernel,
with no answer key) and returns its output and the HLO XLA compiled for it.
:func:`judge_results` then decides, here: the output's shape, its values
(``allclose`` with the exercise's ``rtol``, relative to the result's scale), then
the collectives read from the HLO against the rule. Feedback says what is wrong
(how many entries differ, which collective the program should not have) and never
the answer.
"""

from __future__ import annotations

import copy
import math
import random
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from .._errors import InvalidValueError
from .._jax_bridge import KINDS, _arrays, parse_collectives
from .._jax_collectives import input_values
from .._units import fmt
from .i18n import N_, _, translate
from .verdict import CORRECT, INCORRECT, NOT_ATTEMPTED, Malformed, Verdict, cut as _cut, decode

#: What a call of the learner's function in the kernel can come to.
RESULTS = ("value", "none", "not implemented", "error", "timeout", "unavailable")
#: Keys a case may have.
CASE_KEYS = {"mesh", "sizes", "arrays", "seed", "integers", "kwargs"}


@dataclass(frozen=True)
class CollectiveRule:
    """What the program XLA compiles for a ``kind="jax"`` exercise may and must communicate.

    Attributes:
        forbid: collective kinds, as HLO names them (``"all-gather"``, ``"all-reduce"``,
            ``"reduce-scatter"``, ``"all-to-all"``, ``"collective-permute"``), that must
            not appear; ``"any"`` for all of them.
        require: kinds that must appear at least once.
        over: if given, `forbid` applies only to collectives over one of these mesh axes.
        max_bytes: kind -> the most bytes per device one collective of that kind may
            move (a number, or a function ``f(sizes, mesh)`` of the case's dicts).
        max_values: the most values any array of the compiled (per-device) program
            may hold: a number or ``f(sizes, mesh)``.
        both_ways: collective-permutes must send both ways round a ring (some one
            step forward along an axis, some one step back).
        replicated: the result must be whole on every device.
        why: the teaching text shown when the compiled program breaks the rule.
    """

    forbid: tuple[str, ...] = ()
    require: tuple[str, ...] = ()
    over: tuple[str, ...] | None = None
    max_bytes: Mapping[str, Any] = field(default_factory=dict)
    max_values: Any = None
    both_ways: bool = False
    replicated: bool = False
    why: str = ""

    def __post_init__(self):
        for arg in ("forbid", "require"):
            kinds = getattr(self, arg)
            if isinstance(kinds, str) or not all(k in KINDS or (k == "any" and arg == "forbid") for k in kinds):
                raise InvalidValueError(f"CollectiveRule: `{arg}` must be a tuple of {', '.join(KINDS)}"
                                        f"{' or any' if arg == 'forbid' else ''}, got {kinds!r}")
        if not all(k in KINDS for k in self.max_bytes):
            raise InvalidValueError(f"CollectiveRule: `max_bytes` keys must be kinds of collective, got "
                                    f"{list(self.max_bytes)!r}")

    def forbidden(self) -> tuple[str, ...]:
        return KINDS if "any" in self.forbid else tuple(self.forbid)


# ---------------------------------------------------------------------------
# Cases


def check_case(case, where: str = "case") -> None:
    """Raise InvalidValueError unless `case` describes a run (its arrays read against its mesh, sizes that divide)."""
    if not isinstance(case, Mapping) or not {"mesh", "sizes", "arrays", "seed"} <= set(case) \
            or not set(case) <= CASE_KEYS:
        raise InvalidValueError(f"{where} must be a dict with mesh, sizes, arrays and seed (and optionally "
                                f"integers and kwargs), got {case!r}")
    input_values(case["arrays"], case["sizes"], case["mesh"], seed=case["seed"], integers=case.get("integers"))
    if not isinstance(case.get("kwargs", {}), Mapping) or "mesh" in case.get("kwargs", {}):
        raise InvalidValueError(f"{where}: `kwargs` must be a dict of static arguments other than mesh")


def label(case) -> str:
    """``on mesh X=2, Y=4 with S=64, D=32, shift=3``: a case as the feedback names it (the seed left out)."""
    mesh = ", ".join(f"{a}={n}" for a, n in case["mesh"].items())
    values = [f"{d}={n}" for d, n in case["sizes"].items()] + [f"{k}={v!r}" for k, v in
                                                               (case.get("kwargs") or {}).items()]
    return _("on mesh {mesh} with {values}").format(mesh=mesh, values=", ".join(values))


def draw_cases(cases, rng: random.Random) -> list[dict]:
    """One new case per registered one: a fresh seed, and each size kept or doubled at random.

    Doubling keeps every split even; a drawn case that still breaks a rule of its
    own (a bound on its integers, say) is drawn again, and the registered case is
    reused with only a new seed after 20 tries.
    """
    drawn = []
    for base in cases:
        for attempt in range(21):
            case = copy.deepcopy(dict(base))
            case["seed"] = rng.randrange(10**6, 10**9)
            if attempt < 20:
                case["sizes"] = {d: n * rng.choice((1, 2)) for d, n in base["sizes"].items()}
            try:
                check_case(case)
            except InvalidValueError:
                continue
            drawn.append(case)
            break
    return drawn


# ---------------------------------------------------------------------------
# Judging one case


def _collective_text(c) -> str:
    over = _("no axis") if c.axes == () else "".join(c.axes) if c.axes else _("devices that form no mesh axis")
    template = (_("an {kind} over {over} ({bytes} per device)") if c.kind[0] in "a" else
                _("a {kind} over {over} ({bytes} per device)"))
    return template.format(kind=c.kind, over=over, bytes=fmt(c.nbytes, "B"))


def _limit(value, case) -> float:
    return float(value(dict(case["sizes"]), dict(case["mesh"])) if callable(value) else value)


def _directions(collective, mesh: dict) -> set[tuple[str, int]]:
    """(axis, +1 or -1) for each one-step move of a collective-permute's (source, target) pairs."""
    sizes = list(mesh.values())
    out = set()
    for pair in collective.groups:
        if len(pair) != 2:
            continue
        try:
            source, target = np.unravel_index(pair[0], sizes), np.unravel_index(pair[1], sizes)
        except ValueError:
            continue
        for axis, n, s, t in zip(mesh, sizes, source, target):
            step = (int(t) - int(s)) % n
            if step == 1:
                out.add((axis, +1))
            if step == n - 1:
                out.add((axis, -1))
    return out


def rule_problem(rule: CollectiveRule | None, case, hlo: str, replicated) -> str | None:
    """What the compiled program does against `rule` (None when it keeps to it)."""
    if rule is None:
        return None
    found = parse_collectives(hlo, mesh=case["mesh"])
    why = f" {translate(rule.why)}" if rule.why else ""
    for c in found:
        if c.kind in rule.forbidden() and (rule.over is None or (c.axes and set(c.axes) & set(rule.over))):
            if rule.over is None:
                asked = _("no communication") if "any" in rule.forbid else _("no {kind}").format(kind=c.kind)
            else:
                asked = (_("no communication over {axes}") if "any" in rule.forbid else
                         _("no {kind} over {axes}")).format(kind=c.kind, axes=" or ".join(rule.over))
            return _("your compiled program has {collective}; this exercise asks for {asked}.").format(
                collective=_collective_text(c), asked=asked) + why
    for kind in rule.require:
        if not any(c.kind == kind for c in found):
            has = ", ".join(sorted({c.kind for c in found})) or _("no collective at all")
            return _("your compiled program has no {kind} (it has {has}); this exercise asks for one.").format(
                kind=kind, has=has) + why
    for kind, limit in rule.max_bytes.items():
        most = _limit(limit, case)
        for c in found:
            if c.kind == kind and c.nbytes > most * (1 + 1e-9):
                return _("your compiled program has {collective}, more than this exercise lets one {kind} move "
                         "({limit}).").format(collective=_collective_text(c), kind=kind, limit=fmt(most, "B")) + why
    if rule.max_values is not None:
        most = _limit(rule.max_values, case)
        arrays = [(dt, dims) for dt, dims in _arrays(hlo)]
        if arrays:
            dt, dims = max(arrays, key=lambda a: math.prod(a[1]))
            if math.prod(dims) > most:
                return _("your compiled program builds an array {array} of {count} values on a device, more than "
                         "this exercise allows ({limit}).").format(array=f"{dt}[{','.join(map(str, dims))}]",
                                                                  count=f"{math.prod(dims):,}",
                                                                  limit=f"{int(most):,}") + why
    if rule.both_ways:
        permutes = [c for c in found if c.kind == "collective-permute"]
        moves = set().union(*(_directions(c, case["mesh"]) for c in permutes)) if permutes else set()
        if not any((axis, +1) in moves and (axis, -1) in moves for axis, _step in moves):
            return _("your compiled program sends its blocks one way round the ring only.") + why
    if rule.replicated and replicated is False:
        return _("your function's result is split over the devices; this exercise asks for it whole on every "
                 "device.") + why
    return None


def _summary(case, hlo: str) -> str:
    found = parse_collectives(hlo, mesh=case["mesh"])
    if not found:
        return _("has no collectives")
    kinds = sorted({(c.kind, "".join(c.axes) if c.axes else "?") for c in found})
    return _("communicates by {collectives}").format(
        collectives=", ".join(_("{kind} over {axes}").format(kind=k, axes=a) for k, a in kinds))


def _entries(n_bad: int, n: int) -> str:
    if n_bad == n:
        return _("every entry") if n > 1 else _("its one entry")
    share = n_bad / n
    if share >= 0.01:
        return _("{bad} of {count} entries ({share})").format(bad=f"{n_bad:,}", count=f"{n:,}", share=f"{share:.0%}")
    return _("{bad} of {count} entries").format(bad=f"{n_bad:,}", count=f"{n:,}")


def _close(got: np.ndarray, want: np.ndarray, rtol: float) -> np.ndarray:
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    atol = rtol * (scale if scale > 0 else 1.0)
    return np.isfinite(got) & (np.abs(got - want) <= atol + rtol * np.abs(want))


def value_problem(exercise, got, want, apply=None) -> tuple[str | None, str | None]:
    """(what is wrong with the learner's values, the likely cause) or (None, None) when they match.

    `apply` calls a NumPy function on the case's inputs (for the exercise's ``wrong`` methods).
    """
    want = np.asarray(want, dtype=float)
    got = np.asarray(got, dtype=float)
    if got.shape != want.shape:
        return (_("your function returned an array of shape {shape}, and the unsharded result has shape "
                  "{expected}").format(shape=tuple(got.shape), expected=tuple(want.shape)), None)
    ok = _close(got, want, exercise.rtol)
    if np.all(ok):
        return None, None
    text = _("your values differ from the unsharded result on {entries}").format(
        entries=_entries(int(np.sum(~ok)), ok.size))
    if not np.all(np.isfinite(got)):
        return _("{problem} (some are NaN or infinite)").format(problem=text), None
    if np.all(_close(got, -want, exercise.rtol)):
        return text, N_("every value has the wrong sign")
    for ratio, why in exercise.mistakes.items():
        if not isinstance(ratio, tuple) and np.all(_close(got, ratio * want, exercise.rtol)):
            return text, why
    for method, why in (exercise.wrong if apply is not None else ()):
        slipped = np.asarray(apply(method), dtype=float)
        if slipped.shape == got.shape and np.all(_close(got, slipped, exercise.rtol)):
            return text, why
    if np.all(_close(np.sort(got, axis=None), np.sort(want, axis=None), exercise.rtol)):
        return text, N_("the right values, in the wrong places (check which block goes where)")
    return text, None


def _decode_output(answer):
    """The learner's output as an array, or a text saying what it was instead."""
    kind = answer.get("kind") if isinstance(answer, dict) else None
    if kind == "unreadable":
        return None, _("your function returned {type} {repr}, which cannot be read as an array of numbers "
                       "({error})").format(type=str(answer.get("type", "an object"))[:60],
                                           repr=str(answer.get("repr", ""))[:80],
                                           error=str(answer.get("error", ""))[:120])
    if kind == "function":
        return None, _("your function returned a function, not an array")
    if kind == "text":
        return None, _("your function returned a string, not an array")
    if kind == "none":
        return None, _("your function returned None; did it forget `return`?")
    try:
        return np.asarray(decode(answer), dtype=float), None
    except Malformed as err:
        raise ValueError(f"a malformed output ({err})") from None


#: custom-call targets through which a compiled program calls Python on the host (pure_callback, io_callback,
#: jax.debug.callback and jax.debug.print), on CPU and GPU, old and FFI forms.
_CALLBACK_TARGET = re.compile(r'custom_call_target="([^"]*callback[^"]*)"')
#: The result type of an HLO instruction that is a custom call: ``%name = TYPE custom-call(...``.
_CUSTOM_CALL_RESULT = re.compile(r"=\s*(.*?)\s*custom-call\(")


def _returns_nothing(line: str) -> bool:
    """Whether the custom call on `line` gives its program nothing back: an empty result (``()``, or tokens only)."""
    found = _CUSTOM_CALL_RESULT.search(line)
    if not found:
        return False
    result = re.sub(r"\{[^{}]*\}", "", found.group(1)).strip()  # layouts dropped: f32[4]{0} -> f32[4]
    return result.startswith("(") and result.endswith(")") and all(
        part.strip() in ("", "token[]") for part in result[1:-1].split(","))


def host_callback(hlo: str) -> str | None:
    """The custom-call target of the first host callback in `hlo` that returns something to the program (None
    when there is none).

    A callback whose result is empty (``()``, or tokens only: ``jax.debug.print``, ``jax.debug.callback``, an
    ``io_callback`` that returns nothing) gives the program nothing, so none of the program's output can be
    computed on the host through it; one that returns an array (``jax.pure_callback``, an ``io_callback`` with
    a result) can, and so can one whose result type cannot be read.

    >>> host_callback('%c = f32[4]{0} custom-call(f32[4] %x), custom_call_target="xla_ffi_python_cpu_callback"')
    'xla_ffi_python_cpu_callback'
    >>> host_callback('%p = () custom-call(f32[] %s), custom_call_target="xla_ffi_python_cpu_callback"') is None
    True
    """
    for line in hlo.splitlines():
        found = _CALLBACK_TARGET.search(line)
        if found and not _returns_nothing(line):
            return found.group(1)
    return None


def judge_case(exercise, case, result, reference) -> tuple[str, str | None, str | None]:
    """(status, problem, likely cause) for one case's `result` (a dict from ``run_jax_case``, or the grader's
    merge of ``compile_jax_case`` and ``run_second_draw``)."""
    eid = exercise.id
    where = label(case)
    kind = result.get("result") if isinstance(result, dict) else None
    if kind == "not implemented":
        return NOT_ATTEMPTED, _("⬜ Exercise {eid}: not attempted (your function still raises "
                                "NotImplementedError).").format(eid=eid), None
    if kind == "unavailable":
        return INCORRECT, _("❌ Exercise {eid}: your function could not be run {where}: {message}").format(
            eid=eid, where=where, message=_cut(result.get("message", ""), 240)), None
    if kind == "error":
        return INCORRECT, _("❌ Exercise {eid}: your function raised {error}: {message} ({where}).").format(
            eid=eid, error=_cut(result.get("type", "an error"), 60),
            message=_cut(result.get("message", ""), 240).rstrip("."), where=where), None
    if kind == "timeout":
        return INCORRECT, _("❌ Exercise {eid}: your function did not finish within {limit} {where}.").format(
            eid=eid, limit=fmt(float(result.get("limit_s", 0)), "s"), where=where), None
    if kind == "none":
        return INCORRECT, _("❌ Exercise {eid}: your function returned None {where}; did it forget "
                            "`return`?").format(eid=eid, where=where), None
    got, why_not = _decode_output(result.get("answer"))
    if why_not:
        return INCORRECT, _("❌ Exercise {eid}: {problem} ({where}).").format(eid=eid, problem=why_not,
                                                                             where=where), None
    callback = host_callback(str(result.get("hlo", "")))
    if callback:
        return INCORRECT, _("❌ Exercise {eid}: your compiled program calls back into Python on the host "
                            "({callback}) {where} and uses what it returns: jax.pure_callback and io_callback run "
                            "on the host, not the devices, so they cannot answer this exercise (jax.debug.print "
                            "may stay).").format(eid=eid, callback=callback, where=where), None
    seed2 = result.get("seed2")
    if isinstance(seed2, bool) or not isinstance(seed2, int) or "answer2" not in result:
        return INCORRECT, _("❌ Exercise {eid}: your function was not run on a second draw of inputs "
                            "{where}.").format(eid=eid, where=where), None
    got2, why_not = _decode_output(result.get("answer2"))
    if why_not:
        return INCORRECT, _("❌ Exercise {eid}: {problem} ({where}, a second draw of inputs).").format(
            eid=eid, problem=why_not, where=where), None
    for seed, output, second in ((case["seed"], got, False), (seed2, got2, True)):
        arrays = input_values(case["arrays"], case["sizes"], case["mesh"], seed=seed, integers=case.get("integers"))
        apply = lambda f, arrays=arrays: f(*arrays, mesh=dict(case["mesh"]), **dict(case.get("kwargs") or {}))  # noqa: E731
        problem, cause = value_problem(exercise, output, apply(reference), apply)
        if problem:
            template = (_("❌ Exercise {eid}: not quite {where} on a second draw of inputs — {problem}.") if second
                        else _("❌ Exercise {eid}: not quite {where} — {problem}."))
            message = template.format(eid=eid, where=where, problem=problem)
            if cause:
                message += "\n   " + _("Likely cause: {cause}.").format(cause=translate(cause))
            return INCORRECT, message, cause
    trouble = rule_problem(exercise.rule, case, str(result.get("hlo", "")), result.get("replicated"))
    if trouble:
        return INCORRECT, _("❌ Exercise {eid}: the values are right {where}, but {problem}").format(
            eid=eid, where=where, problem=trouble), None
    return CORRECT, None, None


def _judge_all(exercise, pairs, count: int) -> Verdict:
    """The Verdict on (case, result) `pairs`, taken in order up to the first failure; `count` cases in all."""
    reference = exercise.reference()
    last, seen = None, 0
    for case, result in pairs:
        status, message, cause = judge_case(exercise, case, result, reference)
        if status != CORRECT:
            return Verdict(exercise.id, status, message, None, cause)
        last, seen = (case, result), seen + 1
    if last is None or seen != count:
        return Verdict(exercise.id, INCORRECT, _("❌ Exercise {eid}: your function was not run on every "
                                                 "case.").format(eid=exercise.id))
    summary = _summary(last[0], str(last[1].get("hlo", "")))
    message = _("✅ Exercise {eid}: correct — your function matches the unsharded result on all {count} cases, and "
                "its compiled program {summary}.").format(eid=exercise.id, count=count, summary=summary)
    if exercise.reason:
        message += f"\n   {translate(exercise.reason)}"
    return Verdict(exercise.id, CORRECT, message, 0.0)


def judge_results(exercise, cases, results) -> Verdict:
    """The Verdict on the `results` one learner's function gave on `cases` (in order), in the grader's process."""
    return _judge_all(exercise, zip(cases, results), len(cases) if len(results) == len(cases) else -1)


def run_and_judge(exercise, function: Callable, cases=None) -> Verdict:
    """In the learner's own process (an interactive ``check``): run `function` case by case, judging as it goes."""
    from .record import run_jax_case

    cases = [dict(c) for c in (exercise.cases if cases is None else cases)]
    return _judge_all(exercise, ((case, run_jax_case(function, case)) for case in cases), len(cases))

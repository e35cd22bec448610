"""The class report: what a class got right and wrong, and the slips it shares, from a gradebook's JSON.

``scalelib grade`` writes ``class-report.html`` beside ``gradebook.json``;
``scalelib class-report gradebook.json`` makes it again from the JSON alone (an old gradebook
too). It is one self-contained HTML file (inline CSS and SVG, nothing fetched) holding, per
chapter:

* a chart: per exercise, the share of notebooks that answered it correctly, wrongly, or not at
  all ("not attempted" and "missing" together);
* a table: the same shares, and the most common named slips behind the wrong answers (the
  ``diagnosis`` the checker matched each wrong answer to, which is the hint the learner saw in
  their feedback) with how many notebooks made each, and how many wrong answers matched no
  named slip;

and, per learner, the slips they made more than once (in several exercises or notebooks).
"""

from __future__ import annotations

import html
import json
from collections import Counter, defaultdict
from pathlib import Path

from .._errors import InvalidValueError
from .gradebook import escape_controls

#: Statuses counted as "not attempted" in the report.
_NOT_ATTEMPTED = ("not attempted", "missing")
_COLOURS = {"correct": "#2e7d32", "wrong": "#c62828", "not attempted": "#9e9e9e"}
#: Named slips listed per exercise (the most common first).
TOP_SLIPS = 3


def _text(value) -> str:
    """`value` for HTML: control characters escaped, then HTML's own."""
    return html.escape(escape_controls("" if value is None else value))


def _order(eid: str):
    return tuple(int(p) if p.isdigit() else 0 for p in str(eid).split("."))


def _pct(n: int, total: int) -> str:
    return f"{100 * n / total:.0f}%" if total else "–"


def read_gradebook(path) -> dict:
    """The gradebook JSON at `path` (what :meth:`~scalelib.course.gradebook.Gradebook.to_json` wrote).

    Raises:
        InvalidValueError: no such file, not JSON, or not a gradebook (no ``learners`` list).
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise InvalidValueError(f"`gradebook`: cannot read {str(path)!r} ({err.strerror or err})") from None
    except ValueError as err:
        raise InvalidValueError(f"`gradebook`: {str(path)!r} is not JSON ({err})") from None
    if not isinstance(data, dict) or not isinstance(data.get("learners"), list):
        raise InvalidValueError(f"`gradebook`: {str(path)!r} is not a gradebook.json (no 'learners' list)")
    return data


def summarize(data: dict) -> dict:
    """The report's numbers from a gradebook's JSON `data`.

    Returns a dict: ``chapters`` (chapter -> {"notebooks", "points", "max_points", "exercises":
    exercise -> {"correct", "wrong", "not attempted", "total", "slips": [(hint, count), ...] most common
    first, "unnamed": wrong answers with no named slip}}) and ``repeats`` (learner -> [(hint, times,
    exercises)] for each slip they made more than once).
    """
    chapters: dict = {}
    per_learner: dict[str, Counter] = defaultdict(Counter)
    where: dict[tuple[str, str], list[str]] = defaultdict(list)
    for row in data.get("learners", []):
        if not isinstance(row, dict) or not row.get("exercises"):
            continue
        chapter = row.get("chapter")
        book = chapters.setdefault(chapter, {"notebooks": 0, "points": 0.0, "max_points": 0.0, "exercises": {}})
        book["notebooks"] += 1
        book["points"] += float(row.get("points") or 0)
        book["max_points"] = max(book["max_points"], float(row.get("max_points") or 0))
        learner = str(row.get("learner", ""))
        for e in row["exercises"]:
            eid = str(e.get("exercise"))
            stats = book["exercises"].setdefault(eid, {"correct": 0, "wrong": 0, "not attempted": 0, "total": 0,
                                                       "slips": Counter(), "unnamed": 0})
            stats["total"] += 1
            status = e.get("status")
            if status == "correct":
                stats["correct"] += 1
            elif status in _NOT_ATTEMPTED:
                stats["not attempted"] += 1
            else:
                stats["wrong"] += 1
                hint = e.get("diagnosis")
                if hint:
                    stats["slips"][hint] += 1
                    per_learner[learner][hint] += 1
                    where[(learner, hint)].append(eid)
                else:
                    stats["unnamed"] += 1
    for book in chapters.values():
        book["exercises"] = {eid: {**s, "slips": s["slips"].most_common()}
                             for eid, s in sorted(book["exercises"].items(), key=lambda kv: _order(kv[0]))}
    repeats = {learner: [(hint, n, where[(learner, hint)]) for hint, n in counts.most_common() if n > 1]
               for learner, counts in sorted(per_learner.items())}
    return {"chapters": dict(sorted(chapters.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))),
            "repeats": {k: v for k, v in repeats.items() if v}}


def _chart(chapter, exercises: dict) -> str:
    """An inline SVG: per exercise a bar of the shares correct, wrong and not attempted."""
    row_h, label_w, bar_w, top = 28, 70, 820, 56
    height = top + row_h * len(exercises) + 40
    parts = [f'<svg class="chart" role="img" viewBox="0 0 {label_w + bar_w + 20} {height}" '
             f'xmlns="http://www.w3.org/2000/svg" aria-label="Chapter {_text(chapter)}: share of notebooks per '
             f'exercise">']
    x = label_w
    for name, colour in _COLOURS.items():  # the legend
        parts.append(f'<rect x="{x}" y="8" width="14" height="14" fill="{colour}"/>'
                     f'<text x="{x + 20}" y="20" font-size="14">{name}</text>')
        x += 20 + 9 * len(name) + 30
    axis_y = top + row_h * len(exercises) + 4
    for pct in (0, 25, 50, 75, 100):
        ax = label_w + bar_w * pct / 100
        parts.append(f'<line x1="{ax}" y1="{top}" x2="{ax}" y2="{axis_y}" stroke="#ccc" stroke-width="1"/>'
                     f'<text x="{ax}" y="{axis_y + 16}" font-size="13" text-anchor="middle">{pct}</text>')
    for i, (eid, s) in enumerate(exercises.items()):
        y = top + i * row_h
        parts.append(f'<text x="{label_w - 8}" y="{y + 18}" font-size="14" text-anchor="end">{_text(eid)}</text>')
        x = float(label_w)
        for key, colour in _COLOURS.items():
            n = s[key]
            if not n or not s["total"]:
                continue
            w = bar_w * n / s["total"]
            parts.append(f'<rect x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="{row_h - 6}" fill="{colour}">'
                         f'<title>{_text(eid)}: {n} {key} of {s["total"]}</title></rect>')
            if w >= 40:
                parts.append(f'<text x="{x + w / 2:.1f}" y="{y + 18}" font-size="13" fill="#fff" '
                             f'text-anchor="middle">{_pct(n, s["total"])}</text>')
            x += w
    parts.append(f'<text x="{label_w + bar_w / 2}" y="{axis_y + 34}" font-size="13" text-anchor="middle">'
                 f'share of the chapter\'s notebooks (%)</text>')
    parts.append("</svg>")
    return "".join(parts)


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; color: #222; line-height: 1.45; }
h1 { font-size: 1.8rem; } h2 { font-size: 1.4rem; margin-top: 2.2rem; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; width: 100%; margin: 1rem 0; font-size: 0.95rem; }
th, td { border: 1px solid #ddd; padding: 0.35rem 0.5rem; vertical-align: top; text-align: left; }
th { background: #f4f4f4; } td.n { text-align: right; white-space: nowrap; }
.chart { width: 100%; height: auto; } .muted { color: #666; }
ul.slips { margin: 0; padding: 0; list-style: none; } ul.slips li { margin-bottom: 0.3rem; } .count { font-weight: 600; }
"""


def class_report(data: dict) -> str:
    """The class report (self-contained HTML) of a gradebook's JSON `data` (see the module's docstring)."""
    if not isinstance(data, dict) or not isinstance(data.get("learners"), list):
        raise InvalidValueError("`data` must be a gradebook's JSON (a dict with a 'learners' list)")
    summary = summarize(data)
    n = len(data["learners"])
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           "<title>Class report</title>", f"<style>{_CSS}</style></head><body>",
           "<h1>Class report</h1>",
           f'<p class="muted">{n} notebook{"s" if n != 1 else ""} from one grading run (cases drawn with seed '
           f'{_text(data.get("seed"))}). A slip is the named mistake the checker matched a wrong answer to; its '
           f'text is the hint the learner saw in their feedback.</p>']
    if not summary["chapters"]:
        out.append("<p>No notebook in this gradebook was graded exercise by exercise.</p>")
    for chapter, book in summary["chapters"].items():
        title = f"Chapter {_text(chapter)}" if chapter is not None else "Chapter unknown"
        mean = book["points"] / book["notebooks"] if book["notebooks"] else 0
        out.append(f'<section class="chapter" data-chapter="{_text(chapter)}"><h2>{title}</h2>'
                   f'<p>{book["notebooks"]} notebook{"s" if book["notebooks"] != 1 else ""}, '
                   f'{mean:.1f} of {book["max_points"]:g} points on average.</p>')
        out.append(_chart(chapter, book["exercises"]))
        out.append('<table class="exercises"><thead><tr><th>Exercise</th><th>Correct</th><th>Wrong</th>'
                   '<th>Not attempted</th><th>Most common slips (notebooks × the hint they saw)</th></tr></thead>'
                   '<tbody>')
        for eid, s in book["exercises"].items():
            slips = "".join(f'<li data-count="{count}"><span class="count">{count} ×</span> {_text(hint)}</li>'
                            for hint, count in s["slips"][:TOP_SLIPS])
            more = len(s["slips"]) - TOP_SLIPS
            notes = []
            if more > 0:
                notes.append(f"{more} other slip{'s' if more > 1 else ''}")
            if s["unnamed"]:
                notes.append(f"{s['unnamed']} wrong with no named slip")
            cell = (f'<ul class="slips">{slips}</ul>' if slips else "") + \
                (f'<span class="muted">{"; ".join(notes)}</span>' if notes else "")
            out.append(f'<tr data-exercise="{_text(eid)}"><td>{_text(eid)}</td>'
                       f'<td class="n" data-n="{s["correct"]}">{s["correct"]} ({_pct(s["correct"], s["total"])})</td>'
                       f'<td class="n" data-n="{s["wrong"]}">{s["wrong"]} ({_pct(s["wrong"], s["total"])})</td>'
                       f'<td class="n" data-n="{s["not attempted"]}">{s["not attempted"]} '
                       f'({_pct(s["not attempted"], s["total"])})</td><td>{cell or "–"}</td></tr>')
        out.append("</tbody></table></section>")
    out.append("<h2>Slips learners made more than once</h2>")
    if summary["repeats"]:
        out.append('<table class="repeats"><thead><tr><th>Learner</th><th>Slip (the hint they saw)</th>'
                   '<th>Times</th><th>Exercises</th></tr></thead><tbody>')
        for learner, slips in summary["repeats"].items():
            for hint, times, where in slips:
                out.append(f'<tr data-learner="{_text(learner)}"><td>{_text(learner)}</td><td>{_text(hint)}</td>'
                           f'<td class="n">{times}</td><td>{_text(", ".join(where))}</td></tr>')
        out.append("</tbody></table>")
    else:
        out.append("<p>No learner made the same slip twice.</p>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def write_class_report(gradebook_json, out=None) -> Path:
    """Write the class report of the gradebook JSON at `gradebook_json` to `out` (default:
    ``class-report.html`` beside it); return its path."""
    data = read_gradebook(gradebook_json)
    target = Path(out) if out is not None else Path(gradebook_json).with_name("class-report.html")
    target.write_text(class_report(data), encoding="utf-8")
    return target

"""The generated API reference (book/api.md) and formula index (book/formulas.md).

Both pages are written by ``scalelib api-docs`` (``make exercises``) from the
docstrings; these tests fail when a page on disk drifts from what the docstrings
generate, when a public name is missing from the API page, or when a formula of a
docstring is missing from the index (or listed twice).
"""

from __future__ import annotations

import difflib
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

import scalelib
from scalelib.course import apidoc as _apidoc
from scalelib.course.cli import main

ROOT = Path(__file__).resolve().parents[1]
API = ROOT / "book" / "api.md"
FORMULAS = ROOT / "book" / "formulas.md"
SITE = ROOT / "_build" / "html" / "book"


def _read(path: Path) -> str:
    assert path.is_file(), f"{path.relative_to(ROOT)} is missing: run `make exercises` to generate it"
    return path.read_text(encoding="utf-8")


# ---------------------------------------------------------------------------
# Drift


@pytest.mark.parametrize("page", [_apidoc.API_PAGE, _apidoc.FORMULA_PAGE])
def test_page_is_up_to_date_with_the_docstrings(page):
    expected = _apidoc.pages()[page]
    actual = _read(ROOT / page)
    if actual != expected:
        diff = "".join(list(difflib.unified_diff(
            actual.splitlines(keepends=True), expected.splitlines(keepends=True),
            f"{page} (on disk)", f"{page} (from the docstrings)"))[:60])
        pytest.fail(f"{page} is out of date with scalelib's docstrings: run `make exercises` "
                    f"(or `scalelib api-docs`) and commit it.\n{diff}")


def test_a_changed_docstring_makes_the_pages_stale(tmp_path, monkeypatch):
    (tmp_path / "book").mkdir()
    assert {d.problem for d in _apidoc.write_pages(tmp_path)} == {"missing"}
    assert _apidoc.write_pages(tmp_path, check=True) == []
    doc = scalelib.critical_intensity.__doc__
    monkeypatch.setattr(scalelib.critical_intensity, "__doc__", doc.replace("I_crit = C / W", "I_crit = W / C"))
    drift = _apidoc.write_pages(tmp_path, check=True)
    assert [(str(d.path), d.problem) for d in drift] == [("book/formulas.md", "stale")]
    assert r"$I_{\text{crit}}=C/W$" in (tmp_path / "book" / "formulas.md").read_text(encoding="utf-8")  # check wrote nothing


def test_cli_check_reports_drift_and_writes_nothing(tmp_path, capsys):
    (tmp_path / "book").mkdir()
    assert main(["api-docs", "--check", "--root", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert "book/api.md: missing" in out and "book/formulas.md: missing" in out
    assert "run `make exercises`" in err
    assert not (tmp_path / "book" / "api.md").exists()

    assert main(["api-docs", "--root", str(tmp_path)]) == 0
    assert "created book/api.md" in capsys.readouterr().out
    assert main(["api-docs", "--check", "--root", str(tmp_path)]) == 0
    assert "up to date" in capsys.readouterr().out

    (tmp_path / "book" / "formulas.md").write_text("# Formula index\n", encoding="utf-8")
    assert main(["api-docs", "--check", "--root", str(tmp_path)]) == 1
    assert capsys.readouterr().out.strip() == "book/formulas.md: stale (differs from what the docstrings generate)"


def test_cli_refuses_a_folder_without_book(tmp_path, capsys):
    assert main(["api-docs", "--root", str(tmp_path)]) == 1
    assert "has no book/ folder" in capsys.readouterr().err


def test_output_is_deterministic():
    assert _apidoc.pages() == _apidoc.pages()


# ---------------------------------------------------------------------------
# The API reference


def _documented(text: str) -> list[str]:
    """Names the API page documents: `.. autofunction:: scalelib.x`, `.. py:data:: x`, ..."""
    names = re.findall(r"^\.\. auto(?:function|class|exception):: scalelib\.(\w+)$", text, re.M)
    return names + re.findall(r"^\.\. py:data:: (\w+)$", text, re.M)


def test_every_public_name_is_documented_once():
    documented = _documented(_read(API))
    assert sorted(documented) == sorted(scalelib.__all__), (
        f"book/api.md documents {sorted(set(documented) - set(scalelib.__all__))} too many and "
        f"misses {sorted(set(scalelib.__all__) - set(documented))}: run `make exercises`")


def test_api_page_groups_by_first_chapter():
    text = _read(API)
    sections = dict(re.findall(r"^## ([^\n]+)\n(.*?)(?=^## |\Z)", text, re.M | re.S))
    assert "scalelib.critical_intensity" in sections["Chapter 1: Rooflines"]
    # documented under chapter 3, listed (not documented again) under chapter 12
    assert ".. autofunction:: scalelib.allgather_time_s" in sections["Chapter 3: Sharded matrices"]
    assert "{py:func}`allgather_time_s` (chapter 3)" in sections["Chapter 12: GPUs"]
    assert ".. autofunction:: scalelib.allgather_time_s" not in sections["Chapter 12: GPUs"]
    assert ".. autoclass:: scalelib.TpuSlice\n   :members:\n   :inherited-members:" in sections["Chapter 2: TPUs"]
    # the headings are the course's chapters, in order, then the names with no Chapter section
    headings = re.findall(r"^## (.+)$", text, re.M)
    chapters = [h for h in headings if h != _apidoc.ACROSS]
    assert chapters == sorted(chapters, key=lambda h: int(re.match(r"Chapter (\d+):", h).group(1)))
    for heading in chapters:
        number, title = re.match(r"Chapter (\d+): (.+)$", heading).groups()
        assert _apidoc.CHAPTERS[int(number)] == title


def test_chapter_sections_name_chapters_of_the_course():
    assert _apidoc.chapter_problems() == []


# ---------------------------------------------------------------------------
# The formula index


def _formula_sections(doc: str | None) -> str | None:
    """The Formula section of a docstring, read independently of the generator."""
    lines = inspect.cleandoc(doc or "").splitlines()
    for i, line in enumerate(lines):
        if line.strip() == "Formula:":
            body = []
            for following in lines[i + 1:]:
                if following.strip() and not following[:1].isspace():
                    break
                body.append(following.strip())
            return " ".join(" ".join(body).split())
    return None


def _functions_with_formula() -> dict[int, tuple[list[str], str]]:
    """id(function) -> (public names reaching it, its formula), over __all__ and the public classes' methods."""
    found: dict[int, tuple[list[str], str]] = {}
    for name in scalelib.__all__:
        obj = getattr(scalelib, name)
        if (inspect.isroutine(obj) or inspect.isclass(obj)) and (formula := _formula_sections(obj.__doc__)):
            found.setdefault(id(obj), ([], formula))[0].append(name)
        if inspect.isclass(obj):
            for attr in dir(obj):
                raw = inspect.getattr_static(obj, attr)
                if attr.startswith("_") or not inspect.isfunction(raw):
                    continue
                if formula := _formula_sections(raw.__doc__):
                    found.setdefault(id(raw), ([], formula))[0].append(f"{name}.{attr}")
    return found


def _rows(text: str) -> list[tuple[str, list[str]]]:
    """(chapter heading, [formula, what it computes, call, unit]) of every block of the page: a
    definition list item whose term is the call and the unit ("{py:func}`...` → unit") and whose two
    definitions are the formula and the summary."""
    rows, heading, lines = [], None, text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("## "):
            heading = line[3:]
        elif line.startswith("{py:") and " → " in line and i + 2 < len(lines):
            call, unit = line.rsplit(" → ", 1)
            formula, summary = lines[i + 1], lines[i + 2]
            assert formula.startswith(": ") and summary.startswith(": "), (line, formula, summary)
            rows.append((heading, [formula[2:], summary[2:], call, unit]))
    return rows


def test_known_row_of_the_formula_index():
    rows = _rows(_read(FORMULAS))
    row = [cells for heading, cells in rows if "<scalelib.critical_intensity>" in cells[2]]
    assert len(row) == 1, "critical_intensity has no block (or several) in book/formulas.md"
    formula, summary, call, unit = row[0]
    assert formula == r"$I_{\text{crit}}=C/W$"  # typeset by KaTeX: I with "crit" below, = C / W
    assert summary.startswith("A chip's critical intensity")
    assert call == "{py:func}`critical_intensity(chip, …) <scalelib.critical_intensity>`"
    assert unit == "FLOP/B"
    chapter = [heading for heading, cells in rows if cells is row[0]][0]
    assert chapter == "Chapter 1: Rooflines"


def test_formulas_are_typeset_as_math_not_code():
    """The index shows formulas as KaTeX math: the book's Unicode operators become TeX, pipes |Δ|
    become \vert (no Markdown table to split), prose stays words with their spaces."""
    rows = _rows(_read(FORMULAS))
    hops = [cells for _, cells in rows if "<scalelib.TpuSlice.hops>" in cells[2]]
    assert hops and hops[0][0].startswith(r"$\text{hops}=\sum \text{over}\ ")
    assert r"\vert \Delta \vert" in hops[0][0] and "|" not in hops[0][0]
    math = [cells[0] for _, cells in rows if cells[0].startswith("$")]
    assert len(math) >= 0.95 * len(rows), f"only {len(math)} of {len(rows)} formulas are typeset"
    for formula in math:
        assert formula.endswith("$") and not any(c in formula for c in "·−Σ≈"), formula


@pytest.mark.parametrize(("written", "tex"), [
    ("I_crit = C / W", r"I_{\text{crit}}=C/W"),
    ("FLOPs = 2 · B · D · F", r"\text{FLOPs}=2\cdot B\cdot D\cdot F"),
    ("min(C, I · W)", r"\min (C,\ \allowbreak I\cdot W)"),
    ("Σ_{g=0}^{G−1} T_step", r"\sum _{g=0}^{G-1}\ \allowbreak T_{\text{step}}"),
    ("W_link,bidirectional", r"W_{\text{link,bidirectional}}"),
    ("V* = T_hop · hops", r"V^{*}=T_{\text{hop}}\cdot \text{hops}"),
    ("T = V / W_link (one-way)", r"T=V/W_{\text{link}}\ \allowbreak (\text{one-way})"),
    ("output_tokens · ⌈K/n⌉", r"\text{output\_tokens}\cdot \lceil K/n\rceil"),
    ("as :func:`search_tiles`", None),  # a link to another function, not a formula
])
def test_formula_tex(written, tex):
    assert _apidoc.formula_tex(written) == tex


def test_every_formula_typesets_in_katex(tmp_path):
    """Every typeset formula of the index renders in the KaTeX the site pins (book/node_modules),
    strictly: the site's build would fail on one that does not."""
    import json
    import shutil
    import subprocess

    katex = ROOT / "book" / "node_modules" / "katex"
    if not shutil.which("node") or not katex.is_dir():
        pytest.skip("node or the site's KaTeX (make book/node_modules/.installed) is not installed")
    formulas = [cells[0][1:-1] for _, cells in _rows(_read(FORMULAS)) if cells[0].startswith("$")]
    (tmp_path / "formulas.json").write_text(json.dumps(formulas), encoding="utf-8")
    script = ("const katex = require(process.argv[1]); const fs = require('fs');"
              "const bad = JSON.parse(fs.readFileSync(process.argv[2], 'utf8')).filter(t => {"
              " try { katex.renderToString(t, {throwOnError: true, strict: 'error'}); return false; }"
              " catch (e) { return true; } });"
              "console.log(JSON.stringify(bad));")
    result = subprocess.run(["node", "-e", script, str(katex), str(tmp_path / "formulas.json")],
                            capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(result.stdout) == [], "formulas KaTeX cannot typeset"


def test_every_formula_is_in_the_index_once():
    rows = _rows(_read(FORMULAS))
    expected = _functions_with_formula()
    assert expected, "no docstring has a Formula section: is the convention still `Formula:`?"
    assert len(rows) == len(expected), (
        f"book/formulas.md has {len(rows)} blocks for {len(expected)} functions with a Formula section: "
        f"run `make exercises`")
    for names, formula in expected.values():
        matching = [cells for _, cells in rows if any(f"<scalelib.{n}>`" in cells[2] for n in names)]
        assert len(matching) == 1, f"{names[0]}: {len(matching)} blocks in book/formulas.md, expected 1"
        cell = matching[0][0]
        if ":func:" in formula:  # "as :func:`search_tiles`": a link, not code
            target = re.search(r":func:`~?(?:scalelib\.)?(\w+)`", formula).group(1)
            assert f"{{py:func}}`{target}`" in cell
        elif cell.startswith("$"):
            # every name and word of the docstring's formula is in the typeset one
            as_written = re.sub(r"`+([^`]+)`+", r"\1", formula)
            for word in re.findall(r"[A-Za-z][A-Za-z0-9']+", as_written):
                assert word in cell, f"{names[0]}: {word!r} of {formula!r} is not in {cell!r}"
        else:
            as_written = re.sub(r"`+([^`]+)`+", r"\1", formula)  # without reST's literal quotes
            assert cell.replace("\\|", "|") == f"`{as_written}`", f"{names[0]}: the index has {cell}"
        # every public name reaching the function is in the call, each linked to its API entry
        for name in names:
            assert f"<scalelib.{name}>`" in matching[0][2], f"{name} is not linked from its block"


def test_names_without_formula_are_not_in_the_index():
    text = _read(FORMULAS)
    assert "<scalelib.chip>`" not in text and "<scalelib.fmt>`" not in text


# ---------------------------------------------------------------------------
# Pieces of the generator


def test_parse_docstring():
    summary, sections = _apidoc.parse_docstring(scalelib.critical_intensity.__doc__)
    assert summary == "A chip's critical intensity: above it an operation is compute-bound."
    assert sections["Formula"] == "I_crit = C / W"
    assert sections["Returns"] == "FLOP/B."
    assert sections["Chapter"] == "1 (Rooflines)"
    assert sections["Example"].startswith('>>> round(critical_intensity("tpu-v5e"))\n240')
    assert _apidoc.parse_docstring("Just a line.\n\nProse: with a colon.") == ("Just a line.", {})


@pytest.mark.parametrize("text, numbers", [
    ("1 (Rooflines)", (1,)),
    ("3 (Sharded matrices), 12 (GPUs)", (3, 12)),
    ("5 (Parallelism for training), 12 (GPUs)", (5, 12)),
    ("2", (2,)),
    ("", ()),
])
def test_parse_chapters(text, numbers):
    assert _apidoc.parse_chapters(text) == numbers


@pytest.mark.parametrize("returns, unit", [
    ("FLOP/B.", "FLOP/B"),
    ("seconds (s).", "s"),
    ("bytes (B).", "B"),
    ("B/s (0 for one chip).", "B/s (0 for one chip)"),
    ("chips (a degree; not rounded).", "chips (a degree; not rounded)"),
    ("a fraction between 0 and 1 (dimensionless).", "dimensionless"),
    ("A :class:`Roofline` (times in s); ``explain(roofline, ...)`` derives its T_lower.",
     "{py:class}`Roofline` (times in s)"),
    ("", ""),
])
def test_unit(returns, unit):
    assert _apidoc._unit(returns) == unit


def test_markdown_escaping():
    assert _apidoc._code("min(|Δ|, n − |Δ|)") == "`min(\\|Δ\\|, n − \\|Δ\\|)`"
    assert _apidoc._code("a `b`") == "`` a `b` ``"
    assert _apidoc._inline("costs $5 when B << D, see :func:`fmt` or ``x``") == (
        "costs \\$5 when B \\<\\< D, see {py:func}`fmt` or `x`")


def test_sphinx_hook_shows_formulas_as_code():
    lines = ["Summary.", "", "Formula:", "    hops = Σ |Δ|", "", "Returns:", "    hops."]
    _apidoc._formula_blocks(None, "function", "f", None, {}, lines)
    assert lines == ["Summary.", "", "Formula:", "    .. code-block:: text", "", "        hops = Σ |Δ|", "",
                     "Returns:", "    hops."]
    quoted = ["Formula:", "    C = the peak for `dtype` of ``chip``"]
    _apidoc._formula_blocks(None, "method", "f", None, {}, quoted)
    assert quoted == ["Formula:", "    .. code-block:: text", "", "        C = the peak for dtype of chip"]
    refers = ["Formula:", "    as :func:`search_tiles`"]
    _apidoc._formula_blocks(None, "function", "f", None, {}, refers)
    assert refers == ["Formula:", "    as :func:`search_tiles`"]


def test_sphinx_hook_keeps_napoleon_off_prose_properties():
    prose = ["Optimistic bound: computation and communication overlap (s)."]
    _apidoc._prose_properties(None, "property", "p", None, {}, prose)
    assert prose[:2] == ["..", ""]
    typed = ["int: the number of chips."]
    _apidoc._prose_properties(None, "property", "p", None, {}, typed)
    assert typed == ["int: the number of chips."]


def test_missing_sections_lists_names_lacking_the_convention():
    missing = _apidoc.missing_sections()
    assert "critical_intensity" not in missing
    assert set(missing) <= set(scalelib.__all__)
    assert all(set(sections) <= {"Formula", "Chapter", "Example"} for sections in missing.values())


def test_the_library_never_imports_the_generator():
    code = "import sys, scalelib; print('scalelib.course.apidoc' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    for path in sorted((ROOT / "scalelib").glob("_*.py")):
        assert "apidoc" not in path.read_text(encoding="utf-8"), f"{path.name} imports scalelib.course.apidoc"


# ---------------------------------------------------------------------------
# The built pages (after `make site`; skipped without a build)


def test_built_formula_index_typesets_its_formulas():
    page = SITE / "formulas.html"
    if not page.is_file():
        pytest.skip("the site is not built (make site)")
    html = page.read_text(encoding="utf-8")
    blocks = _rows(_read(FORMULAS))
    typeset = sum(1 for _, cells in blocks if cells[0].startswith("$"))
    assert html.count("<dt") >= len(blocks), "book/formulas.html: the definition list of formulas did not render"
    assert html.count('<span class="katex">') >= typeset, "formulas left untypeset in book/formulas.html"
    assert "katex-error" not in html
    text = re.sub(r"<[^>]+>", "", re.sub(r'<span class="katex-mathml">.*?</math></span>', "", html, flags=re.S))
    assert "$" not in text and "\\text{" not in text, "TeX source shown in book/formulas.html"
    api = (SITE / "api.html").read_text(encoding="utf-8")
    for anchor in set(re.findall(r'href="api\.html#([\w.]+)"', html)):
        assert f'id="{anchor}"' in api, f"formulas.html links to api.html#{anchor}, which does not exist"

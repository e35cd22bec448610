"""The Russian edition (scalelib/course/translate.py): catalogs complete and in step, translations that keep
what they must, the glossary's terms, generated notebooks up to date, and pages in Russian.

The cutting of Markdown and code into units is held to hand-made examples and, over every English source,
to joining back to the source exactly.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest
from babel.messages.catalog import Message

from scalelib.course import translate as t
from scalelib.course.authoring import generate_exercise_notebook, notebook_text

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------
# Cutting into units


def test_markdown_pieces_keep_structure_out_of_units():
    text = ("<!-- BEGIN SOLUTION -->\nThe answer is $C/W$.\n<!-- END SOLUTION -->\n\n"
            "$$\nx = y\n$$\n\n```python\nprint('no prose here')\n```\n\n(label)=\n## A heading\n")
    pieces = t.markdown_pieces(text)
    assert "".join(p for _, p in pieces) == text
    assert [p for unit, p in pieces if unit] == ["The answer is $C/W$.", "## A heading"]


def test_a_block_of_math_or_code_only_is_not_a_unit():
    assert [u for u, _ in t.markdown_pieces("$x = 2$\n\n`code`\n\nWords here.")] == [False, True]


def test_code_units_are_prose_strings_and_comments_only():
    source = ('ax.set_title(f"time per step: {t:.2f} ms")  # the step\'s time\n'
              'x = jnp.einsum("bd,df->bf", a, b)\nname = "tpu-v5e"\nax.set_xlabel("batch (sequences)")\n'
              '### BEGIN SOLUTION\ny = 1  # noqa: E501\n')
    units = [(kind, unit) for _, _, kind, _, unit in t.code_units(source)]
    assert units == [("string", "time per step: {t:.2f} ms"), ("comment", "the step's time"),
                     ("string", "batch (sequences)")]
    table = {"time per step: {t:.2f} ms": "время шага: {t:.2f} ms", "batch (sequences)": "батч (последовательности)"}
    translated = t.translate_code(source, lambda unit: table.get(unit, unit))
    assert 'f"время шага: {t:.2f} ms"' in translated and '"batch (sequences)"' not in translated
    assert "the step's time" in translated  # an untranslated unit stays English 


def _english_sources():
    for folder in t.NOTEBOOK_DIRS:
        yield from sorted((ROOT / folder).glob("*.ipynb"))


@pytest.mark.parametrize("path", list(_english_sources()), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_units_join_back_to_every_english_cell(path):
    nb = nbformat.read(str(path), as_version=4)
    for cell in nb.cells:
        source = t._source(cell)
        if cell.cell_type == "markdown":
            assert "".join(p for _, p in t.markdown_pieces(source)) == source
        else:
            assert t.translate_code(source, lambda unit: unit) == source


def test_a_figure_reference_inside_a_sentence_is_lower_case_and_one_that_starts_it_is_not():
    inside = "{numref}`рис. %s <fig-ch05-gantt>`"
    assert t.lowercase_figure_refs("На {numref}`fig-ch05-gantt` видно.") == f"На {inside} видно."
    assert t.lowercase_figure_refs("Ганта ({numref}`fig-ch05-gantt`).") == f"Ганта ({inside})."
    assert t.lowercase_figure_refs("(см. {numref}`fig-ch05-gantt`)") == f"(см. {inside})"
    for kept in ("{numref}`fig-a` показывает.", "Конец. {numref}`fig-a` показывает.", "- {numref}`fig-a`",
                 "a\n\n{numref}`fig-a`", "на {numref}`eq-ch05-a`", "на {numref}`Рис. %s <fig-a>`"):
        assert t.lowercase_figure_refs(kept) == kept
    russian = (ROOT / "book" / "ru" / "ch05_training.ipynb").read_text(encoding="utf-8")
    assert "{numref}`fig-" not in russian and "рис. %s <fig-ch05-" in russian


def test_anchors_and_relink():
    assert t._anchors(["## Упражнение 3.4: Время AllGather (разминка)", None, "## Exercise 10.4: with $k$ experts"]) \
        == ["упражнение-34-время-allgather-разминка", "exercise-104-with--experts"]
    assert t._anchors(["# Title\n\n## Part\n\n## Part\n\n#### Deep"]) == ["title", "part", "part-1"]
    anchors = {"solutions/ch03_sharding.ipynb": {"exercise-34-x": "упражнение-34-x"}}
    text = "[worked](../solutions/ch03_sharding.ipynb#exercise-34-x), [API](api.md), [web](https://x.org/a.md)"
    assert t.relink(text, "book/ch03_sharding.ipynb", "book/ru/ch03_sharding.ipynb", anchors) == (
        "[worked](../../solutions/ru/ch03_sharding.ipynb#упражнение-34-x), [API](../api.md), [web](https://x.org/a.md)")
    html = '<a class="reference external" href="../how-to-scale-your-model.pdf">PDF</a>'
    assert t.relink(html, "book/intro.md", "book/ru/intro.md", {}) == html.replace("../", "../../")


def test_translated_notebook_runs_in_russian_and_opens_its_own_colab_copy():
    path = ROOT / "book" / "ch01_rooflines.ipynb"
    nb = nbformat.read(str(path), as_version=4)
    ru = t.translate_notebook(nb, "book/ch01_rooflines.ipynb", lambda unit: unit)
    setup = next(c for c in ru.cells if t._is_setup(c))
    assert t.LANGUAGE_LINE in setup.source
    first = next(c for c in ru.cells if c.cell_type == "markdown").source
    assert "blob/main/book/ru/ch01_rooflines.ipynb)" in first and t.COLAB_LABEL in first
    assert ru.metadata["scalelib"]["language"] == "ru"


# ---------------------------------------------------------------------------
# What a translation must keep; the glossary


def _message(msgid, msgstr, kind="markdown"):
    return Message(msgid, msgstr, auto_comments=[kind])


def test_problems_catch_what_a_translation_must_keep():
    terms = t.glossary(ROOT)
    assert t.problems(_message("The time is $T = F/C$ for `x`.", "Время равно $T = F/C$ для `x`."), terms) == []
    assert any("math" in p for p in t.problems(_message("The time is $T = F/C$.", "Время равно $T=F/C$."), terms))
    assert any("code" in p for p in t.problems(_message("Call `sl.chip`.", "Вызовите `sl.chips`."), terms))
    assert any("fields" in p for p in t.problems(
        _message("step {t:.2f} ms", "шаг {t:.1f} ms", "code string"), terms))
    assert any("structure" in p for p in t.problems(_message("- one\n- two", "- один, два"), terms))
    assert any("glossary" in p for p in t.problems(
        _message("The training step is slow.", "Шаг тренировки медленный."), terms))
    assert not any("glossary" in p for p in t.problems(
        _message("The training step is slow.", "Шаг обучения медленный."), terms))
    assert any("Latin" in p for p in t.problems(
        _message("The training step is slow on this chip, so the batch must grow.",
                 "The training step is slow on this chip, so the batch must grow: обучение, батч."),
        terms))


def test_glossary_terms_are_distinct_and_compile():
    terms = t.glossary(ROOT)
    assert len(terms) >= 30
    assert len({term.english.pattern for term in terms}) == len(terms)


# ---------------------------------------------------------------------------
# The catalogs and the generated edition


def test_catalogs_are_in_step_with_the_english():
    drift = t.update_catalogs(ROOT, check=True)
    assert not drift, f"run `make translations`: {[str(d.path) for d in drift]}"


def test_russian_edition_is_generated_from_english_and_catalogs():
    drift = t.generate(ROOT, check=True)
    assert not drift, f"run `make translations`: {[f'{d.path} ({d.problem})' for d in drift]}"


def test_every_catalog_entry_is_translated_and_none_is_fuzzy():
    left = t.untranslated(ROOT)
    by_catalog: dict[str, int] = {}
    for catalog, _, _ in left:
        by_catalog[catalog] = by_catalog.get(catalog, 0) + 1
    assert not left, f"{len(left)} entries untranslated or fuzzy: {by_catalog}"


def test_every_translation_keeps_markup_and_uses_the_glossary():
    found = t.catalog_problems(ROOT)
    shown = "\n".join(f"{c}: {p} (in {m[:80]!r})" for c, m, p in found[:15])
    assert not found, f"{len(found)} problem(s):\n{shown}"


def test_russian_exercises_are_generated_from_russian_solutions():
    for path in sorted((ROOT / "solutions" / "ru").glob("*.ipynb")):
        solution = nbformat.read(str(path), as_version=4)
        exercise = generate_exercise_notebook(solution, name=str(path), chapter=t.chapter_of(path))
        got = nbformat.reads((ROOT / "exercises" / "ru" / path.name).read_text(encoding="utf-8"), as_version=4)
        assert len(got.cells) == len(exercise.cells)
        for mine, theirs in zip(got.cells, exercise.cells):
            source = t._source(theirs)
            for stub, russian in t.STUBS.items():
                source = source.replace(stub, russian)
            assert t._source(mine) == source
        assert not any(stub in t._source(c) for c in got.cells for stub in t.STUBS), "an English stub is left"


RUSSIAN_FILES = sorted([*(ROOT / "book" / "ru").glob("*.ipynb"), *(ROOT / "solutions" / "ru").glob("*.ipynb"),
                        *(ROOT / "exercises" / "ru").glob("*.ipynb"), *(ROOT / "book" / "ru").glob("*.md"),
                        ROOT / "exercises" / "ru" / "README.md"])


@pytest.mark.parametrize("path", RUSSIAN_FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_russian_page_prose_is_russian(path):
    if path.suffix == ".md":
        prose = path.read_text(encoding="utf-8")
    else:
        nb = json.loads(path.read_text(encoding="utf-8"))
        prose = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
        assert nb["metadata"]["scalelib"]["language"] == "ru"
    # code fences and MyST roles hold code, not prose
    prose = re.sub(r"```.*?```", " ", prose, flags=re.S)
    assert t.latin_share(prose) < 0.5, f"{path.name}: {t.latin_share(prose):.0%} of its prose is in Latin script"
    assert len(prose) > 500


def test_toc_and_config_of_the_russian_edition():
    import yaml

    toc = yaml.safe_load((ROOT / "book" / "ru" / "_toc.yml").read_text(encoding="utf-8"))
    english = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text(encoding="utf-8"))
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    assert files.count("book/api") == 1 and len(files) == sum(len(p["chapters"]) for p in english["parts"])
    assert all(f == "book/api" or "/ru/" in f for f in files)
    for f in files:
        assert any((ROOT / (f + s)).is_file() for s in (".ipynb", ".md")), f
    config = yaml.safe_load((ROOT / "book" / "ru" / "_config.yml").read_text(encoding="utf-8"))
    assert config["sphinx"]["config"]["language"] == "ru" and config["html"]["baseurl"].endswith("/ru/")

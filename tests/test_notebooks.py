"""The course's notebooks: generated exercises in sync, setup cells in sync, and every
chapter's solutions graded correct while its fresh exercises report "not attempted"."""

import re
from pathlib import Path

import pytest
import yaml

import scalelib as sl
from scalelib.course.authoring import course_notebooks, generate, sync_setup_cells
from scalelib.course import capstone
from scalelib.course.grade import grade_notebook, grade_submission, load

ROOT = Path(__file__).resolve().parents[1]
#: Minimum number of exercises per chapter (the course map, shared/COURSE.md).
MINIMUM_EXERCISES = {1: 8, 2: 10, 3: 13, 4: 10, 5: 6, 6: 11, 7: 8, 8: 15, 9: 4, 10: 5, 11: 3, 12: 23}


def _toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())
    return [entry["file"] for part in toc["parts"] for entry in part["chapters"]]


def _chapters() -> list[str]:
    """Notebook names (``ch01_rooflines``) of the chapters on the site."""
    return [f.split("/", 1)[1] for f in _toc_files() if re.match(r"book/ch\d\d_", f)]


def test_every_chapter_on_the_site_lists_its_chapter_exercises_and_solutions():
    files = _toc_files()
    for name in _chapters():
        for folder in ("book", "exercises", "solutions"):
            assert f"{folder}/{name}" in files, f"{folder}/{name} is missing from book/_toc.yml"
            assert (ROOT / folder / f"{name}.ipynb").exists(), f"{folder}/{name}.ipynb does not exist"


def test_exercise_notebooks_are_what_the_generator_makes(monkeypatch):
    monkeypatch.chdir(ROOT)
    drift = generate(check=True)
    assert drift == [], "exercises/ drifted from solutions/; run `make exercises`:\n" + "\n".join(map(str, drift))


def test_every_notebook_starts_with_the_setup_cell_from_the_book_config(monkeypatch):
    monkeypatch.chdir(ROOT)
    drift = sync_setup_cells(course_notebooks("."), check=True)
    assert drift == [], "setup cells drifted; run `make exercises`:\n" + "\n".join(map(str, drift))


@pytest.mark.parametrize("name", _chapters())
def test_chapter_has_at_least_its_minimum_of_exercises(name):
    chapter = int(re.match(r"ch(\d+)_", name).group(1))
    assert len(sl.exercises(chapter)) >= MINIMUM_EXERCISES[chapter]


#: The editions: the English notebooks, and the Russian ones generated from them (book/ru, solutions/ru,
#: exercises/ru; scalelib/course/translate.py), whose feedback the grader gives in Russian.
EDITIONS = {"en": "", "ru": "ru/"}
#: A word every verdict of the edition's language holds ("✅ Exercise 1.1: correct — ...").
VERDICT_WORD = {"en": "Exercise", "ru": "Упражнение"}


@pytest.mark.parametrize("edition", list(EDITIONS))
@pytest.mark.parametrize("name", _chapters())
def test_solutions_answer_every_exercise_correctly(name, edition):
    sub = load(ROOT / "solutions" / f"{EDITIONS[edition]}{name}.ipynb")
    if name.startswith("ch11_"):  # the capstone is worked for the sample learner: that is whose notebook it is
        sub.learner = capstone.SAMPLE_LEARNER
        sub.flags = [f for f in sub.flags if "metadata names the learner" not in f]
    grade = grade_submission(sub, seed=2026)  # function exercises on drawn cases too (a fixed seed: the same tree, the same result)
    assert (grade.status, grade.error, grade.cell_errors, grade.flags) == ("graded", None, (), ())
    chapter = int(re.match(r"ch(\d+)_", name).group(1))
    assert [e.exercise for e in grade.exercises] == list(sl.exercises(chapter))
    wrong = [f"{e.exercise}: {e.message}" for e in grade.exercises if e.status != "correct"]
    assert wrong == []
    in_another_language = [e.message for e in grade.exercises if VERDICT_WORD[edition] not in e.message]
    assert not in_another_language, f"feedback not in the notebook's language ({edition}): {in_another_language[:2]}"


@pytest.mark.parametrize("edition", list(EDITIONS))
@pytest.mark.parametrize("name", _chapters())
def test_fresh_exercises_run_to_the_end_and_report_not_attempted(name, edition):
    grade = grade_notebook(ROOT / "exercises" / f"{EDITIONS[edition]}{name}.ipynb", seed=2026)
    assert (grade.status, grade.error, grade.cell_errors, grade.flags) == ("graded", None, (), ())
    chapter = int(re.match(r"ch(\d+)_", name).group(1))
    assert [e.exercise for e in grade.exercises] == list(sl.exercises(chapter))
    assert {e.status for e in grade.exercises} == {"not attempted"}
    assert all(VERDICT_WORD[edition] in e.message for e in grade.exercises), grade.exercises[0].message


def test_package_metadata_names_the_repository_of_the_book_config():
    import tomllib

    config = yaml.safe_load((ROOT / "book" / "_config.yml").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["urls"]["Repository"] == config["repository"]["url"]

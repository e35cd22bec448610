"""The checker and the grader speak the learner's language (issue 31): scalelib.course.i18n and its catalog.

A learner's language is set_language's, else $SCALELIB_LANG's, else English; a submitted notebook's
metadata (``scalelib.language``) sets the grader's feedback language, and nothing else it says is believed.
Every message template of scalelib/course is extracted from ``_()``/``N_()`` literals into
locales/ru/scalelib/course.po, which must be fully translated and compiled into locale/ru.json.
"""

from __future__ import annotations

import ast
import contextlib
import json
import re
from pathlib import Path

import pytest

from grading_notebooks import write
from scalelib import InvalidValueError
from scalelib.course import check as _check
from scalelib.course import i18n
from scalelib.course.check import Exercise, verdict
from scalelib.course.i18n import LANGUAGE_ENV, set_language

ROOT = Path(__file__).resolve().parents[1]
COURSE_PO = ROOT / "locales" / "ru" / "scalelib" / "course.po"
COMPILED = ROOT / "scalelib" / "course" / "locale" / "ru.json"

#: Test exercises: a byte count (the bits-versus-bytes slip applies to it), with one registered slip; a choice.
EXERCISES = (
    Exercise("98.1", "a byte count", lambda: 1000.0, unit="B", mistakes={3.0: "you counted every byte three times"}),
    Exercise("98.2", "which bound", lambda: "memory", kind="choice", choices=("compute", "memory")),
)


@contextlib.contextmanager
def chapter_98():
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_check, "_REGISTRY", dict(_check._REGISTRY))
        for exercise in EXERCISES:
            _check.register(exercise)
        yield


@pytest.fixture(autouse=True)
def _english_by_default(monkeypatch):
    monkeypatch.delenv(LANGUAGE_ENV, raising=False)
    set_language(None)
    yield
    set_language(None)


_PLACEHOLDER = re.compile(r"\{[^{}]*\}")


def cyrillic_share(text: str) -> float:
    """The share of Cyrillic letters among the letters of `text` outside placeholders, code and quoted values."""
    text = _PLACEHOLDER.sub("", text)
    text = re.sub(r"`[^`]*`|'[^']*'|\b[A-Za-z_]+\([^)]*\)", "", text)  # code, quoted answers, calls
    letters = [c for c in text if c.isalpha()]
    return sum("\u0400" <= c <= "\u04ff" for c in letters) / max(len(letters), 1)


def _four_verdicts():
    with chapter_98():
        return [verdict("98.1", 1000.0).message,   # right
                verdict("98.1", 8000.0).message,   # wrong, with the common slip bits versus bytes
                verdict("98.1", "1000").message,   # malformed: a string
                verdict("98.1", None).message]     # not attempted


# ---------------------------------------------------------------------------
# the language


def test_the_language_is_set_language_then_the_environment_then_english(monkeypatch):
    assert i18n.language() == "en"
    monkeypatch.setenv(LANGUAGE_ENV, "ru")
    assert i18n.language() == "ru"
    set_language("en")
    assert i18n.language() == "en"  # an explicit choice beats the environment
    set_language(None)
    assert i18n.language() == "ru"
    with i18n.using_language("en"):
        assert i18n.language() == "en"
    assert i18n.language() == "ru"


@pytest.mark.parametrize("bad", ["de", "russian", "", 7])
def test_a_language_the_course_does_not_speak_is_refused_naming_the_ones_it_does(bad):
    with pytest.raises(InvalidValueError, match=r"'en', 'ru'"):
        set_language(bad)


def test_a_bad_environment_variable_is_refused_naming_it(monkeypatch):
    monkeypatch.setenv(LANGUAGE_ENV, "fr")
    with pytest.raises(InvalidValueError, match=r"SCALELIB_LANG.*'en', 'ru'.*'fr'"):
        i18n.language()


def test_only_a_language_of_the_course_is_trusted_from_a_notebook():
    assert [i18n.trusted_language(v) for v in ("ru", "en", "RU", "de", None, ["ru"], {"ru": 1})] == \
        ["ru", "en", "en", "en", "en", "en", "en"]


# ---------------------------------------------------------------------------
# verdicts


def test_english_verdicts_are_unchanged():
    assert _four_verdicts() == [
        "✅ Exercise 98.1: correct — 1 kB (within 1% of the reference).",
        "❌ Exercise 98.1: not quite — your answer 8 kB is twice to ten times too large.\n"
        "   Likely cause: a factor of 8: bits versus bytes (a byte is 8 bits).",
        "❌ Exercise 98.1: expected a number in B, got str '1000'; write the number without quotes.",
        "⬜ Exercise 98.1: not attempted.",
    ]


@pytest.mark.parametrize("how", ["set_language", "environment"])
def test_right_wrong_malformed_and_not_attempted_answers_get_russian_feedback(how, monkeypatch):
    if how == "set_language":
        set_language("ru")
    else:
        monkeypatch.setenv(LANGUAGE_ENV, "ru")
    right, wrong, malformed, missing = _four_verdicts()
    assert right.startswith("✅ Упражнение 98.1: верно — 1 kB")
    assert wrong.startswith("❌ Упражнение 98.1: не совсем верно — ваш ответ 8 kB")
    assert "Вероятная причина: в 8 раз: биты вместо байтов (в байте 8 бит)." in wrong  # the hint, in Russian
    assert "str '1000'" in malformed  # what the learner typed, as typed
    assert missing == "⬜ Упражнение 98.1: ответа пока нет."
    for message in (right, wrong, malformed, missing):
        assert cyrillic_share(message) > 0.75, message


def test_a_function_and_a_choice_answer_get_russian_feedback():
    set_language("ru")
    with chapter_98():
        choice = verdict("98.2", "cpu").message
    assert choice == "❌ Упражнение 98.2: 'cpu' не входит в варианты 'compute', 'memory'."
    raised = verdict("1.2", lambda **kw: 1 / 0).message
    assert raised.startswith("❌ Упражнение 1.2: ваша функция выбросила ZeroDivisionError: division by zero при вызове с")
    wrong = verdict("1.2", lambda B, D, F, bytes_per_value: float("inf")).message
    assert "при вызове с B=1, D=8192, F=8192, bytes_per_value=2 результат вашей функции не подходит" in wrong


def test_a_list_answer_says_every_value_once_in_russian():
    set_language("ru")
    with chapter_98(), pytest.MonkeyPatch.context() as mp:
        mp.setitem(_check._REGISTRY, "98.3", Exercise("98.3", "two counts", lambda: [10.0, 20.0]))
        message = verdict("98.3", [100.0, 200.0]).message
    assert message == "❌ Упражнение 98.3: не совсем верно — ваш ответ [100, 200]: все значения больше верного на порядки."


def test_a_registered_slip_is_shown_through_the_answer_keys_catalog(tmp_path, monkeypatch):
    """An answer key's texts are not wrapped: the checker translates them where it shows them, from the
    catalogs compile_messages was given (the integrator's locales/ru/answer_key/chNN.po)."""
    po = tmp_path / "ch98.po"
    po.write_text('msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=utf-8\\n"\n\n'
                  'msgid "you counted every byte three times"\nmsgstr "вы посчитали каждый байт трижды"\n\n'
                  '#, fuzzy\nmsgid "a byte count"\nmsgstr "число байтов"\n', encoding="utf-8")
    monkeypatch.setattr(i18n, "LOCALE_DIR", tmp_path / "locale")
    i18n.compile_messages([COURSE_PO, po], tmp_path / "locale" / "ru.json")
    compiled = json.loads((tmp_path / "locale" / "ru.json").read_text(encoding="utf-8"))
    assert "a byte count" not in compiled  # a fuzzy entry is not compiled
    set_language("ru")
    try:
        with chapter_98():
            message = verdict("98.1", 3000.0).message
    finally:
        i18n._catalog.cache_clear()
    assert message.endswith("Вероятная причина: вы посчитали каждый байт трижды.")


def test_a_jax_judgement_is_in_russian():
    from scalelib.course.check import get_exercise
    from scalelib.course.jax_check import judge_case

    set_language("ru")
    exercise = get_exercise("10.1")
    case = dict(exercise.cases[0])
    status, message, _cause = judge_case(exercise, case, {"result": "none"}, None)
    assert status == "incorrect"
    assert message.startswith("❌ Упражнение 10.1: ваша функция вернула None на сетке ")
    assert cyrillic_share(message) > 0.75, message


def test_the_capstone_brief_is_shown_in_russian_and_its_rows_stay_english():
    from scalelib.course.capstone import brief_for

    brief = brief_for("Ada Lovelace")
    english = brief.rows()
    set_language("ru")
    shown = brief._repr_markdown_()
    assert shown.startswith("**Задание итогового проекта ")
    assert "| Срок | " in shown and "| Слушатель | Ada Lovelace |" in shown
    assert brief.rows() == english and english[0] == ("Learner", "Ada Lovelace")


# ---------------------------------------------------------------------------
# the catalog


def _po():
    return i18n.read_catalog(COURSE_PO)


def test_every_message_of_the_sources_is_in_the_catalog_translated_and_not_fuzzy():
    wanted = {msgid for msgid, _file, _line in i18n.marked_literals()}
    assert len(wanted) > 150
    entries = {m.id: m for m in _po() if m.id}
    assert sorted(wanted - set(entries)) == []  # a new message: run update_catalog and translate it
    assert sorted(set(entries) - wanted) == []  # a message gone from the sources: drop it
    assert [m.id for m in entries.values() if not m.string] == []
    assert [m.id for m in entries.values() if m.fuzzy] == []


def test_updating_the_catalog_from_the_sources_changes_no_byte(tmp_path):
    """What `scalelib translate` would write for these sources is the catalog committed (its locations too)."""
    updated = i18n.update_catalog(i18n.extract_messages(), COURSE_PO)
    assert i18n.write_catalog(updated, tmp_path / "course.po").read_bytes() == COURSE_PO.read_bytes()


def test_no_message_is_passed_to_the_marker_as_anything_but_one_literal():
    assert i18n.unmarked_calls() == []


def test_the_finder_of_unmarked_calls_flags_a_variable_or_a_formatted_text(tmp_path):
    path = tmp_path / "m.py"
    path.write_text('from .i18n import _\nx = "a"\n_(x)\n_(f"b {x}")\n_("c")\n_("d" "e")\n', encoding="utf-8")
    assert [line for _name, line, _src in i18n.unmarked_calls([path])] == [3, 4]
    assert [m for m, _name, _line in i18n.marked_literals([path])] == ["c", "de"]


def test_no_module_that_translates_rebinds_the_translator():
    """`cases, results, _ = calls` inside a function makes `_` local there, and every `_()` in it then fails."""
    bad = []
    for path in i18n.source_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if not any(isinstance(n, ast.ImportFrom) and n.module == "i18n" and any(a.name == "_" for a in n.names)
                   for n in ast.walk(tree)):
            continue
        bad += [f"{path.name}:{n.lineno}" for n in ast.walk(tree)
                if (isinstance(n, ast.Name) and n.id == "_" and not isinstance(n.ctx, ast.Load))
                or (isinstance(n, ast.arg) and n.arg == "_")]
    assert bad == []


def test_each_translation_keeps_the_placeholders_emoji_and_code_of_its_english():
    for m in _po():
        if not m.id:
            continue
        assert i18n.placeholders(m.string) == i18n.placeholders(m.id), m.id
        for kept in ("✅", "❌", "⬜", "`return`", "NotImplementedError", "None", "sl.capstone_brief", "KV", "MFU",
                     "FLOP", "jax.pure_callback", "USD", "**", "|", "#"):
            assert m.id.count(kept) <= m.string.count(kept), (kept, m.id, m.string)
        # the msgstr's words are Russian but for those kept from the English (code, units, established terms)
        kept_words = set(re.findall(r"\w+", _PLACEHOLDER.sub("", m.id)))
        new_words = [w for w in re.findall(r"\w+", _PLACEHOLDER.sub("", m.string)) if w not in kept_words]
        assert all(re.fullmatch(r"[А-Яа-яЁё]+|\d+|kB|MB|GB|TB|I", w) for w in new_words), (m.id, m.string)


def test_the_catalog_addresses_the_learner_one_way():
    """«вы», in lower case inside a sentence; never «ты»; the glossary's terms (обучение, not тренировка)."""
    for m in _po():
        words = re.findall(r"[А-Яа-яЁё]+", m.string)
        assert not {"ты", "тебя", "тебе", "твой", "твоя", "твоё", "твои", "твоего"} & {w.lower() for w in words}, m.string
        assert not [w for w in words[1:] if w in ("Вы", "Ваш", "Ваша", "Ваше", "Вашего", "Вашей", "Вам")], m.string
        assert "трениров" not in m.string.lower(), m.string


def test_the_compiled_catalog_is_up_to_date_with_the_po_files():
    assert COMPILED.read_text(encoding="utf-8") == i18n.compiled_text(i18n.catalog_paths("ru"))


def test_compiling_twice_gives_the_same_bytes(tmp_path):
    one = i18n.compile_messages([COURSE_PO], tmp_path / "a.json").read_bytes()
    two = i18n.compile_messages([COURSE_PO], tmp_path / "b.json").read_bytes()
    assert one == two


def test_updating_keeps_translations_marks_changed_ones_fuzzy_and_adds_new_ones(tmp_path):
    from babel.messages.catalog import Catalog

    po = tmp_path / "course.po"
    old = Catalog(locale="ru")
    old.add("your answer {shown} is not a finite number.", "ваш ответ {shown} не является конечным числом.")
    old.add("value {index} is right", "значение {index} верно")
    i18n.write_catalog(old, po)
    template = Catalog()
    template.add("your answer {shown} is not a finite number.")  # unchanged
    template.add("value {index} is right!")  # changed
    template.add("a brand new message")  # new
    updated = {m.id: m for m in i18n.update_catalog(template, po) if m.id}
    assert updated["your answer {shown} is not a finite number."].string.startswith("ваш ответ")
    assert not updated["your answer {shown} is not a finite number."].fuzzy
    assert updated["value {index} is right!"].fuzzy
    assert not updated["a brand new message"].string and not updated["a brand new message"].fuzzy
    assert "value {index} is right" not in updated
    i18n.write_catalog(i18n.update_catalog(template, po), tmp_path / "again.po")
    compiled = i18n.compiled_messages([tmp_path / "again.po"])
    assert compiled == {"your answer {shown} is not a finite number.": "ваш ответ {shown} не является конечным числом."}


def test_the_compiled_catalog_ships_with_the_package():
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = data["tool"]["setuptools"]["package-data"]["scalelib"]
    assert any(Path("scalelib", p).match(str(COMPILED.relative_to(ROOT))) or
               COMPILED.relative_to(ROOT / "scalelib").match(p) for p in patterns)


# ---------------------------------------------------------------------------
# the grader


def _book(language: str):
    from scalelib.course.grade import ExerciseGrade, Gradebook, Limits, NotebookGrade

    grade = NotebookGrade("subs/ada_ch01.ipynb", "ada", 1, exercises=(
        ExerciseGrade("1.1", "correct", "✅ Упражнение 1.1: верно — 295 FLOP/B.", 1.0, 1.0),
        ExerciseGrade("1.2", "missing", "", 0.0, 1.0)), language=language)
    return Gradebook([grade], 7, Limits())


def test_the_feedback_file_and_gradescope_speak_the_notebooks_language():
    from scalelib.course.gradebook import feedback
    from scalelib.course.gradescope import results

    ru = feedback(_book("ru").grades[0])
    assert ru.startswith("# Глава 1: отзыв для ada\n\nТетрадь `ada_ch01.ipynb`: оценено, баллы: 1/2.")
    assert "| Упражнение | Статус | Баллы |" in ru and "| 1.2 | ⬜ нет проверки | 0/1 |" in ru
    en = feedback(_book("en").grades[0])
    assert en.startswith("# Chapter 1: feedback for ada\n\nNotebook `ada_ch01.ipynb`: graded, 1/2 points.")
    data = results(_book("ru"), 1.0)
    assert [t["name"] for t in data["tests"][:2]] == ["Упражнение 1.1", "Упражнение 1.2"]
    assert data["tests"][1]["output"] == "Упражнение 1.2: ответа нет."
    assert data["tests"][-1]["name"] == "Notes for the instructor"  # the instructor's side stays as it is
    assert data["output"].startswith("Тетрадь ada_ch01.ipynb оценена: баллы — 1 из 2.")
    assert _book("ru").to_csv() == _book("en").to_csv()  # columns and statuses programs read never change


def test_the_language_is_read_from_the_metadata_and_only_a_known_one_is_believed(tmp_path):
    from scalelib.course.grade import load

    for value, expected in (("ru", "ru"), ("de", "en"), ({"lang": "ru"}, "en"), (None, "en")):
        path = write(tmp_path / "ada_ch01.ipynb", "import scalelib as sl")
        nb = json.loads(path.read_text(encoding="utf-8"))
        if value is not None:
            nb["metadata"]["scalelib"]["language"] = value
        path.write_text(json.dumps(nb), encoding="utf-8")
        assert load(path).language == expected, value


def test_a_russian_notebook_is_graded_with_russian_feedback_and_its_kernel_is_told(tmp_path):
    from scalelib.course.grade import Limits, grade_notebook
    from scalelib.course.gradebook import feedback

    path = write(tmp_path / "ada.ipynb", "import os\nimport scalelib as sl",
                 "sl.check('98.1', 8000)",
                 "sl.check('98.2', os.environ.get('SCALELIB_LANG'))",  # what the grading kernel was told
                 "1 / 0", chapter=98)
    nb = json.loads(path.read_text(encoding="utf-8"))
    nb["metadata"]["scalelib"]["language"] = "ru"
    path.write_text(json.dumps(nb), encoding="utf-8")
    with chapter_98():
        g = grade_notebook(path, Limits(cell_timeout_s=20), seed=1)
    assert (g.status, g.language) == ("graded", "ru")
    first, second = g.exercises
    assert first.message.startswith("❌ Упражнение 98.1: не совсем верно — ваш ответ 8 kB")
    assert "биты вместо байтов" in first.message
    assert first.diagnosis == "a factor of 8: bits versus bytes (a byte is 8 bits)"  # the instructor's report: English
    assert second.message == "❌ Упражнение 98.2: 'ru' не входит в варианты 'compute', 'memory'."
    assert i18n.language() == "en"  # the grader's own language is back
    text = feedback(g)
    assert text.startswith("# Глава 98: отзыв для ada")
    assert "ячейка 4 (1 / 0) выбросила ZeroDivisionError: division by zero" in text

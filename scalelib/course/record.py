"""The learner's side of a grading run: answers recorded for the grader, never judged here.

In the kernels ``scalelib grade`` starts (environment variable
:data:`~scalelib.course.check.GRADING_ENV` set to "1"), :func:`scalelib.check` calls
:func:`record`, which displays the answer under :data:`ANSWER_MIME` for the grader
to read back and judge in its own process. Nothing here needs the answer key.
"""

from __future__ import annotations

#: MIME type of a recorded answer in a cell's output.
ANSWER_MIME = "application/vnd.scalelib.answer+json"


def record(exercise_id, answer) -> None:
    """Display `answer` to `exercise_id` for the grader (stub until the grader's side is written)."""
    from IPython.display import display

    display({"text/plain": f"answer to {exercise_id} recorded for grading",
             ANSWER_MIME: {"exercise": str(exercise_id), "kind": "none"}}, raw=True)

"""The course's machinery, apart from the library of formulas (which never imports it).

* :mod:`scalelib.course.check`: the checker learners call as ``sl.check("1.3", answer)``;
* :mod:`scalelib.course.answer_key`: the exercises' registrations, one module per chapter,
  whose references scalelib computes (kept out of the learner's kernel when grading);
* :mod:`scalelib.course.grade`: ``scalelib grade``, which runs submissions in isolated
  kernels and re-checks every answer itself, into a gradebook;
* :mod:`scalelib.course.verdict`: the verdicts and answer decoding every part of the
  machinery shares (its lowest layer);
* :mod:`scalelib.course.gradebook`: the gradebook, rosters, Canvas's CSV, reports and
  feedback; :mod:`scalelib.course.classreport`: the class report of a gradebook;
* :mod:`scalelib.course.sandbox`: each submission's temporary folder, kernel, limits and
  clean-up; :mod:`scalelib.course.record`: the answers a grading kernel records;
* :mod:`scalelib.course.gradescope`: the Gradescope autograder bundle and its runner;
* :mod:`scalelib.course.authoring`: exercise notebooks generated from the solved ones,
  setup cells and Colab links;
* :mod:`scalelib.course.apidoc`: the site's API reference and formula index;
* :mod:`scalelib.course.bookmap`: the site's map of the book's questions to the course's answers;
* :mod:`scalelib.course.i18n`: the language of every message above (English, or Russian from
  ``locales/ru/scalelib/course.po``), chosen by ``set_language``, ``$SCALELIB_LANG`` or, when
  grading, the notebook's metadata;
* :mod:`scalelib.course.cli` (the ``scalelib`` command) and :mod:`scalelib.course.bench`.
"""

"""Reference answers of the exercises, one module per chapter (``ch01.py`` ...).

Each module registers its exercises with :func:`scalelib.course.check.register`; the
references call scalelib, so no answer is ever typed in by hand.
"""

"""IPython startup for the kernels nbval runs (tests/conftest.py points IPYTHONDIR at a copy of this):
after every cell, each figure the cell leaves to be shown is measured as the course site shows it
(its tight bounding box scaled down to the 676 px text column of a 1280 px window, and to the 358 px
column of a 390 px phone window), and a figure whose smallest text is under 9 px in the first, or under
7 px in the second, fails the cell, naming the figure and the size."""


def _install():
    import sys

    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        return
    smallest_allowed_px = 9.0
    smallest_allowed_phone_px = 7.0

    def check_figures():
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        from scalelib._plot import PHONE_COLUMN_PX, _smallest_text_px

        small, small_phone = [], []
        for number in plt.get_fignums():
            fig = plt.figure(number)
            titles = [ax.get_title() for ax in fig.axes if ax.get_title()] or [fig._suptitle.get_text()
                                                                               if fig._suptitle else ""]
            px = _smallest_text_px(fig)
            if px < smallest_allowed_px:
                small.append(f"{titles[0][:60]!r}: {px:.1f} px")
            phone_px = _smallest_text_px(fig, PHONE_COLUMN_PX)
            if phone_px < smallest_allowed_phone_px:
                small_phone.append(f"{titles[0][:60]!r}: {phone_px:.1f} px")
        problems = []
        if small:
            problems.append("figure text under 9 px as the course site shows it (1280 px window): " + "; ".join(small))
        if small_phone:
            problems.append("figure text under 7 px as the course site shows it on a phone (390 px window): "
                            + "; ".join(small_phone))
        if problems:
            raise AssertionError(". ".join(problems))

    # Registered before matplotlib's inline backend registers its own flush, so it sees the cell's
    # figures before they are shown and closed.
    shell.events.register("post_execute", check_figures)


_install()
del _install

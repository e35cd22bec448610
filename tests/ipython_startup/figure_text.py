"""IPython startup for the kernels nbval runs (tests/conftest.py points IPYTHONDIR at a copy of this):
after every cell, each figure the cell leaves to be shown is measured as the course site shows it
(its tight bounding box scaled down to the 676 px text column of a 1280 px window), and a figure whose
smallest text is under 9 px fails the cell, naming the figure and the size."""


def _install():
    import sys

    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        return
    smallest_allowed_px = 9.0

    def check_figures():
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        from scalelib._plot import _smallest_text_px

        small = []
        for number in plt.get_fignums():
            fig = plt.figure(number)
            px = _smallest_text_px(fig)
            if px < smallest_allowed_px:
                titles = [ax.get_title() for ax in fig.axes if ax.get_title()] or [fig._suptitle.get_text()
                                                                                   if fig._suptitle else ""]
                small.append(f"{titles[0][:60]!r}: {px:.1f} px")
        if small:
            raise AssertionError("figure text under 9 px as the course site shows it (1280 px window): "
                                 + "; ".join(small))

    # Registered before matplotlib's inline backend registers its own flush, so it sees the cell's
    # figures before they are shown and closed.
    shell.events.register("post_execute", check_figures)


_install()
del _install

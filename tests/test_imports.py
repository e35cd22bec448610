"""`import scalelib` stays light: numpy only."""

import subprocess
import sys


def test_import_scalelib_does_not_import_jax_matplotlib_or_ipython():
    code = (
        "import sys, scalelib\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in {'jax', 'jaxlib', 'matplotlib', 'IPython', 'nbclient'})\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_public_names_are_all_exported():
    import scalelib

    missing = [name for name in scalelib.__all__ if not hasattr(scalelib, name)]
    assert missing == []

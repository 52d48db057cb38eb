"""The documentation cannot rot: its tested examples run, the front page keeps its promises, and the API
reference lists every public module.

**Tested examples.** A fenced block opened with ```` ```bash title="tested" ```` (or ``python``) in any page under
``docs/`` is run, in the page's order, in a fresh workspace that links the repository's ``configs/``, ``callbacks/``
and ``scripts/`` and, where it exists, the public data folder ``../shared`` beside it (a block that reads
``../shared/data``, itself or through a config it names, is skipped without it, as the tests that read it are). A
bash block holds ``vlbias`` commands only, one per line (``\\`` continues a line, ``#`` starts a comment); each runs
in this process through :func:`vlbias.cli.main`, smaller than written (:data:`SMALLER`: one epoch of a few batches,
BiasWorld with two images per group and activity, unless the command trains on a caption file it names) so that a
page takes seconds, and must exit 0. A python block runs
in a subprocess with the workspace as its working directory.

**The front page.** README.md is at most 200 lines; neither it nor the guides name a commit or an issue; its two
commands are the ones ``.ci/run`` runs (the same install command, then the tests).
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vlbias.cli import main

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SHARED = ROOT.parent / "shared"
README = ROOT / "README.md"

#: A tested block: its language and its body.
EXAMPLE_BLOCK = re.compile(r'^```(bash|python) title="tested"\n(.*?)^```$', re.M | re.S)

_TRAINING = [
    "--trainer.max_epochs", "1",
    "--trainer.limit_train_batches", "2",
    "--trainer.limit_val_batches", "2",
    "--trainer.enable_progress_bar", "false",
    "--trainer.log_every_n_steps", "1",
]  # fmt: skip
#: BiasWorld's size in a training command that trains on BiasWorld (not on a caption file it names).
_WORLD_DATA = ["--data.init_args.n_train", "64", "--data.init_args.eval_per_combination", "2"]
_SMALL_WORLD = ["--biasworld.eval_per_combination", "2"]
#: What each command gets appended in the test (later options win): the same run, smaller.
SMALLER = {
    "fit": _TRAINING,
    "validate": _TRAINING,
    "test": _TRAINING,
    "predict": _TRAINING,
    "measure": _SMALL_WORLD,
    "audit": _SMALL_WORLD,
    "prune": _SMALL_WORLD,
    "debias": [*_SMALL_WORLD, "--suite_options", "{mmbias: {statistics: {n_permutations: 200, n_bootstrap: 100}}}"],
}

#: An abbreviated or full commit hash (7 to 40 hex digits, at least one letter and one digit); a SHA-256 checksum
#: (64 digits) is not one.
COMMIT = re.compile(r"(?<![0-9a-fA-F])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![0-9a-fA-F])")
ISSUE = re.compile(r"\(issues? \d|\(issue\b", re.I)


def example_blocks(page: Path) -> list[tuple[str, str]]:
    """``(language, body)`` of every tested block of ``page``, in order."""
    return EXAMPLE_BLOCK.findall(page.read_text(encoding="utf-8"))


def bash_commands(body: str) -> list[list[str]]:
    """The command lines of a bash block, split as the shell splits them (continuations joined, comments dropped)."""
    commands = [shlex.split(line, comments=True) for line in body.replace("\\\n", " ").splitlines()]
    return [words for words in commands if words]


PAGES = sorted(page for page in DOCS.rglob("*.md") if example_blocks(page))


def _workspace(tmp_path: Path) -> Path:
    work = tmp_path / "vlbias"
    work.mkdir()
    for name in ("configs", "callbacks", "scripts"):
        (work / name).symlink_to(ROOT / name)
    if SHARED.is_dir():
        (tmp_path / "shared").symlink_to(SHARED)
    return work


def _run_vlbias(words: list[str], page: Path) -> None:
    assert words[0] == "vlbias", f"{page.relative_to(ROOT)}: a tested bash block runs vlbias commands only: {words}"
    argv = words[1:] + SMALLER.get(words[1], [])
    if words[1] in ("fit", "validate", "test", "predict") and "--data.init_args.annotations" not in words:
        argv += _WORLD_DATA
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    assert not code, f"{page.relative_to(ROOT)}: `{shlex.join(words)}` exited with {code}"


def reads_shared_data(body: str) -> bool:
    """Whether a tested block reads the public data in ``../shared/data``: itself, or through a config file of the
    repository that one of its commands names (a callbacks file that measures SEAT on it, say)."""
    named = {word for words in bash_commands(body) for word in words if word.endswith((".yaml", ".yml"))}
    configs = [ROOT / name for name in named if (ROOT / name).is_file()]
    return "../shared/data" in body or any("../shared/data" in config.read_text() for config in configs)


def test_a_block_reads_the_shared_data_itself_or_through_a_config_it_names():
    assert reads_shared_data("vlbias measure --suite weat --data ../shared/data/seat")
    assert reads_shared_data(
        "vlbias fit --config configs/experiment/quickstart.yaml \\\n  --config callbacks/embed_suites.yaml"
    )
    assert not reads_shared_data("vlbias fit --config configs/experiment/quickstart.yaml")


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(DOCS)) for page in PAGES])
def test_tested_examples_run_as_written(page, tmp_path, monkeypatch):
    blocks = example_blocks(page)
    if any(reads_shared_data(body) for _, body in blocks) and not (SHARED / "data").is_dir():
        pytest.skip(f"{page.relative_to(ROOT)} reads the public data in {SHARED / 'data'}, which is absent")
    work = _workspace(tmp_path)
    monkeypatch.chdir(work)
    for language, body in blocks:
        if language == "python":
            done = subprocess.run([sys.executable, "-c", body], cwd=work, capture_output=True, text=True)
            assert done.returncode == 0, f"{page.relative_to(ROOT)}: python block failed:\n{body}\n{done.stderr}"
        else:
            for words in bash_commands(body):
                _run_vlbias(words, page)


def test_every_guide_has_a_tested_example():
    guides = [page for page in (DOCS / "guides").glob("*.md") if page.name not in {"index.md", "data.md"}]
    assert guides
    assert [page.name for page in guides if not example_blocks(page)] == []


def test_tested_bash_blocks_run_vlbias_commands_only():
    for page in PAGES:
        for language, body in example_blocks(page):
            if language == "bash":
                for words in bash_commands(body):
                    assert words[0] == "vlbias" and len(words) > 1, (page, words)


def test_readme_is_a_short_front_page():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200


@pytest.mark.parametrize(
    "page",
    [README, DOCS / "index.md", DOCS / "getting-started.md", *sorted((DOCS / "guides").glob("*.md"))],
    ids=lambda page: str(page.relative_to(ROOT)),
)
def test_no_commit_hash_or_issue_number(page):
    text = page.read_text(encoding="utf-8")
    assert COMMIT.findall(text) == []
    assert ISSUE.findall(text) == []


def _readme_commands() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```bash\n(.+?)\n```$", section, re.M)


def test_ci_runs_the_readme_install_and_test_commands():
    quickstart, tests = _readme_commands()
    install, run_quickstart = (part.strip() for part in quickstart.split("&&"))
    same_install, run_tests = (part.strip() for part in tests.split("&&"))
    assert install == same_install == 'pip install -e ".[test]"'
    assert run_quickstart == "vlbias fit --config configs/experiment/quickstart.yaml"
    assert (ROOT / "configs/experiment/quickstart.yaml").is_file()
    ci = [line.strip() for line in (ROOT / ".ci/run").read_text(encoding="utf-8").splitlines()]
    assert install in ci
    assert run_tests in ci
    assert ci.index(install) < ci.index(run_tests)


def _public_modules() -> set[str]:
    modules = set()
    for path in (ROOT / "src").rglob("*.py"):
        parts = list(path.relative_to(ROOT / "src").with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if not any(part.startswith("_") for part in parts):
            modules.add(".".join(parts))
    return modules


def test_the_api_reference_lists_every_public_module():
    pages = sorted((DOCS / "reference/api").glob("*.md"))
    entries = [
        line.removeprefix("::: ").strip()
        for page in pages
        for line in page.read_text().splitlines()
        if line.startswith("::: ")
    ]
    assert len(entries) == len(set(entries))  # each module on one page
    public = _public_modules()
    assert sorted(public - set(entries)) == []  # a new module needs its `::: name` line
    assert sorted(set(entries) - public) == []  # a removed one must go


CHROMIUM = next((path for name in ("chromium", "chromium-browser") if (path := shutil.which(name))), None)


# MkDocs lives in its own environment (docs/requirements.txt says why): $MKDOCS names its executable, else PATH's.
MKDOCS = os.environ.get("MKDOCS") or shutil.which("mkdocs")


@pytest.mark.slow  # the whole site built and rendered in chromium: ~20 s on 2 cores
@pytest.mark.skipif(MKDOCS is None, reason="no MkDocs: pip install -r docs/requirements.txt, or set $MKDOCS")
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install -y chromium)")
def test_the_site_builds_and_renders_in_chromium(tmp_path):
    site = tmp_path / "site"
    build = subprocess.run(
        [MKDOCS, "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    for page, heading in [
        ("getting-started/index.html", "Getting started"),
        ("guides/audit/index.html", "Audit a model"),
    ]:
        shown = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", (site / page).as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert shown.returncode == 0, shown.stderr[-2000:]
        assert re.search(f"<h1[^>]*>{heading}", shown.stdout)  # the page's own heading, as the browser built the DOM
        assert 'class="md-nav' in shown.stdout  # and the site's navigation around it

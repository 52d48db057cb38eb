"""Options checked at the door: every suite option, attack option, model option, ``--seed``, ``--device`` and
``--threads`` of ``vlbias measure`` / ``vlbias prune`` refused by name, with the value and what is accepted,
before any data or model is loaded; a misspelt name gets the closest accepted ones; a run that measured nothing
exits 2 and writes nothing; ``--tiny`` loads no model from the hub."""

import dataclasses
import inspect
import types
import typing
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml

from vlbias import loaded_model as measure_module
from vlbias.errors import ConfigError, InputError
from vlbias.models import registry as model_registry
from vlbias.options import Seed, check_options
from vlbias.results import Results
from vlbias.suites import run as suite_run
from vlbias.suites.options import SUITE_OPTIONS, BiasWorldOptions, check_suite_options
from vlbias.suites.registry import list_suites, suite_class

ROOT = Path(__file__).resolve().parents[2]
# constructor parameters with defaults that the suite's from_biasworld / from_path fill in, never the user
INTERNAL = {
    "mmbias": {"rankings", "skipped"},
    "vlstereoset": {"skipped"},
    "entity_association": {"images", "data_config"},
    "retrieval_bias": {"skipped"},
}
OPTIONS = [(suite, field) for suite, declared in SUITE_OPTIONS.items() for field in dataclasses.fields(declared)]


def _keyword_defaults(function) -> dict[str, object]:
    return {
        name: parameter.default
        for name, parameter in inspect.signature(function).parameters.items()
        if parameter.default is not inspect.Parameter.empty
    }


def test_every_registered_suite_declares_its_options():
    assert sorted(SUITE_OPTIONS) == list_suites()


@pytest.mark.parametrize("suite", sorted(SUITE_OPTIONS))
def test_declarations_match_the_constructors(suite):
    """Each declared option is a keyword of the constructor path it belongs to, with the same default; each
    constructor keyword a user can set is declared."""
    cls, declared = suite_class(suite), SUITE_OPTIONS[suite]
    init = _keyword_defaults(cls.__init__)
    routes = {"from_path": _keyword_defaults(cls.from_path), "from_biasworld": _keyword_defaults(cls.from_biasworld)}
    has_world = "from_biasworld" in vars(cls)
    fields = {field.name: field.default for field in dataclasses.fields(declared)}
    for name, default in fields.items():
        used = [
            keywords
            for route, keywords in routes.items()
            if name not in (declared.BIASWORLD_ONLY if route == "from_path" else declared.PATH_ONLY)
            and (route == "from_path" or has_world)
        ]
        for keywords in used:
            found = keywords.get(name, init.get(name, "<missing>"))
            assert found == default, (
                f"{suite}: option {name!r} declared with default {default!r}, constructor {found!r}"
            )
    settable = set(init) | {name for keywords in routes.values() for name in keywords}
    assert settable - set(fields) - INTERNAL.get(suite, set()) == set()


@pytest.mark.parametrize("config", sorted((ROOT / "configs" / "suite").glob("*.yaml")), ids=lambda path: path.stem)
def test_shipped_suite_configs_pass_the_checks(config):
    loaded = yaml.safe_load(config.read_text())
    biasworld = loaded.get("data", "biasworld") == "biasworld"
    check_suite_options(loaded["suite"], loaded.get("suite_options"), biasworld=biasworld)


def test_biasworld_declaration_matches_biasworld():
    from vlbias.data.biasworld import BiasWorld

    fields = {field.name: field.default for field in dataclasses.fields(BiasWorldOptions)}
    assert fields == _keyword_defaults(BiasWorld.__init__)


# ----------------------------------------------------------------------------- every option, wrong and out of range
def _violating(kind) -> object:
    """A number of restricted type ``kind``'s base type that breaks its first restriction."""
    comparison, reference = kind._restrictions[0]
    whole = issubclass(kind, int) or reference <= 0
    if comparison.__name__ == "ge":
        return reference - 1 if whole else reference / 2
    if comparison.__name__ == "le":
        return reference + 1 if whole else reference * 2
    return reference  # gt, lt


def _out_of_range(kind) -> object | None:
    """A value of the right type outside ``kind``'s range (a restricted number, a union's first ranged member, a
    list of them), or ``None`` when ``kind`` has no range."""
    if getattr(kind, "_restrictions", None) is not None:
        return _violating(kind)
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (list, Sequence):
        inner = _out_of_range(args[0])
        return None if inner is None else [inner]
    ranged = [value for value in map(_out_of_range, args) if value is not None]
    return ranged[0] if ranged else None


def _accepts_text(kind) -> bool:
    """Whether ``kind`` takes a string at the top level (``str``, a ``Literal`` of words, a union with one)."""
    if kind is str or typing.get_origin(kind) is typing.Literal:
        return True
    return typing.get_origin(kind) in (typing.Union, types.UnionType) and any(map(_accepts_text, typing.get_args(kind)))


def _wrong_type(kind) -> object:
    return 12345 if _accepts_text(kind) else "not-a-number"


@pytest.fixture
def no_loading(monkeypatch):
    """Fail the test if a suite is built (its data read) or a model loaded."""
    import vlbias.prune  # noqa: F401  imported first, so that its `from ... import load` binds the real one

    def forbidden(*args, **kwargs):
        raise AssertionError("data or a model was loaded before the options were checked")

    monkeypatch.setattr(suite_run, "suite_class", forbidden)
    monkeypatch.setattr(measure_module, "load", forbidden)
    monkeypatch.setattr(model_registry, "load", forbidden)


def _measure_argv(suite, name, value, tmp_path):
    declared = SUITE_OPTIONS[suite]
    data = "biasworld" if name in declared.BIASWORLD_ONLY else str(tmp_path)
    options = "{" + f"{name}: {value!r}".replace("'", '"') + "}"
    argv = ["measure", "--suite", suite, "--model", "clip", "--tiny", "--data", data]
    return [*argv, "--out", str(tmp_path / "out"), "--suite_options", options]


def _assert_refused(result, name, value):
    code, _, err = result
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert f"`{name}`" in err and str(value).strip("[]") in err, err


@pytest.mark.parametrize(("suite", "field"), OPTIONS, ids=[f"{s}.{f.name}" for s, f in OPTIONS])
def test_every_suite_option_refuses_a_wrong_type_and_an_out_of_range_value(suite, field, tmp_path, run_cli, no_loading):
    kind = typing.get_type_hints(SUITE_OPTIONS[suite])[field.name]
    wrong = _wrong_type(kind)
    _assert_refused(run_cli(_measure_argv(suite, field.name, wrong, tmp_path)), field.name, wrong)
    outside = _out_of_range(kind)
    if outside is not None:
        _assert_refused(run_cli(_measure_argv(suite, field.name, outside, tmp_path)), field.name, outside)


@pytest.mark.parametrize("suite", sorted(SUITE_OPTIONS))
def test_every_default_passes_its_own_check(suite):
    """The checks refuse by type and range, not everything: each declared default is accepted as given."""
    declared = SUITE_OPTIONS[suite]
    for biasworld, other_source in ((True, declared.PATH_ONLY), (False, declared.BIASWORLD_ONLY)):
        defaults = {f.name: f.default for f in dataclasses.fields(declared) if f.name not in other_source}
        as_lists = {name: list(value) if isinstance(value, tuple) else value for name, value in defaults.items()}
        assert check_suite_options(suite, defaults, biasworld=biasworld) == as_lists


def test_the_issue_cases(tmp_path, run_cli, no_loading):
    cases = [
        ("vlstereoset", "temperature", 1e-300),
        ("mmbias", "confidence", "high"),
        ("weat", "n_permutations", "abc"),
        ("counterbias", "min_bias_change", "abc"),
    ]
    for suite, name, value in cases:
        code, _, err = run_cli(_measure_argv(suite, name, value, tmp_path))
        assert code == 2 and f"option `{name}` to be" in err and repr(value) in err, err


def test_misspelt_option_gets_a_suggestion(tmp_path, run_cli, no_loading):
    code, _, err = run_cli(_measure_argv("mmbias", "n_permutation", 100, tmp_path))
    assert code == 2
    assert "Unknown suite 'mmbias' option `n_permutation`; did you mean `n_permutations`?" in err, err


def test_option_of_the_other_data_source_is_refused(tmp_path, run_cli, no_loading):
    argv = ["measure", "--suite", "mmbias", "--model", "clip", "--tiny", "--data", "biasworld", "--out", str(tmp_path)]
    code, _, err = run_cli([*argv, "--suite_options", "{pairs: [[a, b]]}"])
    assert code == 2 and "['pairs'] apply to a data path" in err, err


@pytest.mark.parametrize(
    ("option", "value"),
    [("attack", {"epz": 0.1}), ("attack", {"eps": 2}), ("attack", {"steps": "abc"}), ("attack", {"method": "cw"})],
)
def test_attack_options_are_refused_by_name(option, value, tmp_path, run_cli, monkeypatch):
    forbidden = AssertionError("a model was loaded before the attack options were checked")
    monkeypatch.setattr(measure_module, "load", lambda *a, **k: (_ for _ in ()).throw(forbidden))
    argv = ["measure", "--suite", "counterbias", "--model", "vilt", "--tiny", "--out", str(tmp_path)]
    code, _, err = run_cli([*argv, "--biasworld.eval_per_combination", "1", "--suite_options", f"{{attack: {value}}}"])
    (key,) = value
    assert code == 2 and f"attack option `{key}`" in err, err
    if key == "epz":
        assert "did you mean `eps`?" in err


# ----------------------------------------------------------------------------- seed, device, threads, model options
@pytest.mark.parametrize("command", ["measure", "prune"])
@pytest.mark.parametrize("seed", ["-1", str(2**32)])
def test_seed_out_of_range_is_refused(command, seed, tmp_path, run_cli, no_loading):
    argv = [command, "--model", "clip", "--tiny", "--out", str(tmp_path), "--seed", seed]
    code, _, err = run_cli(argv + (["--suite", "mmbias"] if command == "measure" else []))
    assert code == 2 and "option `--seed` to be an integer v>=0 and v<=4294967295 but got " + seed in err, err


def test_seed_range_is_numpys():
    assert check_options({"seed": 2**32 - 1}, lambda seed=0: None, "x") == {"seed": 2**32 - 1}
    with pytest.raises(ConfigError, match="`seed`"):
        check_options({"seed": 2**32}, _seeded, "option")


def _seeded(seed: Seed = 0) -> None:
    """A declaration with a seed."""


@pytest.mark.parametrize("device", ["potato", "cuda:99"])
def test_unknown_or_absent_device_is_refused_with_the_available_ones(device, tmp_path, run_cli, no_loading):
    argv = ["measure", "--suite", "mmbias", "--model", "clip", "--tiny", "--out", str(tmp_path), "--device", device]
    code, _, err = run_cli(argv)
    assert code == 2 and f"got '{device}'" in err and "devices ['cpu'" in err, err


def test_threads_must_be_positive(tmp_path, run_cli, no_loading):
    argv = ["measure", "--suite", "mmbias", "--model", "clip", "--tiny", "--out", str(tmp_path), "--threads", "0"]
    code, _, err = run_cli(argv)
    assert code == 2 and "`--threads` to be an integer v>0 or null but got 0" in err, err


@pytest.mark.parametrize(
    ("command", "options", "message"),
    [
        ("measure", "{hidden_size: abc}", "model 'clip' option `hidden_size` to be an integer but got 'abc'"),
        ("measure", "{hiden_size: 32}", "does not take option(s) ['hiden_size'] in tiny (did you mean `hidden_size`"),
        ("prune", "{hidden_size: abc}", "model 'clip' option `hidden_size` to be an integer but got 'abc'"),
    ],
)
def test_model_options_are_checked_against_the_adapter(command, options, message, tmp_path, run_cli, no_loading):
    argv = [command, "--model", "clip", "--tiny", "--out", str(tmp_path), "--model_options", options]
    code, _, err = run_cli(argv + (["--suite", "mmbias"] if command == "measure" else []))
    assert code == 2 and message in err, err


# ----------------------------------------------------------------------------- nothing measured; --tiny; --help
def test_a_run_that_measured_nothing_exits_2_and_writes_nothing(tmp_path, run_cli, monkeypatch):
    empty = Results(
        suite="weat", model="bert", checkpoint=None, config={}, seed=0, n_items=0, metrics={},
        skipped=[{"item": "t1", "reason": "no word known"}, {"item": "t2", "reason": "no word known"}],
    )  # fmt: skip
    import vlbias.measure

    monkeypatch.setattr(vlbias.measure, "run_suite", lambda *args, **kwargs: (empty, []))
    argv = ["measure", "--suite", "mmbias", "--model", "clip", "--tiny", "--out", str(tmp_path / "out")]
    code, out, err = run_cli([*argv, "--biasworld.eval_per_combination", "1"])
    assert code == 2 and "Suite 'weat' measured nothing" in err and "2x no word known" in err, err
    assert not list((tmp_path / "out").glob("*.json"))


def test_refuse_empty_lets_a_measured_run_pass():
    measured = Results(suite="mmbias", model="clip", checkpoint=None, config={}, seed=0, n_items=3, metrics={"d": 0.1})
    measure_module.refuse_empty(measured, "biasworld")
    with pytest.raises(InputError, match="0 metrics"):
        measure_module.refuse_empty(dataclasses.replace(measured, metrics={}), "biasworld")


def test_tiny_makes_every_model_of_the_suite_tiny():
    from vlbias.data.biasworld import BiasWorld

    world = BiasWorld(eval_per_combination=1)
    built = suite_run.build_suite("entity_association", world, {}, tiny=True)
    assert built.text_tiny and built.text_checkpoint is None
    with pytest.raises(ConfigError, match="`text_tiny: false` contradicts --tiny"):
        suite_run.build_suite("entity_association", world, {"text_tiny": False}, tiny=True)
    baseline = {"language_baseline": {"model": "bert", "checkpoint": "bert-base-uncased"}}
    built = suite_run.build_suite("counterbias", world, baseline, tiny=True)
    assert built.language_baseline == {"model": "bert", "tiny": True}


def test_entity_association_tiny_runs_offline(tmp_path, run_cli, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    argv = ["measure", "--suite", "entity_association", "--model", "vilt", "--tiny", "--out", str(tmp_path)]
    code, _, err = run_cli([*argv, "--biasworld.eval_per_combination", "1", "--suite_options", "{n_bootstrap: 10}"])
    assert code == 0, err
    assert "Retrying" not in err


def test_measure_help_lists_every_suite_and_option(run_cli):
    code, out, _ = run_cli(["measure", "--help"])
    assert code == 0 and "<function" not in out
    for suite, declared in SUITE_OPTIONS.items():
        assert f"  {suite}: " in out
        for field in dataclasses.fields(declared):
            assert f"    {field.name} " in out, field.name

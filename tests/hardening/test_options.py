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

from vlbias.callbacks import BiasSuiteCallback
from vlbias.data.biasworld_options import BiasWorldOptions
from vlbias.errors import ConfigError, InputError
from vlbias.models import registry as model_registry
from vlbias.options import Seed, StatisticsOptions, check_options
from vlbias.renamed import RENAMED
from vlbias.results import Results
from vlbias.suites import options as declarations
from vlbias.suites import run as suite_run
from vlbias.suites.options import check_suite_options, field_docs, options_help, suite_options_classes
from vlbias.suites.registry import list_suites
from vlbias.workflows import loaded_model as measure_module

ROOT = Path(__file__).resolve().parents[2]
SUITE_OPTIONS = suite_options_classes()
STATISTICS = [field.name for field in dataclasses.fields(StatisticsOptions)]
#: (suite, option): every top-level option, and ``statistics.<field>`` for each statistics field the suite uses
OPTIONS = [
    (suite, field.name)
    for suite, declared in SUITE_OPTIONS.items()
    for field in dataclasses.fields(declared)
    if field.name != "statistics"
] + [
    (suite, f"statistics.{name}")
    for suite, declared in SUITE_OPTIONS.items()
    for name in STATISTICS
    if name not in declared.FIXED_STATISTICS
]


def _keyword_defaults(function) -> dict[str, object]:
    return {
        name: parameter.default
        for name, parameter in inspect.signature(function).parameters.items()
        if parameter.default is not inspect.Parameter.empty
    }


def test_every_registered_suite_declares_its_options():
    declared = [*declarations._DECLARED_HERE, *declarations._DECLARED_APART.names()]
    assert sorted(declared) == list_suites() and len(set(declared)) == len(declared)
    assert all(cls.SUITE == suite for suite, cls in SUITE_OPTIONS.items())


@pytest.mark.parametrize("declared", [*SUITE_OPTIONS.values(), StatisticsOptions, BiasWorldOptions])
def test_every_option_has_help_text(declared):
    """Every field of every suite's options (their nested statistics included) and of BiasWorld's has an ``Args:``
    line: it is the option's text in ``vlbias measure --help``."""
    documented = field_docs(declared)  # a base's fields (RankingOptions') from the base's docstring
    missing = [field.name for field in dataclasses.fields(declared) if not documented.get(field.name, "").strip()]
    assert not missing, f"{declared.__name__}: no Args line for {missing}"
    extra = sorted(set(documented) - {field.name for field in dataclasses.fields(declared)})
    assert not extra, f"{declared.__name__}: Args lines for no field: {extra}"
    if "statistics" in documented:
        assert isinstance(declared.default_statistics(), StatisticsOptions)


@pytest.mark.parametrize("config", sorted((ROOT / "configs" / "suite").glob("*.yaml")), ids=lambda path: path.stem)
def test_shipped_suite_configs_pass_the_checks(config):
    loaded = yaml.safe_load(config.read_text())
    options = check_suite_options(loaded["suite"], loaded.get("suite_options"))
    options.check_source(biasworld=loaded.get("data", "biasworld") == "biasworld")


def test_biasworld_declaration_matches_biasworld():
    from vlbias.data.biasworld import BiasWorld

    fields = {field.name: field.default for field in dataclasses.fields(BiasWorldOptions)}
    assert fields == _keyword_defaults(BiasWorld.__init__)


def test_default_statistics_are_the_metrics_defaults():
    """Each statistics default is written once, in StatisticsOptions: every metric's keyword default of the same
    meaning is it; WEAT samples May et al.'s 99,999 re-partitions (with the observed one, 100,000); every permutation
    test counts exactly up to the metrics' limit."""
    import vlbias.metrics
    import vlbias.metrics.functional
    from vlbias.metrics.functional import permutation

    fields = {"n_bootstrap": "n_bootstrap", "confidence": "confidence", "n_permutations": "n_permutations"}
    fields |= {"method": "interval_method", "interval_method": "interval_method"}
    default = StatisticsOptions()
    checked = 0
    for module in (vlbias.metrics, vlbias.metrics.functional):
        for name in module.__all__:
            function = getattr(module, name)
            for parameter in inspect.signature(function).parameters.values():
                if parameter.name in fields and parameter.default is not inspect.Parameter.empty:
                    assert parameter.default == getattr(default, fields[parameter.name]), (name, parameter.name)
                    checked += 1
    assert checked > 30
    defaults = {suite: declared.default_statistics() for suite, declared in SUITE_OPTIONS.items()}
    assert defaults["weat"].n_permutations == 99_999
    assert {stats.exact_limit for stats in defaults.values()} == {permutation.REPARTITION_EXACT_LIMIT}
    assert {suite: stats.interval_method for suite, stats in defaults.items() if stats.interval_method == "bca"} == {
        "mmbias": "bca",
        "weat": "bca",
        "zero_shot_fairness": "bca",  # BCa from the jackknife of each group
    }


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
    import vlbias.workflows.prune  # noqa: F401  imported first, so that its `from ... import load` binds the real one

    def forbidden(*args, **kwargs):
        raise AssertionError("data or a model was loaded before the options were checked")

    monkeypatch.setattr(suite_run, "suite_class", forbidden)
    monkeypatch.setattr(measure_module, "load", forbidden)
    monkeypatch.setattr(model_registry, "load", forbidden)


def _flow(name: str, value: object) -> str:
    """``{name: value}`` as a flow mapping, a dotted ``name`` nested (``{statistics: {n_bootstrap: 0}}``)."""
    text = repr(value).replace("'", '"')
    for part in reversed(name.split(".")):
        text = f"{{{part}: {text}}}"
    return text


def _measure_argv(suite, name, value, tmp_path):
    declared = SUITE_OPTIONS[suite]
    data = "biasworld" if name in declared.BIASWORLD_ONLY else str(tmp_path)
    argv = ["measure", "--suite", suite, "--model", "clip", "--tiny", "--data", data]
    return [*argv, "--out", str(tmp_path / "out"), "--suite_options", _flow(name, value)]


def _assert_refused(result, name, value):
    code, _, err = result
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert f"`{name.split('.')[-1]}`" in err and str(value).strip("[]") in err, err


def _kind(suite: str, name: str) -> object:
    declared = StatisticsOptions if name.startswith("statistics.") else SUITE_OPTIONS[suite]
    return typing.get_type_hints(declared)[name.split(".")[-1]]


@pytest.mark.parametrize(("suite", "name"), OPTIONS, ids=[f"{s}.{n}" for s, n in OPTIONS])
def test_every_suite_option_refuses_a_wrong_type_and_an_out_of_range_value(suite, name, tmp_path, run_cli, no_loading):
    kind = _kind(suite, name)
    wrong = _wrong_type(kind)
    _assert_refused(run_cli(_measure_argv(suite, name, wrong, tmp_path)), name, wrong)
    outside = _out_of_range(kind)
    if outside is not None:
        _assert_refused(run_cli(_measure_argv(suite, name, outside, tmp_path)), name, outside)


@pytest.mark.parametrize("suite", sorted(SUITE_OPTIONS))
def test_every_default_passes_its_own_check(suite):
    """The checks refuse by type and range, not everything: each declared default is accepted as given, and gives the
    suite's default options (statistics included)."""
    declared = SUITE_OPTIONS[suite]
    defaults = {f.name: f.default for f in dataclasses.fields(declared) if f.name != "statistics"}
    as_lists = {name: list(value) if isinstance(value, tuple) else value for name, value in defaults.items()}
    statistics = dataclasses.asdict(declared.default_statistics())
    assert check_suite_options(suite, {**defaults, "statistics": statistics}) == declared(**as_lists)
    assert check_suite_options(suite, {}) == declared()


def test_the_issue_cases(tmp_path, run_cli, no_loading):
    cases = [
        ("vlstereoset", "temperature", 1e-300),
        ("mmbias", "statistics.confidence", "high"),
        ("weat", "statistics.n_permutations", "abc"),
        ("counterbias", "min_bias_change", "abc"),
    ]
    for suite, name, value in cases:
        code, _, err = run_cli(_measure_argv(suite, name, value, tmp_path))
        field = name.split(".")[-1]
        assert code == 2 and f"option `{field}` to be" in err and repr(value) in err, err


def test_misspelt_option_gets_a_suggestion(tmp_path, run_cli, no_loading):
    code, _, err = run_cli(_measure_argv("mmbias", "n_permutation", 100, tmp_path))
    assert code == 2
    assert "Unknown suite 'mmbias' option `n_permutation`; did you mean `statistics.n_permutations`?" in err, err
    code, _, err = run_cli(_measure_argv("mmbias", "statistics.n_permutation", 100, tmp_path))
    assert code == 2
    assert "Unknown suite 'mmbias' statistics option `n_permutation`; did you mean `n_permutations`?" in err, err


@pytest.mark.parametrize("old", sorted(key for key in RENAMED if key.startswith("suite_options.")))
def test_an_old_flat_key_is_refused_naming_its_new_key(old, tmp_path, run_cli, no_loading):
    """``--suite_options '{n_bootstrap: 100}'`` (before issue 38) is refused with one line naming
    ``statistics.n_bootstrap``; so is the same key of ``vlbias audit --suite_options`` and the callback's ``options``."""
    name = old.removeprefix("suite_options.")
    value = dataclasses.asdict(SUITE_OPTIONS["mmbias"].default_statistics())[name]
    code, _, err = run_cli(_measure_argv("mmbias", name, value, tmp_path))
    new = RENAMED[old].removeprefix("suite_options.")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"Suite 'mmbias' option `{name}` moved to `{new}`: write {_flow(new, value)}." in err, err
    with pytest.raises(ConfigError, match=f"moved to `{new}`"):
        BiasSuiteCallback(suites=[{"suite": "mmbias", "options": {name: value}}])


def test_audit_refuses_an_old_flat_key_naming_its_new_key_before_loading(tmp_path, run_cli, no_loading):
    """Every suite's options are checked before the audit loads the model: one line naming the new key, exit 2."""
    argv = ["audit", "--model", "clip", "--tiny", "--out", str(tmp_path), "--suites", "[mmbias]"]
    code, _, err = run_cli([*argv, "--suite_options", "{mmbias: {n_bootstrap: 50}}"])
    assert code == 2 and "moved to `statistics.n_bootstrap`" in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(
    ("suite", "name", "value"),
    [
        ("vlstereoset", "n_permutations", 100),
        ("entity_association", "exact_limit", 0),
        ("retrieval_bias", "interval_method", "bca"),
        ("counterbias", "interval_method", "bca"),
        ("counterbias", "exact_limit", 5),
    ],
)
def test_a_statistics_field_the_suite_does_not_use_is_refused_by_name(suite, name, value, tmp_path, run_cli):
    code, _, err = run_cli(_measure_argv(suite, f"statistics.{name}", value, tmp_path))
    why = SUITE_OPTIONS[suite].FIXED_STATISTICS[name]
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"Suite {suite!r} takes no statistics option `{name}` other than" in err and why in err, err
    default = getattr(SUITE_OPTIONS[suite].default_statistics(), name)
    assert check_suite_options(suite, {"statistics": {name: default}}).statistics == StatisticsOptions(
        **dataclasses.asdict(SUITE_OPTIONS[suite].default_statistics())
    )  # its own default is accepted


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
        ("measure", "{hidden_size: abc}", "model 'clip' option `hidden_size` to be an integer v>0 but got 'abc'"),
        ("measure", "{hidden_size: 0}", "model 'clip' option `hidden_size` to be an integer v>0 but got 0"),
        ("measure", "{hiden_size: 32}", "does not take option(s) ['hiden_size'] in tiny (did you mean `hidden_size`"),
        ("prune", "{hidden_size: abc}", "model 'clip' option `hidden_size` to be an integer v>0 but got 'abc'"),
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
    import vlbias.workflows.measure

    monkeypatch.setattr(vlbias.workflows.measure, "run_suite", lambda *args, **kwargs: (empty, []))
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
    built = suite_run.build_suite(check_suite_options("entity_association", {}, tiny=True), world)
    assert built.options.text_tiny and built.text_checkpoint is None
    with pytest.raises(ConfigError, match="`text_tiny: false` contradicts --tiny"):
        check_suite_options("entity_association", {"text_tiny": False}, tiny=True)
    baseline = {"language_baseline": {"model": "bert", "checkpoint": "bert-base-uncased"}}
    built = suite_run.build_suite(check_suite_options("counterbias", baseline, tiny=True), world)
    assert built.options.language_baseline == {"model": "bert", "tiny": True}


def test_entity_association_tiny_runs_offline(tmp_path, run_cli, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    argv = ["measure", "--suite", "entity_association", "--model", "vilt", "--tiny", "--out", str(tmp_path)]
    code, _, err = run_cli(
        [*argv, "--biasworld.eval_per_combination", "1", "--suite_options", "{statistics: {n_bootstrap: 10}}"]
    )
    assert code == 0, err
    assert "Retrying" not in err


def test_measure_help_lists_every_suite_and_option(run_cli):
    code, out, _ = run_cli(["measure", "--help"])
    assert code == 0 and "<function" not in out
    for suite, declared in SUITE_OPTIONS.items():
        assert f"  {suite}: " in out
        for name, _ in options_help(declared):
            assert f"    {name} " in out, name
        assert "statistics.n_bootstrap" in dict(options_help(declared))


def test_audit_refuses_options_of_a_suite_it_does_not_run(tmp_path, run_cli, no_loading):
    argv = ["audit", "--model", "clip", "--tiny", "--out", str(tmp_path), "--suites", "[mmbias]"]
    code, _, err = run_cli([*argv, "--suite_options", "{weat: {statistics: {n_bootstrap: 50}}}"])
    assert code == 2 and "`suite_options` given for suite(s) ['weat'] that this audit does not run" in err, err

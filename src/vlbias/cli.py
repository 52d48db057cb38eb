"""The ``vlbias`` console script.

``vlbias fit|validate|test|predict`` are LightningCLI subcommands (``--config`` YAML files from
``configs/``, the last one wins); ``vlbias measure`` runs one suite on one model;
``vlbias models`` lists the model adapters; ``vlbias prune`` removes biased embedding dimensions.
Bad input ends with one ``vlbias: error: ...`` line and exit status 2: every option of ``measure`` and ``prune``
(the suite's, the model's, BiasWorld's, ``--seed``, ``--device``) is checked against its declared type and range
before any data or model is loaded (:mod:`vlbias.options`). ``--help``, ``measure --help`` and ``models`` import no
torch.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import textwrap
import warnings
from argparse import ArgumentError, RawDescriptionHelpFormatter
from collections.abc import Callable, Sequence

from jsonargparse import ActionConfigFile, ActionYesNo, ArgumentParser, DefaultHelpFormatter
from jsonargparse.typing import PositiveInt

from vlbias.errors import ConfigError, VlbiasError
from vlbias.options import Seed, describe


class _HelpFormatter(RawDescriptionHelpFormatter, DefaultHelpFormatter):
    """jsonargparse's help, with the epilog (the suites and their options) laid out as written."""


def _parse(parser: ArgumentParser, argv: Sequence[str]):
    """``parser``'s namespace of ``argv``; a refused argument becomes one :class:`ConfigError` line naming the
    option, the value and what it accepts."""
    try:
        return parser.parse_args(list(argv))
    except ArgumentError as err:
        raise ConfigError(f"{parser.prog}: {_one_line(parser, err)}") from None


def _one_line(parser: ArgumentParser, error: ArgumentError) -> str:
    """jsonargparse's several-line refusal of a value as "Expected option `--key` to be <type> but got <value>";
    other errors (a required option missing) with their lines joined."""
    message = str(error)
    key = re.match(r'Parser key "([^"]+)"', message)
    action = parser._option_string_actions.get(f"--{key.group(1)}") if key else None
    kind = getattr(action, "_typehint", None) or getattr(action, "type", None)
    value = re.search(
        r"Given value: (.*)$|Got value: (.*)$|Not of type \w+: (.+?) does not conform|Not of type \w+: [^:\n]*: (.+)$",
        message,
        re.M,
    )
    if kind is None or value is None:
        return " ".join(message.split())
    got = next(group for group in value.groups() if group is not None)
    return f"Expected option `--{key.group(1)}` to be {describe(kind)} but got {got}."


def _model_and_data_arguments(parser: ArgumentParser, data_help: str | None) -> None:
    """``--config`` and the options every command that loads one model shares, with ``--data`` unless
    ``data_help`` is ``None`` (BiasWorld's options declared in :mod:`vlbias.suites.options`)."""
    from vlbias.suites.options import BiasWorldOptions

    parser.add_argument("--config", action=ActionConfigFile, help="YAML with any of these options.")
    parser.add_argument("--model", type=str, required=True, help="Model adapter name (vlbias models).")
    parser.add_argument("--checkpoint", type=str | None, default=None, help="Hub id or local path of the weights.")
    parser.add_argument(
        "--model_options",
        type=dict,
        default={},
        help="The adapter's own loading options, e.g. '{region_features: feats.tsv}'; checked against its "
        "from_pretrained (or tiny) keyword arguments.",
    )
    parser.add_argument(
        "--tiny",
        action=ActionYesNo,
        default=False,
        help="Use a tiny random model instead of weights (and tiny models for every model a suite loads).",
    )
    if data_help is not None:
        parser.add_argument("--data", type=str, default="biasworld", help=data_help)
    parser.add_argument("--seed", type=Seed, default=0, help="Seed of everything random (recorded in the results).")
    parser.add_class_arguments(BiasWorldOptions, "biasworld", as_group=True, skip={"n_train"})


def _suites_help() -> str:
    """The epilog of ``vlbias measure --help``: every suite and its options (:mod:`vlbias.suites.options`)."""
    from vlbias.suites.options import SUITE_OPTIONS, options_help

    lines = ["suites and their --suite_options (e.g. --suite_options '{n_permutations: 2000, confidence: 0.9}'):"]
    for suite, declaration in SUITE_OPTIONS.items():
        lines.append(f"  {suite}: {declaration.__doc__.splitlines()[0].replace('``', '')}")
        for name, text in options_help(declaration):
            lines.append(textwrap.fill(text, 116, initial_indent=f"    {name:<22} ", subsequent_indent=" " * 27))
    return "\n".join(lines)


def measure_parser() -> ArgumentParser:
    from vlbias.suites.options import SUITE_OPTIONS

    parser = ArgumentParser(
        prog="vlbias measure",
        description="Run one bias suite on one model; write <out>/<suite>.json and <out>/<suite>.items.parquet.",
        epilog=_suites_help(),
        formatter_class=_HelpFormatter,
        exit_on_error=False,
    )
    parser.add_argument("--suite", type=str, required=True, help=f"Suite name: {', '.join(SUITE_OPTIONS)}.")
    _model_and_data_arguments(
        parser, "Data directory or file in the suite's public format, or 'biasworld' for the synthetic world."
    )
    parser.add_argument("--out", type=str, required=True, help="Output directory.")
    parser.add_argument(
        "--device",
        type=str | None,
        default=None,
        help="Torch device (cpu, cuda:<i>, mps; checked before loading); default CUDA if present, else CPU.",
    )
    parser.add_argument(
        "--suite_options",
        type=dict,
        default={},
        help="The suite's options (listed below per suite), e.g. '{n_permutations: 2000}'.",
    )
    parser.add_argument(
        "--threads",
        type=PositiveInt | None,
        default=None,
        help="Torch threads; default: OMP_NUM_THREADS if set, else the usable CPUs / processes on the node.",
    )
    return parser


def _measure(argv: Sequence[str]) -> None:
    args = _parse(measure_parser(), argv)  # --help answers here, before torch is imported
    from vlbias.measure import measure
    from vlbias.results import read_results

    path = measure(
        suite=args.suite,
        model=args.model,
        data=args.data,
        out=args.out,
        checkpoint=args.checkpoint,
        tiny=args.tiny,
        model_options=args.model_options,
        seed=args.seed,
        device=args.device,
        suite_options=args.suite_options,
        biasworld=dict(vars(args.biasworld)),
        threads=args.threads,
    )
    results = read_results(path)
    for metric, value in results.metrics.items():
        extra = ""
        if metric in results.intervals:
            low, high = results.intervals[metric]
            extra += f" [{_number(low)}, {_number(high)}]"
        if metric in results.p_values:
            extra += f" p={_number(results.p_values[metric], '.4f')}"
        print(f"{results.suite}/{metric} = {_number(value)}{extra}")
    print(f"{results.n_items} items measured, {len(results.skipped)} skipped (reasons in {path.name})")
    print(f"wrote {path}")


def prune_parser() -> ArgumentParser:
    from vlbias.mitigation.pruning import OBJECTIVES, STRATEGIES

    parser = ArgumentParser(
        prog="vlbias prune",
        description="MI-guided embedding-dimension pruning (MMBias Sec. 6, Algorithm 1) of one EMBED model; writes "
        "<out>/model (a 'pruned' checkpoint), <out>/clip (CLIP only), prune.json, tradeoff.csv and tradeoff.png.",
        exit_on_error=False,
    )
    _model_and_data_arguments(parser, "MMBias data directory, or 'biasworld'.")
    parser.add_argument("--split", type=str | None, default=None, help="BiasWorld split to prune on (default test).")
    parser.add_argument("--n_dims", type=int | None, default=None, help="N, the dimensions to remove (or --fraction).")
    parser.add_argument("--fraction", type=float | None, default=None, help="N as a fraction of D, e.g. 0.1.")
    parser.add_argument("--strategy", type=str, default="ranked", help=f"One of {', '.join(STRATEGIES)}.")
    parser.add_argument("--theta", type=float | None, default=None, help="Θ: candidates have MI below it.")
    parser.add_argument("--theta_quantile", type=float | None, default=None, help="Θ as a quantile of the MI.")
    parser.add_argument("--objective", type=str, default="mean_abs", help=f"One of {', '.join(OBJECTIVES)}.")
    parser.add_argument("--max_dims", type=int | None, default=None, help="Trade-off curve's last N (25%% of D).")
    parser.add_argument("--step", type=int, default=1, help="Trade-off curve's step in N.")
    parser.add_argument("--batch_size", type=int, default=64, help="Images per predict batch.")
    parser.add_argument("--accelerator", type=str, default="cpu", help="Lightning accelerator (cpu, gpu, auto).")
    parser.add_argument("--devices", type=int, default=1, help="Lightning devices.")
    parser.add_argument("--out", type=str, required=True, help="Output directory.")
    return parser


def _prune(argv: Sequence[str]) -> None:
    args = _parse(prune_parser(), argv)
    from vlbias.models.registry import check_model_options
    from vlbias.prune import prune

    check_model_options(args.model, args.model_options, args.tiny)
    outcome = prune(
        model=args.model,
        data=args.data,
        out=args.out,
        checkpoint=args.checkpoint,
        tiny=args.tiny,
        model_options=args.model_options,
        n_dims=args.n_dims,
        fraction=args.fraction,
        strategy=args.strategy,
        theta=args.theta,
        theta_quantile=args.theta_quantile,
        objective=args.objective,
        seed=args.seed,
        max_dims=args.max_dims,
        step=args.step,
        split=args.split,
        batch_size=args.batch_size,
        accelerator=args.accelerator,
        devices=args.devices,
        biasworld=dict(vars(args.biasworld)),
    )
    summary = outcome["summary"]
    print(
        f"removed {summary['n_remove']} of {summary['embedding_dim']} dimensions ({summary['strategy']}): "
        f"{summary['removed']}"
    )
    for test, before in summary["effect_sizes_before"].items():
        print(f"{test}: d {_number(before)} -> {_number(summary['effect_sizes_after'][test])}")
    accuracy = summary["zero_shot_accuracy"]
    print(f"zero-shot accuracy {accuracy['before']:.3f} -> {accuracy['after']:.3f}")
    print(f"wrote {args.out}")


def _number(value: float | None, spec: str = "+.3f") -> str:
    """A result number for the console; ``None`` (a non-finite value in the JSON) prints as nan."""
    return "nan" if value is None else format(value, spec)


def _report(argv: Sequence[str]) -> None:
    from vlbias.errors import SchemaError
    from vlbias.report import build_report

    parser = ArgumentParser(
        prog="vlbias report",
        description="Write <out>/index.html and <out>/report.md, with PNG figures beside them, from results files "
        "(<suite>.json + items), metrics.csv, prune.json and tradeoff.csv found under the inputs. Recomputes nothing.",
        exit_on_error=True,
    )
    parser.add_argument("inputs", type=str, nargs="+", help="Run or results directories (or results files).")
    parser.add_argument("--out", type=str, required=True, help="Output directory.")
    parser.add_argument(
        "--accuracy", type=str, nargs="+", default=None, help="Accuracy columns to plot bias against, e.g. "
        "val/activity_accuracy; default every column naming accuracy (not train/).",
    )  # fmt: skip
    parser.add_argument("--bias", type=str, nargs="+", default=None, help="Bias columns of those plots.")
    args = parser.parse_args(list(argv))
    report = build_report(args.inputs, args.out, accuracy=args.accuracy, bias=args.bias)
    print(f"wrote {report.html}, {report.markdown} and {len(report.images)} figures")
    if report.problems:
        reasons = "; ".join(f"{path}: {reason}" for path, reason in report.problems)
        raise SchemaError(f"{len(report.problems)} input file(s) could not be read and are left out: {reasons}")


def audit_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="vlbias audit",
        description="Run every suite the model's capabilities allow on every data set under --data_root and on "
        "BiasWorld; write <out>/results/<suite>-<dataset>/, <out>/audit.json (what ran, what did not and why) and "
        "<out>/report. Quick settings (1,000 permutations, 200 bootstrap resamples) unless --full.",
        exit_on_error=False,
    )
    _model_and_data_arguments(parser, None)
    parser.add_argument("--data_root", type=str | None, default=None, help="Folder of public data sets to look in.")
    parser.add_argument("--out", type=str, required=True, help="Output directory.")
    parser.add_argument("--suites", type=list[str] | None, default=None, help="Only these suites (default all).")
    parser.add_argument("--full", action=ActionYesNo, default=False, help="The suites' own (the papers') settings.")
    parser.add_argument(
        "--suite_options", type=dict, default={}, help="Per-suite options, e.g. '{mmbias: {n_permutations: 500}}'."
    )
    parser.add_argument("--device", type=str | None, default=None, help="Torch device; default CUDA if present.")
    parser.add_argument("--threads", type=PositiveInt | None, default=None, help="Torch threads (as for measure).")
    return parser


def _audit(argv: Sequence[str]) -> None:
    args = _parse(audit_parser(), argv)
    from vlbias.audit import audit

    path = audit(
        model=args.model,
        out=args.out,
        checkpoint=args.checkpoint,
        tiny=args.tiny,
        model_options=args.model_options,
        data_root=args.data_root,
        suites=args.suites,
        full=args.full,
        suite_options=args.suite_options,
        seed=args.seed,
        device=args.device,
        biasworld=dict(vars(args.biasworld)),
        threads=args.threads,
    )
    for entry in json.loads(path.read_text())["entries"]:
        outcome = entry["results"] or entry["reason"]
        print(f"{entry['suite']:<20} {entry['dataset']:<16} {entry['status']:<15} {outcome}")
    print(f"wrote {path} and {path.parent / 'report' / 'index.html'}")


def _models(argv: Sequence[str]) -> None:
    from vlbias.models.catalog import describe_models

    parser = ArgumentParser(prog="vlbias models", description="List the model adapters and their capabilities.")
    parser.add_argument("--json", action=ActionYesNo, default=False, help="Print JSON instead of a table.")
    args = parser.parse_args(list(argv))
    models = describe_models()
    if args.json:
        print(json.dumps(models))
        return
    for model in models:
        print(f"{model['name']:<14} {', '.join(model['capabilities'])}")


def _lightning(argv: Sequence[str]) -> None:
    """LightningCLI on ``argv``, without the three messages it prints on every run that say nothing about it: the
    warning that ``args`` and ``sys.argv`` are both given (this entry point passes its own argv on purpose) and the
    tips to install litlogger and litmodels."""
    from lightning.pytorch import LightningDataModule, LightningModule

    from vlbias.lightning_cli import VlbiasCLI

    for name in ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero"):
        logging.getLogger(name).addFilter(_drop_lightning_tips)
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r"LightningCLI's args parameter is intended to run from within Python"
        )
        VlbiasCLI(
            LightningModule,
            LightningDataModule,
            subclass_mode_model=True,
            subclass_mode_data=True,
            args=list(argv),
            save_config_kwargs={"overwrite": True},
        )


def _drop_lightning_tips(record: logging.LogRecord) -> bool:
    """A logging filter: drop Lightning's "💡 Tip: try installing litlogger/litmodels" lines."""
    return not record.getMessage().startswith("💡 Tip:")


def _slurm(argv: Sequence[str]) -> None:
    from vlbias.launch.cli import main as slurm_main

    slurm_main(argv)


def _vlbias_cause(error: BaseException) -> VlbiasError | None:
    """The :class:`VlbiasError` behind ``error``, if any: jsonargparse wraps exceptions raised
    while it instantiates classes from a config (e.g. a ``ConfigError`` from a datamodule)."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, VlbiasError):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


# subcommand -> (one line of help, handler taking the arguments after the subcommand, or all of argv for Lightning)
SUBCOMMANDS: dict[str, tuple[str, Callable[[Sequence[str]], None]]] = {
    "fit": ("LightningCLI: train from YAML configs (--config FILE ...)", lambda argv: _lightning(["fit", *argv])),
    "validate": (
        "LightningCLI: evaluate a checkpoint (--ckpt_path); bias callbacks measure it",
        lambda argv: _lightning(["validate", *argv]),
    ),
    "test": ("LightningCLI: test a checkpoint on the test split", lambda argv: _lightning(["test", *argv])),
    "predict": ("LightningCLI: predict with a checkpoint", lambda argv: _lightning(["predict", *argv])),
    "measure": ("run one bias suite on one model and write results", _measure),
    "models": ("list the model adapters and their capabilities", _models),
    "prune": ("remove the embedding dimensions that carry bias (MMBias Algorithm 1) and write a pruned model", _prune),
    "report": ("write an HTML + Markdown report with figures from results files and logs", _report),
    "audit": ("run every suite a model allows on every data set found, then write the report", _audit),
    "slurm": ("submit runs and sweeps to Slurm (requeue-safe) and report their status", _slurm),
}


def usage() -> str:
    """The top-level help: every subcommand of :data:`SUBCOMMANDS` with its line of help."""
    lines = [f"  {name:<12} {help_}" for name, (help_, _) in SUBCOMMANDS.items()]
    return (
        f"usage: vlbias {{{','.join(SUBCOMMANDS)}}} ...\n\n"
        "Measure and mitigate social bias in vision-language models.\n\nsubcommands:\n"
        + "\n".join(lines)
        + "\n\nExample: vlbias fit --config configs/experiment/quickstart.yaml\n"
        "Run `vlbias <subcommand> --help` for the options of each."
    )


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv else None
    try:
        if command in (None, "-h", "--help"):
            print(usage())
        elif command in SUBCOMMANDS:
            SUBCOMMANDS[command][1](argv[1:])
        else:
            print(f"{usage()}\n\nvlbias: error: unknown subcommand {command!r}.", file=sys.stderr)
            sys.exit(2)
    except KeyboardInterrupt:  # Ctrl-C: results are written atomically, so the old ones stand
        print("vlbias: interrupted; results already written are intact.", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:  # output piped into a reader that stopped early (e.g. `| head`)
        sys.stderr.close()
        sys.exit(0)
    except OSError as err:
        if err.filename is None:
            raise
        print(f"vlbias: error: cannot write or read {str(err.filename)!r}: {err.strerror}.", file=sys.stderr)
        sys.exit(2)
    except Exception as err:
        cause = _vlbias_cause(err)
        if cause is None:
            raise
        print(f"vlbias: error: {cause}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()

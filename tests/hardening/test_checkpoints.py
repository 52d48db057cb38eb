"""Bad checkpoints given to ``vlbias measure``: a corrupt JSON or tokenizer file, a checkpoint of another model
family, a local path that does not exist. Each ends in one ``vlbias: error:`` line (exit 2) naming the
checkpoint, the file and what was expected, before any library reads the checkpoint, and the results
directory keeps its old result. ``trust_remote_code`` is never turned on."""

import re
from pathlib import Path

import pytest

import vlbias
from vlbias.errors import InputError
from vlbias.models.families.clip import CLIPAdapter
from vlbias.models.loading import check_checkpoint
from vlbias.models.registry import load
from vlbias.results import Results, write_results

MEASURE = ["measure", "--suite", "mmbias", "--data", "biasworld", "--biasworld.eval_per_combination", "2"]


@pytest.fixture(scope="module")
def clip_checkpoint(tmp_path_factory):
    directory = tmp_path_factory.mktemp("clip")
    CLIPAdapter.tiny().save_pretrained(directory)
    return directory


@pytest.fixture
def broken(clip_checkpoint, tmp_path):
    """``broken(file, content)``: a copy of the tiny CLIP checkpoint with ``file`` overwritten."""

    def make(file: str, content: bytes) -> Path:
        copy = tmp_path / "checkpoint"
        copy.mkdir()
        for path in clip_checkpoint.iterdir():
            (copy / path.name).write_bytes(path.read_bytes())
        (copy / file).write_bytes(content)
        return copy

    return make


@pytest.fixture
def old_result(tmp_path):
    """A results directory holding a result, and a snapshot of its files to compare with after a refusal."""
    out = tmp_path / "out"
    results = Results(suite="mmbias", model="clip", checkpoint=None, config={}, seed=1, n_items=1, metrics={"m": 0.5})
    write_results(out, results, [{"row": 1}])
    return out, {p.name: p.read_bytes() for p in out.iterdir()}


def assert_refused(run_cli, argv, old_result, *fragments):
    out, before = old_result
    code, _, err = run_cli([*argv, "--out", str(out)])
    assert code == 2, err
    *before_error, line = err.strip().splitlines()
    assert "Traceback" not in err and line.startswith("vlbias: error: "), err
    assert all(text.startswith("Loading weights") for text in before_error), err  # transformers' progress bar only
    for fragment in fragments:
        assert fragment in line, err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


@pytest.mark.parametrize(
    ("file", "content", "expected"),
    [
        ("preprocessor_config.json", b'{"crop_size": {"height": 6', "is not valid JSON"),
        ("config.json", b"{ half", "is not valid JSON"),
        ("tokenizer_config.json", b"\xff\xfe not utf-8", "is not valid JSON"),
        ("vocab.txt", b"[PAD]\n\xff\xfe\n", "is not UTF-8 text (byte 6)"),
        ("config.json", b"[1, 2]", "holds a list; expected a JSON object"),
    ],
)
def test_a_corrupt_file_is_named(run_cli, broken, old_result, file, content, expected):
    checkpoint = broken(file, content)
    argv = [*MEASURE, "--model", "clip", "--checkpoint", str(checkpoint)]
    assert_refused(run_cli, argv, old_result, repr(str(checkpoint)), repr(str(checkpoint / file)), expected)


def test_a_preprocessor_field_of_another_shape_is_named(run_cli, broken, old_result):
    checkpoint = broken("preprocessor_config.json", b'{"crop_size": {"height": 64}, "image_mean": "grey"}')
    argv = [*MEASURE, "--model", "clip", "--checkpoint", str(checkpoint)]
    file = repr(str(checkpoint / "preprocessor_config.json"))
    assert_refused(
        run_cli, argv, old_result, f"{file}: field 'image_mean' is 'grey'; expected three (positive) numbers"
    )


def test_a_size_written_as_a_number_loads(broken):
    """Older image-processor configs (e.g. openai/clip-vit-base-patch32's) write ``"crop_size": 224``."""
    checkpoint = broken("preprocessor_config.json", b'{"crop_size": 48, "size": 48}')
    assert load("clip", checkpoint=checkpoint, device="cpu").transform.image_size == 48


def test_a_checkpoint_of_another_family_is_refused_by_its_model_type(run_cli, clip_checkpoint, old_result):
    argv = [*MEASURE, "--model", "blip", "--checkpoint", str(clip_checkpoint)]
    assert_refused(
        run_cli,
        argv,
        old_result,
        f"Checkpoint {str(clip_checkpoint)!r} is a 'clip' model",
        repr(str(clip_checkpoint / "config.json")),
        "model 'blip' loads model_type 'blip'",
    )


@pytest.mark.parametrize("model", ["blip", "bert", "sentence_bert", "vilt", "visualbert", "lxmert", "flava"])
def test_every_transformers_adapter_checks_the_family(clip_checkpoint, model):
    with pytest.raises(InputError, match=f"is a 'clip' model .* but model '{model}' loads model_type"):
        load(model, checkpoint=clip_checkpoint, device="cpu")


def test_a_directory_without_config_is_named(tmp_path):
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(InputError, match=r"has no config\.json; expected a save_pretrained directory of a model_type"):
        load("clip", checkpoint=tmp_path, device="cpu")


@pytest.mark.parametrize("given", ["./no-such-checkpoint", "~/no-such-checkpoint", "/no/such/checkpoint", "a/b/c"])
def test_a_missing_local_path_is_a_missing_path_not_a_hub_id(run_cli, old_result, given):
    argv = [*MEASURE, "--model", "clip", "--checkpoint", given]
    assert_refused(run_cli, argv, old_result, f"Checkpoint {given!r} for model 'clip' does not exist", "resolved:")


@pytest.mark.parametrize("model", ["albef", "pruned"])
def test_adapters_with_their_own_files_check_the_path_and_their_json(tmp_path, model):
    with pytest.raises(InputError, match=f"'./missing' for model '{model}' does not exist"):
        load(model, checkpoint="./missing", device="cpu")
    (tmp_path / "config.json").write_text("{ half")
    with pytest.raises(InputError, match=r"config\.json' is not valid JSON"):
        load(model, checkpoint=tmp_path, device="cpu")


def test_hub_ids_and_urls_are_left_to_the_loader():
    for source in ("openai/clip-vit-base-patch32", "bert-base-uncased", "https://example.org/ALBEF.pth"):
        check_checkpoint(source, "clip", {"clip"})  # nothing local to check: no error


def test_trust_remote_code_is_never_turned_on():
    """No code of the package passes ``trust_remote_code`` (transformers' default is off)."""
    package = Path(vlbias.__file__).parent
    uses = [
        f"{path.relative_to(package)}:{number}"
        for path in sorted(package.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"trust_remote_code\s*=\s*(?!False)", line)
    ]
    assert uses == []

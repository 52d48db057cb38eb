"""Chat VLMs (capability ANSWER), every registered family at transformers' test dimensions: the protocol checks
(shapes, determinism, batch invariance, equality with the model called directly, a save -> load round trip), the
first-token probabilities and generation against teacher-forced forwards, loading, and refusals."""

import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image
from transformers import AutoModelForImageTextToText, AutoProcessor

from vlbias.errors import ConfigError, InputError
from vlbias.models.base import Capability
from vlbias.models.catalog import adapter_class, list_models, models_with
from vlbias.models.registry import load

FAMILIES = [name for name in list_models() if Capability.ANSWER in adapter_class(name).capabilities]
PROMPTS = ["What is the person doing?", "Who is it?", "Is this a doctor? Answer yes or no."]
OPTIONS = [["cooking", "sewing a dress", "x"], ["a man", "a woman", "cannot be determined"], ["yes", "no", "?"]]


def images(n: int = 3) -> list[Image.Image]:
    """``n`` random images of different sizes (each processor resizes them its own way)."""
    return [
        Image.fromarray(np.random.default_rng(i).integers(0, 256, (20 + 7 * i, 24 + 3 * i, 3), dtype=np.uint8))
        for i in range(n)
    ]


@pytest.fixture(scope="module", params=FAMILIES)
def model(request):
    return load(request.param, tiny=True, device="cpu")


def test_the_six_families_of_the_issue_are_registered_with_answer():
    assert set(FAMILIES) == {"llava", "qwen2_vl", "qwen2_5_vl", "paligemma", "gemma3", "idefics3", "smolvlm",
                             "internvl"}  # fmt: skip
    assert set(FAMILIES) <= set(models_with("answer"))


def test_scores_have_the_shapes_and_parts_they_claim(model):
    scores = model.score_options(images(), PROMPTS, OPTIONS)
    assert scores.log_prob.shape == scores.mean_log_prob.shape == scores.n_tokens.shape == (3, 3)
    assert scores.log_prob.dtype == torch.float32 and torch.isfinite(scores.log_prob).all()
    assert (scores.log_prob < 0).all()
    expected_counts = [
        [len(model.tokenizer(o, add_special_tokens=False)["input_ids"]) for o in item] for item in OPTIONS
    ]
    assert scores.n_tokens.tolist() == expected_counts
    torch.testing.assert_close(scores.mean_log_prob, scores.log_prob / scores.n_tokens, rtol=0, atol=0)


def test_the_cached_prompt_scores_equal_one_unpadded_forward_per_option_padded_on_either_side(model):
    """Exactness: the prompt encoded once (padded, left or right, among prompts of other lengths and images of other
    sizes), its cache repeated for options of 1 to 20 tokens, equals prompt + option in one unpadded forward each;
    and the two paddings give the same scores."""
    direct = model.score_options_directly(images(), PROMPTS, OPTIONS)
    scores = {}
    if model.family.left_padding_only:  # Gemma 3's sliding windows
        with pytest.raises(ConfigError, match=f"Model '{model.name}' pads prompts on the left only: its sliding"):
            load(model.name, tiny=True, device="cpu", options={"padding_side": "right"})
        torch.testing.assert_close(model.score_options(images(), PROMPTS, OPTIONS).log_prob, direct.log_prob,
                                   rtol=0, atol=1e-5)  # fmt: skip
        return
    for side in ("left", "right"):
        model.padding_side = side
        scores[side] = model.score_options(images(), PROMPTS, OPTIONS)
        torch.testing.assert_close(scores[side].log_prob, direct.log_prob, rtol=0, atol=1e-5)
        assert scores[side].n_tokens.tolist() == direct.n_tokens.tolist()
        assert model.prompt_inputs(images(), PROMPTS)["attention_mask"][:, -1 if side == "left" else 0].all()
    model.padding_side = "left"
    torch.testing.assert_close(scores["left"].log_prob, scores["right"].log_prob, rtol=0, atol=1e-5)
    right = load(model.name, tiny=True, device="cpu", options={"padding_side": "right"})
    letters = ["A", "B", "C"]
    torch.testing.assert_close(right.first_token_probs(images(), PROMPTS, letters),
                               model.first_token_probs(images(), PROMPTS, letters), rtol=1e-4, atol=1e-7)  # fmt: skip


def test_an_item_scores_the_same_alone_as_in_a_batch(model):
    batched = model.score_options(images(), PROMPTS, OPTIONS).log_prob
    for i, image in enumerate(images()):
        alone = model.score_options([image], PROMPTS[i : i + 1], OPTIONS[i : i + 1]).log_prob
        torch.testing.assert_close(batched[i : i + 1], alone, rtol=0, atol=1e-4)


def test_two_tiny_instances_of_one_seed_score_identically(model):
    twin = load(model.name, tiny=True, device="cpu")
    first = model.score_options(images(), PROMPTS, OPTIONS).log_prob
    torch.testing.assert_close(twin.score_options(images(), PROMPTS, OPTIONS).log_prob, first, rtol=0, atol=0)
    torch.testing.assert_close(model.score_options(images(), PROMPTS, OPTIONS).log_prob, first, rtol=0, atol=0)


def test_first_token_probabilities_are_those_of_one_token_answers(model):
    """``first_token_probs`` of letters = exp of the teacher-forced score of each letter as a whole answer."""
    letters = ["A", "B", "C"]
    probs = model.first_token_probs(images(), PROMPTS, letters)
    scored = model.score_options(images(), PROMPTS, [letters] * 3).log_prob.exp()
    assert probs.shape == (3, 3) and (probs > 0).all() and (probs.sum(dim=1) < 1).all()
    torch.testing.assert_close(probs, scored, rtol=1e-4, atol=1e-7)


def test_save_pretrained_writes_a_folder_that_transformers_alone_loads(model, tmp_path):
    model.save_pretrained(tmp_path)
    restored = load(model.name, checkpoint=tmp_path, device="cpu")
    assert type(restored) is type(model)
    torch.testing.assert_close(
        restored.score_options(images(), PROMPTS, OPTIONS).log_prob,
        model.score_options(images(), PROMPTS, OPTIONS).log_prob,
        rtol=0,
        atol=0,
    )
    plain = AutoModelForImageTextToText.from_pretrained(tmp_path)
    assert type(plain) is type(model.model)
    assert type(AutoProcessor.from_pretrained(tmp_path)) is type(model.processor)


@pytest.mark.parametrize("name", ["llava", "qwen2_vl", "paligemma"])
def test_greedy_generation_is_the_argmax_with_its_log_probabilities(name):
    """Each generated token is the argmax of the teacher-forced next-token distribution and carries its
    log-probability; seeded sampling repeats itself and leaves torch's global generator as it was."""
    model = load(name, tiny=True, device="cpu")
    generated = model.generate(images(2), PROMPTS[:2], max_new_tokens=4)
    inputs = model.prompt_inputs(images(1), PROMPTS[:1])
    first = generated[0]
    assert 1 <= len(first.token_ids) == len(first.token_log_probs) <= 4
    ids = torch.cat([inputs["input_ids"], torch.tensor([first.token_ids])], dim=1)
    joined = {**inputs, "input_ids": ids, "attention_mask": torch.ones_like(ids),
              **model.family.joined_inputs(inputs, torch.tensor([first.token_ids]))}  # fmt: skip
    with torch.no_grad():
        log_probs = model.model(**joined).logits[0, -len(first.token_ids) - 1 : -1].log_softmax(dim=-1)
    assert log_probs.argmax(dim=-1).tolist() == first.token_ids
    with torch.no_grad():
        plain = model.model.generate(
            **inputs, do_sample=False, max_new_tokens=4, pad_token_id=model.tokenizer.pad_token_id
        )
    assert plain[0, inputs["input_ids"].shape[1] :].tolist()[: len(first.token_ids)] == first.token_ids
    torch.testing.assert_close(torch.tensor(first.token_log_probs), log_probs.max(dim=-1).values, rtol=0, atol=1e-4)
    state = torch.get_rng_state()
    once = model.generate(images(2), PROMPTS[:2], max_new_tokens=4, do_sample=True, seed=7)
    assert model.generate(images(2), PROMPTS[:2], max_new_tokens=4, do_sample=True, seed=7) == once
    assert torch.equal(torch.get_rng_state(), state)


def test_bad_options_are_refused_in_one_line():
    model = load("llava", tiny=True, device="cpu")
    with pytest.raises(InputError, match=r"Answer option '' is no token"):
        model.score_options(images(1), PROMPTS[:1], [["yes", ""]])
    with pytest.raises(InputError, match=r"same number \(at least one\) of answer options .* counts \[1, 2\]"):
        model.score_options(images(2), PROMPTS[:2], [["yes"], ["yes", "no"]])
    with pytest.raises(InputError, match=r"one prompt per image but got 2 images and 1 prompts"):
        model.score_options(images(2), PROMPTS[:1], [["yes"]])
    with pytest.raises(InputError, match=r"\['yes', 'yellow'\] begin with the same token"):
        model.first_token_probs(images(1), PROMPTS[:1], ["yes", "yellow", "no"])
    with pytest.raises(InputError, match=r"repeat \['no'\]; expected distinct options"):
        model.score_options(images(1), PROMPTS[:1], [["no", "yes", "no"]])
    with pytest.raises(InputError, match=r"same number \(at least one\)"):
        model.score_options(images(1), PROMPTS[:1], [[]])
    long_prompt = "Describe " + "the person " * 60
    with pytest.raises(InputError, match=r"Prompt 1 \('Describe the person.*beyond llava's context of 512 tokens"):
        model.score_options(images(2), [PROMPTS[0], long_prompt], [["yes"], ["no"]])
    with pytest.raises(InputError, match=r"Prompt 0 .* beyond llava's context"):
        model.generate(images(1), [long_prompt[:400]], max_new_tokens=200)


def test_an_unreadable_image_is_refused_naming_the_file(tmp_path):
    broken = tmp_path / "person.jpg"
    broken.write_bytes(b"\xff\xd8 not a jpeg")
    with pytest.raises(InputError, match="person.jpg"):
        load("qwen2_vl", tiny=True, device="cpu").score_options([broken], PROMPTS[:1], [["yes"]])


def test_a_processor_without_a_chat_template_is_refused_at_load(tmp_path):
    model = load("qwen2_vl", tiny=True, device="cpu")
    model.processor.chat_template = None
    model.tokenizer.chat_template = None
    model.save_pretrained(tmp_path)
    for leftover in tmp_path.glob("*chat_template*"):
        leftover.unlink()
    with pytest.raises(InputError, match=r"Model 'qwen2_vl': its processor has no chat template"):
        load("qwen2_vl", checkpoint=tmp_path, device="cpu")


def test_a_folder_of_another_family_and_an_unreachable_hub_id_are_refused_in_one_line(tmp_path):
    load("llava", tiny=True, device="cpu").save_pretrained(tmp_path)
    with pytest.raises(InputError, match=r"is a 'llava' model .* model 'qwen2_vl' loads model_type 'qwen2_vl'"):
        load("qwen2_vl", checkpoint=tmp_path, device="cpu")
    with pytest.raises(InputError, match=r"'llava-hf/no-such-model' for model 'llava' is neither a local directory"):
        load("llava", checkpoint="llava-hf/no-such-model", device="cpu")


@pytest.mark.slow  # a new Python importing transformers (~10 s on 2 cores)
def test_every_saved_family_loads_in_a_process_that_imports_no_vlbias(tmp_path):
    for name in FAMILIES:
        load(name, tiny=True, device="cpu").save_pretrained(tmp_path / name)
    script = (
        "import sys; from transformers import AutoModelForImageTextToText, AutoProcessor\n"
        f"for name in {FAMILIES!r}:\n"
        f"    AutoModelForImageTextToText.from_pretrained({str(tmp_path)!r} + '/' + name)\n"
        f"    AutoProcessor.from_pretrained({str(tmp_path)!r} + '/' + name)\n"
        "assert not any(module.startswith('vlbias') for module in sys.modules)\n"
        "print('loaded', len(sys.argv))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "loaded" in done.stdout, done.stderr[-2000:]


def test_loading_options_reach_transformers_and_a_device_map_places_the_model(tmp_path):
    """``dtype`` and ``attn_implementation`` go to ``from_pretrained``; ``device_map`` places the model with
    accelerate, and ``load`` leaves a placed model where it is."""
    model = load("llava", tiny=True, device="cpu")
    model.save_pretrained(tmp_path)
    options = {"dtype": "bfloat16", "attn_implementation": "eager"}
    half = load("llava", checkpoint=tmp_path, device="cpu", options=options)
    assert half.model.dtype == torch.bfloat16 and half.model.config._attn_implementation == "eager"
    placed = load("llava", checkpoint=tmp_path, device="cpu", options={"device_map": "auto"})
    assert placed.placed_by_device_map and placed.device == torch.device("cpu")
    torch.testing.assert_close(
        placed.score_options(images(), PROMPTS, OPTIONS).log_prob,
        model.score_options(images(), PROMPTS, OPTIONS).log_prob,
        rtol=0,
        atol=1e-6,
    )

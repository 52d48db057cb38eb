"""Activation steering: the projection by hand, the hook's positions, the direction fitted on counterfactual pairs
against hidden states read by hand, the export's round trip (same scores), and the refusals."""

import json

import pytest
import torch
from torch import nn

from tests.mitigation.chat_data import counterfactual_sets, image
from vlbias.errors import ConfigError, InputError
from vlbias.mitigation.activation_steering import (
    ActivationSteering,
    ActivationSteeringOptions,
    decoder_layers,
    load_steering,
    project_out,
    projection_hook,
)
from vlbias.mitigation.chat_debiaser import fit_chat_debiaser
from vlbias.models.registry import load
from vlbias.suites.counterfactual_answers_options import CounterfactualAnswersOptions

PROMPTS = ["Who is it?\nA. a doctor\nB. a nurse", "Is this person a doctor?\nA. yes\nB. no"]
OPTIONS = [["a doctor", "a nurse"], ["yes", "no"]]


@pytest.fixture(scope="module")
def model():
    return load("llava", tiny=True, device="cpu")


def test_the_projection_removes_the_direction_by_hand():
    u = torch.tensor([0.6, 0.8, 0.0])
    h = torch.tensor([[[1.0, 2.0, 3.0], [0.6, 0.8, 0.0]]])  # (1, 2, 3)
    # h . u = 0.6 + 1.6 = 2.2 -> h - 2.2 u = (1 - 1.32, 2 - 1.76, 3); the direction itself -> 0
    expected = torch.tensor([[[-0.32, 0.24, 3.0], [0.0, 0.0, 0.0]]])
    torch.testing.assert_close(project_out(h, u), expected)
    assert project_out(h, u) @ u == pytest.approx(0, abs=1e-6)


def test_the_hook_projects_every_column_or_the_prompts_last_and_every_later_one():
    u = torch.tensor([1.0, 0.0])
    layer = nn.Identity()
    prompt, answer = torch.ones(2, 3, 2), torch.ones(2, 2, 2)
    with projection_hook(layer, u, "all"):
        assert torch.equal(layer(prompt)[..., 0], torch.zeros(2, 3))
    with projection_hook(layer, u, "last"):
        assert layer(prompt)[..., 0].tolist() == [[1, 1, 0], [1, 1, 0]]  # the prefill: its last column
        assert torch.equal(layer(answer)[..., 0], torch.zeros(2, 2))  # later passes: every column
    assert torch.equal(layer(prompt), prompt)  # the hook is gone


@pytest.mark.parametrize("positions", ["all", "last"])
def test_after_the_hook_the_hidden_states_have_no_component_along_the_direction(model, tmp_path, positions):
    sets, _ = counterfactual_sets(tmp_path)
    steering = fit_chat_debiaser("activation_steering", model, sets, {"layer": 0, "positions": positions})
    seen = []  # what layer 1 reads: layer 0's output after the hook
    handle = decoder_layers(model)[1].register_forward_pre_hook(lambda _m, args: seen.append(args[0]))
    try:
        steering.wrap(model).score_options([tmp_path / image(tmp_path, "x.png", 7)] * 2, PROMPTS, OPTIONS)
    finally:
        handle.remove()
    prefill, options = (state.double() @ steering.direction.double() for state in seen)  # (2, P), (4, L)
    assert options.abs().max() < 1e-5
    if positions == "all":
        assert prefill.abs().max() < 1e-5
    else:
        assert prefill[:, -1].abs().max() < 1e-5 and prefill[:, :-1].abs().max() > 1e-2


def test_the_mean_difference_is_the_hand_mean_of_the_pairs_hidden_states(model, tmp_path):
    sets, _ = counterfactual_sets(tmp_path, n_sets=3)
    steering = fit_chat_debiaser("activation_steering", model, sets, {"layer": 0, "attribute": "gender"})
    differences = []
    for question_set in sets:
        prompt = CounterfactualAnswersOptions().prompt(question_set.question, question_set.options)
        last = {}
        for picture in question_set.images:  # one unpadded forward each; hidden_states[1] is layer 0's output
            with torch.no_grad():
                out = model.model(**model.prompt_inputs([picture.image], [prompt]), output_hidden_states=True)
            last[picture.group] = out.hidden_states[1][0, -1].double()
        differences.append(last["woman"] - last["man"])  # from the first value (sorted) to the second
    expected = torch.stack(differences).mean(dim=0)
    torch.testing.assert_close(steering.direction.double(), expected / expected.norm(), rtol=0, atol=1e-5)
    assert steering.fitted_on == {"n_sets": 3, "n_pairs": 3, "values": ["man", "woman"], "attribute": "gender"}
    one = fit_chat_debiaser("activation_steering", model, sets[:1], {"layer": 0, "direction": "principal_component"})
    alone = differences[0] / differences[0].norm()  # one pair: its difference is the principal component
    assert abs(float(one.direction.double() @ alone)) == pytest.approx(1, abs=1e-5)


def test_the_export_round_trips_to_the_same_scores(model, tmp_path):
    sets, _ = counterfactual_sets(tmp_path)
    steering = fit_chat_debiaser("activation_steering", model, sets, {"positions": "last"})
    folder = steering.save(tmp_path / "steering")
    assert sorted(path.name for path in folder.iterdir()) == ["direction.safetensors", "steering.json"]
    config = json.loads((folder / "steering.json").read_text())
    assert {key: config[key] for key in ("family", "layer", "positions", "hidden_size", "num_layers")} == {
        "family": "llava", "layer": 1, "positions": "last", "hidden_size": 32, "num_layers": 2}  # fmt: skip
    pictures = [tmp_path / image(tmp_path, f"{k}.png", k) for k in range(2)]
    loaded = load_steering(folder, load("llava", tiny=True, device="cpu"))
    expected = steering.wrap(model).score_options(pictures, PROMPTS, OPTIONS).log_prob
    assert torch.equal(loaded.score_options(pictures, PROMPTS, OPTIONS).log_prob, expected)
    assert not torch.allclose(model.score_options(pictures, PROMPTS, OPTIONS).log_prob, expected)
    assert torch.equal(loaded.debiaser.direction, steering.direction)
    steering.save(folder)  # an earlier export is replaced whole


def test_bad_input_is_one_line_each(model, tmp_path):
    sets, _ = counterfactual_sets(tmp_path)
    with pytest.raises(ConfigError, match=r"Steering layer 2 is out of range for llava's 2 decoder layers: expected "
                       r"a layer in \[0, 1\]"):  # fmt: skip
        fit_chat_debiaser("activation_steering", model, sets, {"layer": 2})
    three, _ = counterfactual_sets(tmp_path / "three", groups={"a": {}, "b": {}, "c": {}})
    with pytest.raises(InputError, match="'mean_difference' contrasts two values of group but the sets hold 3"):
        fit_chat_debiaser("activation_steering", model, three)
    assert fit_chat_debiaser("activation_steering", model, three, {"direction": "principal_component"}).fitted_on[
        "n_pairs"] == 6  # fmt: skip
    with pytest.raises(InputError, match="image 'man' names no attribute 'race' \\(it names \\['gender'\\]\\)"):
        fit_chat_debiaser("activation_steering", model, sets, {"attribute": "race"})
    steering = fit_chat_debiaser("activation_steering", model, sets)
    with pytest.raises(ConfigError, match="fitted on llava \\(family llava\\) but model qwen2_vl has family qwen2_vl"):
        steering.wrap(load("qwen2_vl", tiny=True, device="cpu"))
    right = load("llava", tiny=True, device="cpu", options={"padding_side": "right"})
    with pytest.raises(ConfigError, match="positions 'last' reads each prompt's last token in the last column"):
        ActivationSteering(ActivationSteeringOptions(positions="last")).fit(model, sets).wrap(right)
    with pytest.raises(ConfigError, match="'activation_steering' is not fitted"):
        ActivationSteering().wrap(model)
    with pytest.raises(InputError, match="is not a steering export; expected the folder ActivationSteering.save"):
        load_steering(tmp_path, model)
    folder = steering.save(tmp_path / "export")
    (folder / "direction.safetensors").write_bytes((folder / "direction.safetensors").read_bytes()[:40])
    with pytest.raises(InputError, match="Steering export .*export"):
        load_steering(folder, model)


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen2_5_vl", "paligemma", "gemma3", "idefics3", "smolvlm", "internvl"])
def test_every_chat_family_is_fitted_and_steered(tmp_path, family):
    chat = load(family, tiny=True, device="cpu")
    sets, _ = counterfactual_sets(tmp_path)
    if family == "gemma3":  # the tiny model's sliding window (16 tokens) hides the image from the prompt's last token
        with pytest.raises(InputError, match="hidden states at layer 0 do not differ \\(the prompt's last token"):
            fit_chat_debiaser("activation_steering", chat, sets, {"layer": 0})
        return
    steering = fit_chat_debiaser("activation_steering", chat, sets, {"layer": 0})
    seen = []
    handle = decoder_layers(chat)[1].register_forward_pre_hook(lambda _m, args: seen.append(args[0]))
    try:
        probabilities = steering.wrap(chat).first_token_probs([sets[0].images[0].image] * 2, PROMPTS, ["A", "B"])
    finally:
        handle.remove()
    assert probabilities.shape == (2, 2) and torch.isfinite(probabilities).all()
    assert (seen[0].double() @ steering.direction.double()).abs().max() < 1e-5

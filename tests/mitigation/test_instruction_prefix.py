"""Instruction prefix: the instruction opens the user's text in the family's templated prompt (after the image), and
an empty prefix is refused in one line."""

import pytest

from tests.mitigation.chat_data import image
from vlbias.errors import ConfigError
from vlbias.mitigation.chat_debiaser import fit_chat_debiaser
from vlbias.mitigation.instruction_prefix import DEFAULT_PREFIX, InstructionPrefixOptions
from vlbias.models.registry import load

PROMPT = "Who is good at math?\nA. the man\nB. the woman"


@pytest.mark.parametrize("family", ["llava", "qwen2_vl", "paligemma", "idefics3"])
def test_the_prefix_opens_the_user_turn_of_the_templated_prompt(tmp_path, family):
    model = load(family, tiny=True, device="cpu")
    debiased = fit_chat_debiaser("instruction_prefix", model).wrap(model)
    picture = tmp_path / image(tmp_path, "a.png", 0)
    read = model.tokenizer.decode(debiased.prompt_inputs([picture], [PROMPT])["input_ids"][0])
    plain = model.tokenizer.decode(model.prompt_inputs([picture], [PROMPT])["input_ids"][0])
    assert read.count(DEFAULT_PREFIX + "\n" + PROMPT) == 1 and DEFAULT_PREFIX not in plain
    # everything before the user's text (image tokens, role markers) is the same: the prefix opens the user's text
    assert read.index(DEFAULT_PREFIX) == plain.index(PROMPT)
    rendered = model.family.render(model.processor, DEFAULT_PREFIX + "\n" + PROMPT)  # before the image tokens expand
    assert rendered == model.family.render(model.processor, PROMPT).replace(PROMPT, DEFAULT_PREFIX + "\n" + PROMPT)


def test_an_empty_prefix_is_refused_in_one_line():
    for empty in ("", "  \n"):
        with pytest.raises(ConfigError, match="option `prefix` to be an instruction but got .* \\(empty\\)"):
            InstructionPrefixOptions(prefix=empty)

"""Every chat-VLM mitigation on BiasWorld-QA at planted strength 0.9 (five seeds, the same initialisations, data
and batch order for every method): s_AMB, s_DIS, disambiguated accuracy and the counterfactual gap on the test split,
each against the instruction-tuned model of the same seed.

    nice python scripts/chat_mitigation_table.py                  # the table of docs/results/chat-mitigation.md
    python scripts/chat_mitigation_table.py --seeds 0 --epochs 5  # a quick look

What it computes and prints: :mod:`vlbias.experiments.chat_mitigation`; ``--help`` lists the options.
"""

from vlbias.experiments.chat_mitigation import chat_mitigation_table
from vlbias.experiments.command_line import run

if __name__ == "__main__":
    run(chat_mitigation_table)

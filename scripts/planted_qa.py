"""Planted answer bias is recovered: a tiny chat VLM instruction-tuned on BiasWorld-QA at strengths 0.5, 0.7 and 0.9
(five seeds each, the same initialisations for all strengths), then s_AMB, s_DIS, disambiguated accuracy
(bias_qa) and the counterfactual gap (counterfactual_answers) on the balanced test split.

    nice python scripts/planted_qa.py                                   # the table of docs/results/planted-qa.md
    python scripts/planted_qa.py --split val --seeds 10 11 --epochs 4   # choose the settings on the val split
    python scripts/planted_qa.py --strengths 0.5 0.9 --seeds 0 --out rows.json

What it computes and prints: :mod:`vlbias.experiments.planted.biasworld_qa`; ``--help`` lists the options.
"""

from vlbias.experiments.command_line import run
from vlbias.experiments.planted.biasworld_qa import planted_qa_table

if __name__ == "__main__":
    run(planted_qa_table)

"""MMBias cross-modal association tests (Janghorbani & de Melo, 2023, Sec. 5.1.2, Eq. 1).

Each test has image targets ``X^I``, ``Y^I`` and text attributes ``A^T``, ``B^T``; the suite embeds
them with an EMBED model and reports the Caliskan effect size ``d(X^I, Y^I, A^T, B^T)`` with a
permutation p-value and a bootstrap interval, all computed by :mod:`vlbias.metrics`.

Stimuli come from BiasWorld (``data="biasworld"``): ``X^I``/``Y^I`` are the balanced test
images of each group, ``A^T``/``B^T`` neutral-subject phrases of each group's stereotyped
activities. A positive ``d`` means the first group's images sit closer to the first group's
stereotyped activities, i.e. the planted stereotype was learned.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from vlbias.data.biasworld import GROUPS, STEREOTYPES, BiasWorld, activity_phrases
from vlbias.metrics.functional import (
    effect_size_from_associations,
    interval_from_associations,
    p_value_from_associations,
    weat_association,
)
from vlbias.models.base import Capability, ModelAdapter
from vlbias.suites.base import Suite, SuiteOutput, embed_images, embed_texts


@dataclass
class CrossModalTest:
    """One association test: image targets and text attributes."""

    name: str
    x_images: Tensor | list  # float (N, 3, H, W) in [0, 1], or paths / PIL images
    y_images: Tensor | list
    a_texts: list[str]
    b_texts: list[str]


def biasworld_tests(world: BiasWorld, split: str = "test") -> list[CrossModalTest]:
    """The cross-modal test of BiasWorld's two groups against their stereotyped activities."""
    images = world.images(split).float() / 255.0
    groups = [item.group for item in world.items(split)]
    first, second = GROUPS
    pick = lambda group: images[[i for i, g in enumerate(groups) if g == group]]  # noqa: E731
    phrases = lambda group: [p for activity in STEREOTYPES[group] for p in activity_phrases(activity)]  # noqa: E731
    return [
        CrossModalTest(
            name=f"{first}_vs_{second}/stereotyped_activities",
            x_images=pick(first),
            y_images=pick(second),
            a_texts=phrases(first),
            b_texts=phrases(second),
        )
    ]


class MMBiasSuite(Suite):
    """Cross-modal effect sizes ``d(X^I, Y^I, A^T, B^T)`` (MMBias Eq. 1) for EMBED models.

    Metrics, per test ``<name>``: ``<name>/effect_size``; intervals: the bootstrap interval of
    the effect size; p-values: the one-sided permutation test of May et al. (2019).

    Args:
        tests: the association tests to run.
        data_config: how the stimuli were made (recorded in results).
        n_permutations: sampled re-partitions for the p-value (exact enumeration when smaller
            than the number of partitions is not requested).
        n_bootstrap: bootstrap resamples for the interval.
        confidence: interval coverage.
        batch_size: images or texts per forward pass.
    """

    name = "mmbias"
    capability = Capability.EMBED

    def __init__(
        self,
        tests: list[CrossModalTest],
        data_config: dict[str, object],
        n_permutations: int = 10_000,
        n_bootstrap: int = 1_000,
        confidence: float = 0.95,
        batch_size: int = 64,
    ) -> None:
        self.tests = tests
        self.data_config = data_config
        self.n_permutations = n_permutations
        self.n_bootstrap = n_bootstrap
        self.confidence = confidence
        self.batch_size = batch_size

    @classmethod
    def from_biasworld(cls, world: BiasWorld, split: str = "test", **options) -> MMBiasSuite:
        return cls(biasworld_tests(world, split), {"data": "biasworld", "split": split, **world.config}, **options)

    @property
    def config(self) -> dict[str, object]:
        return {
            "data": self.data_config,
            "tests": [test.name for test in self.tests],
            "n_permutations": self.n_permutations,
            "n_bootstrap": self.n_bootstrap,
            "confidence": self.confidence,
        }

    def run(self, adapter: ModelAdapter, seed: int = 0) -> SuiteOutput:
        output = SuiteOutput(metrics={})
        for test in self.tests:
            X = embed_images(adapter, test.x_images, self.batch_size)
            Y = embed_images(adapter, test.y_images, self.batch_size)
            A = embed_texts(adapter, test.a_texts, self.batch_size)
            B = embed_texts(adapter, test.b_texts, self.batch_size)
            s_x, s_y = weat_association(X, A, B), weat_association(Y, A, B)  # s(w, A, B), Eq. 1
            effect = float(effect_size_from_associations(s_x, s_y))
            p_value = float(p_value_from_associations(s_x, s_y, n_permutations=self.n_permutations, seed=seed))
            interval = interval_from_associations(s_x, s_y, n_bootstrap=self.n_bootstrap, confidence=self.confidence, seed=seed)
            low, high = (float(v) for v in interval)
            key = f"{test.name}/effect_size"
            output.metrics[key] = effect
            output.p_values[key] = p_value
            output.intervals[key] = [low, high]
            output.items.append(
                {
                    "test": test.name,
                    "effect_size": effect,
                    "p_value": p_value,
                    "ci_low": low,
                    "ci_high": high,
                    "n_x": len(X),
                    "n_y": len(Y),
                    "n_a": len(A),
                    "n_b": len(B),
                }
            )
            output.n_items += len(X) + len(Y) + len(A) + len(B)
        return output

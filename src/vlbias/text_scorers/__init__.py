"""Text scorers: a number (or a few) per text, for the descriptions a chat model generates (suite
:mod:`vlbias.suites.open_generation`). One interface (:class:`~vlbias.text_scorers.base.TextScorer`), one module per
scorer: the Stereotype Content Model word lists (:mod:`~vlbias.text_scorers.word_lists`), VADER sentiment
(:mod:`~vlbias.text_scorers.vader`) and any Hugging Face text classifier (:mod:`~vlbias.text_scorers.classifier`);
their options in :mod:`~vlbias.text_scorers.options`."""

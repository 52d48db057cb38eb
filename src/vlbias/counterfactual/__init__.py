"""Counterfactual generators: text (lexicon swaps) and images (model-specific targeted attacks)."""

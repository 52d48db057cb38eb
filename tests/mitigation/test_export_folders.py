"""The folder a model is exported to in its family's own format is named by that family, also when the model given is
itself a wrapper (``--model debiased``): debiasing or pruning a debiased CLIP writes ``clip/``, a folder the guides
name and the command's output folder accepts, and CLIP alone reads it."""

import json

import torch
import torch.nn.functional as F
from transformers import CLIPModel

from vlbias.mitigation.debiased_embeddings import DebiasedEmbeddings
from vlbias.mitigation.debiaser import FitData
from vlbias.mitigation.orth_proj import OrthProj
from vlbias.mitigation.outputs import PRUNE_FOLDER
from vlbias.models.families.pruned import PrunedEmbeddings
from vlbias.workflows.debias_outputs import DEBIAS_FOLDER, write_debiased_model

TEXTS = ["a man is cooking.", "someone sewing."]


def clip_text_embeddings(folder, tokens):
    """The text embeddings transformers' CLIP gives from ``folder`` alone, unit-normalised."""
    model = CLIPModel.from_pretrained(folder).eval()
    with torch.no_grad():
        return F.normalize(model.get_text_features(**tokens).pooler_output, dim=-1)


def test_debiasing_a_debiased_clip_exports_to_clip(tmp_path):
    debiased = DebiasedEmbeddings.tiny().eval()  # a CLIP with Orth-Proj
    with torch.no_grad():
        prompts = {"a": debiased.embed_texts(debiased.prepare_texts(["a photo of a cook"]))}
        prompts["b"] = debiased.embed_texts(debiased.prepare_texts(["a photo of a tailor"]))
    second = OrthProj().fit(FitData(attribute_prompts=prompts))
    out = tmp_path / "run"
    out.mkdir()
    write_debiased_model(out, debiased, second)
    (out / "debias.json").write_text("{}")
    assert {p.name for p in out.iterdir()} == {"debiaser", "model", "clip", "debias.json"}
    DEBIAS_FOLDER.check(out)  # every folder written is one the command may write
    twice = DebiasedEmbeddings(debiased, second)
    tokens = twice.prepare_texts(TEXTS)
    with torch.no_grad():
        expected = twice.embed_texts(tokens)
    torch.testing.assert_close(clip_text_embeddings(out / "clip", tokens), expected, rtol=0, atol=1e-6)


def test_pruning_a_debiased_clip_exports_to_clip(tmp_path, run_cli):
    out = tmp_path / "run"
    argv = ["prune", "--model", "debiased", "--tiny", "--biasworld.eval_per_combination", "2", "--n_dims", "4"]
    code, _, err = run_cli([*argv, "--out", str(out)])
    assert code == 0, err
    assert {p.name for p in out.iterdir()} == {"model", "clip", "prune.json", "tradeoff.csv", "tradeoff.png"}
    PRUNE_FOLDER.check(out)
    assert "transformers.CLIPModel.from_pretrained" in (out / "clip" / "README.md").read_text()
    pruned = PrunedEmbeddings.from_pretrained(out / "model").eval()
    assert pruned.inner.name == "debiased" and json.loads((out / "prune.json").read_text())["n_remove"] == 4
    tokens = pruned.prepare_texts(TEXTS)
    with torch.no_grad():
        expected = pruned.embed_texts(tokens)
    torch.testing.assert_close(clip_text_embeddings(out / "clip", tokens), expected, rtol=0, atol=1e-6)

"""The one batched embedding loop (:mod:`vlbias.models.embedding`) gives, to the bit, what each of its callers
computed before with its own loop: one ``embed_images(prepare_images(batch)).float().cpu()`` per batch without
gradients, a batch that does not decode embedded image by image, the unit rows normalised after the concatenation."""

import pytest
import torch
import torch.nn.functional as F

from tests.data.faces import write_image
from vlbias.errors import InputError
from vlbias.models.embedding import embed_image_batches, text_encoder, unit_image_embeddings
from vlbias.models.families.clip import CLIPAdapter


@pytest.fixture(scope="module")
def adapter():
    return CLIPAdapter.tiny(seed=1).eval()


def _one_call(adapter, images):
    with torch.no_grad():
        return adapter.embed_images(adapter.prepare_images(images)).float().cpu()


def test_the_batches_are_one_call_each_in_order(adapter):
    images = torch.rand(5, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    embeddings, kept, left_out = embed_image_batches(adapter, images, batch_size=2)
    expected = torch.cat([_one_call(adapter, images[start : start + 2]) for start in (0, 2, 4)])
    assert torch.equal(embeddings, expected) and kept == [0, 1, 2, 3, 4] and left_out == []
    assert not embeddings.requires_grad and embeddings.dtype == torch.float32
    assert torch.equal(unit_image_embeddings(adapter, images, batch_size=2), F.normalize(expected, dim=-1))


def test_a_batch_that_does_not_decode_is_embedded_image_by_image(adapter, tmp_path):
    good = [str(write_image(tmp_path / f"{k}.jpg", (40 * k, 90, 200 - 40 * k))) for k in range(3)]
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"not a picture")
    paths = [good[0], str(bad), good[1], good[2]]
    embeddings, kept, left_out = embed_image_batches(adapter, paths, batch_size=2, skip_unreadable=True)
    expected = torch.cat([_one_call(adapter, [good[0]]), _one_call(adapter, good[1:])])  # the second batch whole
    assert torch.equal(embeddings, expected) and kept == [0, 2, 3]
    assert [index for index, _ in left_out] == [1] and "bad.jpg" in left_out[0][1]
    with pytest.raises(InputError, match="bad.jpg"):
        embed_image_batches(adapter, paths, batch_size=2)  # the fitting data's images: refused, not skipped
    assert embed_image_batches(adapter, [str(bad)], 2, skip_unreadable=True)[0].shape == (0, 0)


def test_texts_are_embedded_in_batches_as_unit_rows_and_none_is_refused(adapter):
    texts = ["a man cooking", "a woman", "a person sewing a shirt"]
    with torch.no_grad():
        pieces = [adapter.embed_texts(adapter.prepare_texts(texts[start : start + 2])).float() for start in (0, 2)]
    assert torch.equal(text_encoder(adapter, batch_size=2)(texts), F.normalize(torch.cat(pieces), dim=-1))
    with pytest.raises(InputError, match="at least one text to embed"):
        text_encoder(adapter)([])

"""Odd and bad files, as a new user meets them: every PIL image mode read equal to its 8-bit RGB rendering (or
refused by name), broken images among MMBias's skipped alone with the reason, and text files that are not
UTF-8, hold an over-long CSV field or a non-string caption refused with file, line and field, through
``vlbias measure``; a byte-order mark accepted by every reader."""

import io
import json
import os
import re
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageFile

from vlbias.data.entity_association import read_spec
from vlbias.data.images import MAX_PIXELS_VARIABLE, image_problem, load_image
from vlbias.data.mmbias import read_phrases
from vlbias.data.seat import read_specs
from vlbias.data.text_files import MAX_CSV_FIELD
from vlbias.data.vl_bias import read_release_index, read_vl_bias
from vlbias.data.vlstereoset import read_vlstereoset
from vlbias.errors import ConfigError, InputError
from vlbias.results import read_items, read_results

# ----------------------------------------------------------------------------- images: every mode
RAMP = np.tile(np.arange(256), (4, 1))  # (4, 256): a ramp 0..255 along each row
GREY = RAMP.astype(np.uint8)
ALPHA = np.repeat(np.array([0, 90, 200, 255], dtype=np.uint8)[:, None], 256, axis=1)  # (4, 256): one per row
RGB = np.stack([RAMP, 255 - RAMP, (RAMP * 7) % 256], axis=-1).astype(np.uint8)  # (4, 256, 3)
DEEP = np.linspace(0, 65535, 256).round().astype(np.int64)[None].repeat(4, axis=0)  # 16-bit ramp, not all k * 257
PALETTE = np.array([[(17 * k) % 256, (53 * k) % 256, (101 * k) % 256] for k in range(16)], dtype=np.uint8)
INDEX = GREY % 16


def grey3(values: np.ndarray) -> np.ndarray:
    return np.repeat(np.asarray(values)[..., None], 3, axis=-1)


def on_white(rgb: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """The rendering of a transparent picture on a white page: round(alpha c + (1 - alpha) 255)."""
    a = alpha[..., None].astype(np.float64) / 255.0
    return np.rint(rgb.astype(np.float64) * a + 255.0 * (1.0 - a))


def palette_image(with_alpha: bool = False) -> Image.Image:
    """INDEX over PALETTE: a ``P`` image, or with ``with_alpha`` a ``PA`` image whose alpha is ALPHA."""
    bands = np.stack([INDEX, ALPHA], axis=-1) if with_alpha else INDEX  # (H, W, 2) or (H, W)
    picture = Image.frombytes("PA" if with_alpha else "P", INDEX.shape[::-1], bands.astype(np.uint8).tobytes())
    picture.putpalette(PALETTE.flatten().tolist())
    return picture


def jfif_rgb(ycc: np.ndarray) -> np.ndarray:
    """The JPEG File Interchange Format's YCbCr -> RGB (ITU-R BT.601, full range)."""
    y, cb, cr = (ycc[..., k].astype(np.float64) for k in range(3))
    rgb = [y + 1.402 * (cr - 128), y - 0.344136 * (cb - 128) - 0.714136 * (cr - 128), y + 1.772 * (cb - 128)]
    return np.clip(np.rint(np.stack(rgb, axis=-1)), 0, 255)


def cmyk_rgb(cmyk: np.ndarray) -> np.ndarray:
    """Uncalibrated CMYK -> RGB: each channel (255 - ink) (255 - K) / 255."""
    ink, k = cmyk[..., :3].astype(np.float64), cmyk[..., 3:].astype(np.float64)
    return np.rint((255 - ink) * (255 - k) / 255)


YCC = np.stack([RAMP, (RAMP * 3) % 256, 255 - RAMP], axis=-1).astype(np.uint8)
CMYK = np.stack([RAMP, 255 - RAMP, (RAMP * 5) % 256, (RAMP * 3) % 256], axis=-1).astype(np.uint8)


def transparent_palette() -> Image.Image:
    picture = palette_image()
    picture.info["transparency"] = 3  # palette entry 3 is fully transparent (PNG tRNS)
    return picture


# mode -> (the picture in that mode, the file format that keeps the mode, its 8-bit RGB rendering, tolerance)
MODES = {
    "1": (lambda: Image.fromarray(GREY >= 128), "PNG", lambda: grey3(np.where(GREY >= 128, 255, 0)), 0),
    "L": (lambda: Image.fromarray(GREY), "PNG", lambda: grey3(GREY), 0),
    "LA": (
        lambda: Image.fromarray(np.stack([GREY, ALPHA], axis=-1), mode="LA"),
        "PNG",
        lambda: on_white(grey3(GREY), ALPHA),
        0,
    ),
    "P": (palette_image, "PNG", lambda: PALETTE[INDEX], 0),
    "P+transparency": (
        transparent_palette,
        "PNG",
        lambda: np.where((INDEX == 3)[..., None], 255, PALETTE[INDEX]),
        0,
    ),
    "PA": (lambda: palette_image(with_alpha=True), "TIFF", lambda: on_white(PALETTE[INDEX], ALPHA), 0),
    "I": (lambda: Image.fromarray(DEEP.astype(np.int32)), "TIFF", lambda: grey3(np.rint(DEEP / 257)), 0),
    "I;16": (lambda: Image.fromarray(DEEP.astype(np.uint16)), "PNG", lambda: grey3(np.rint(DEEP / 257)), 0),
    "I;16B": (
        lambda: Image.frombytes("I;16B", DEEP.shape[::-1], DEEP.astype(">u2").tobytes()),
        "TIFF",
        lambda: grey3(np.rint(DEEP / 257)),
        0,
    ),
    "F": (
        lambda: Image.fromarray((DEEP / 65535).astype(np.float32)),
        "TIFF",
        lambda: grey3(np.rint((DEEP / 65535).astype(np.float32).astype(np.float64) * 255)),
        0,
    ),
    "RGB": (lambda: Image.fromarray(RGB), "PNG", lambda: RGB, 0),
    "RGBA": (lambda: Image.fromarray(np.dstack([RGB, ALPHA])), "PNG", lambda: on_white(RGB, ALPHA), 0),
    "CMYK": (lambda: Image.frombytes("CMYK", CMYK.shape[1::-1], CMYK.tobytes()), "TIFF", lambda: cmyk_rgb(CMYK), 0),
    # PIL converts YCbCr in fixed point: within 1 of the exact JFIF formula
    "YCbCr": (lambda: Image.frombytes("YCbCr", YCC.shape[1::-1], YCC.tobytes()), "TIFF", lambda: jfif_rgb(YCC), 1),
}


@pytest.mark.parametrize("case", sorted(MODES))
def test_every_image_mode_is_read_as_its_8_bit_rgb_rendering(tmp_path, case):
    build, file_format, rendering, tolerance = MODES[case]
    mode = case.split("+")[0]
    path = tmp_path / f"picture.{file_format.lower()}"
    build().save(path, format=file_format)
    with Image.open(path) as saved:
        assert saved.mode == mode  # the file really holds the mode under test
    if mode == "RGB":
        picture = load_image(path)
    else:
        with pytest.warns(UserWarning, match=re.escape(f"has mode '{mode}'; converted to RGB")):
            picture = load_image(path)
    assert picture.mode == "RGB" and picture.size == (256, 4)
    difference = np.abs(np.asarray(picture, dtype=np.int64) - rendering())
    assert difference.max() <= tolerance, f"{case}: off by up to {difference.max()}"


def test_exif_orientation_is_applied(tmp_path):
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation: the stored picture must be turned 90 degrees clockwise to be upright
    path = tmp_path / "sideways.png"
    Image.fromarray(RGB).save(path, exif=exif)
    assert np.array_equal(np.asarray(load_image(path)), np.rot90(RGB, k=-1))


@pytest.mark.parametrize(
    ("picture", "message"),
    [
        (Image.fromarray(RGB).convert("HSV"), r"has mode 'HSV', which is not supported; supported modes: \['1'"),
        (Image.fromarray(RGB).convert("LAB"), r"has mode 'LAB', which is not supported"),
        (
            Image.fromarray(np.full((2, 2), 70_000, np.int32)),
            r"has mode 'I' with values in \[70000, 70000\]; expected values in \[0, 65535\]",
        ),
        (
            Image.fromarray(np.full((2, 2), 200.0, np.float32)),
            r"has mode 'F' with values in \[200, 200\]; expected values in \[0, 1\]",
        ),
        (
            Image.fromarray(np.full((2, 2), np.nan, np.float32)),
            r"has mode 'F' with NaN or infinite values; expected values in \[0, 1\]",
        ),
    ],
    ids=["HSV", "LAB", "I-32-bit", "F-0-255", "F-NaN"],
)
def test_unsupported_modes_and_values_out_of_range_are_refused_by_name(picture, message):
    with pytest.raises(InputError, match=r"Image '<in-memory image>' " + message):
        load_image(picture)


def truncated_jpeg(path: Path) -> Path:
    """A JPEG cut in half: ``PIL.Image.verify`` passes it, only a full decode finds it truncated."""
    buffer = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(buffer, "JPEG")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buffer.getvalue()[: len(buffer.getvalue()) // 2])
    with Image.open(path) as picture:
        picture.verify()  # the check the readers used to make: it does not see the missing half
    return path


def test_the_reader_check_finds_truncated_dangling_and_unreadable_files(tmp_path, monkeypatch):
    truncated = truncated_jpeg(tmp_path / "cut.jpg")
    assert "could not be decoded as an image: image file is truncated" in image_problem(truncated)
    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", True)  # as some other library may leave it
    assert "truncated" in image_problem(truncated) and ImageFile.LOAD_TRUNCATED_IMAGES is True
    with (
        Image.open(truncated) as lazy,
        pytest.raises(InputError, match="in-memory image>' could not be decoded as an image: image file is truncated"),
    ):
        load_image(lazy)  # an image opened but not yet decoded is decoded in full too
    dangling = tmp_path / "gone.jpg"
    dangling.symlink_to(tmp_path / "nowhere.jpg")
    assert (
        image_problem(dangling)
        == f"is a dangling symbolic link: its target {str(tmp_path / 'nowhere.jpg')!r} does not exist"
    )
    assert image_problem(tmp_path) == "is not a regular file"
    locked = tmp_path / "locked.png"
    Image.fromarray(RGB).save(locked)
    locked.chmod(0)
    if os.geteuid() == 0:  # root reads any file: make opening it fail as it does for anyone else

        def denied(*args, **kwargs):
            raise PermissionError(13, "Permission denied")

        monkeypatch.setattr(Image, "open", denied)
    assert image_problem(locked) == "could not be read: Permission denied"


def bomb_png(path: Path, width: int = 20_000, height: int = 20_000) -> Path:
    """A PNG of a few bytes whose header declares ``width`` x ``height`` pixels (a decompression bomb: 400
    megapixels by default) over the data of one pixel."""
    buffer = io.BytesIO()
    Image.new("RGB", (1, 1)).save(buffer, format="PNG")
    raw = bytearray(buffer.getvalue())
    raw[16:24] = struct.pack(">II", width, height)  # IHDR's width and height, after the signature and chunk head
    raw[29:33] = struct.pack(">I", zlib.crc32(bytes(raw[12:29])))  # the chunk's CRC over its type and data
    path.write_bytes(bytes(raw))
    return path


def test_an_image_declaring_more_pixels_than_the_limit_is_refused_by_name_before_decoding(tmp_path, monkeypatch):
    monkeypatch.delenv(MAX_PIXELS_VARIABLE, raising=False)
    bomb = bomb_png(tmp_path / "bomb.png")
    limit = Image.MAX_IMAGE_PIXELS
    assert image_problem(bomb) == (
        "declares 20000 x 20000 = 400,000,000 pixels, more than the limit of 89,478,485 (a decompression bomb, or a "
        "picture larger than any data set's); set VLBIAS_MAX_IMAGE_PIXELS to read it"
    )
    with pytest.raises(InputError, match=f"Image file '{re.escape(str(bomb))}' declares 20000 x 20000"):
        load_image(bomb)
    assert Image.MAX_IMAGE_PIXELS == limit  # PIL's own setting restored
    small = tmp_path / "small.png"
    Image.fromarray(RGB).save(small)  # 4 x 256 = 1,024 pixels
    monkeypatch.setenv(MAX_PIXELS_VARIABLE, "1000")
    assert image_problem(small).startswith("declares 256 x 4 = 1,024 pixels, more than the limit of 1,000 ")
    monkeypatch.setenv(MAX_PIXELS_VARIABLE, "400000000")  # the limit raised: the header passes, the data is cut
    assert image_problem(bomb).startswith("could not be decoded as an image:")
    assert image_problem(small) is None
    monkeypatch.setenv(MAX_PIXELS_VARIABLE, "lots")
    with pytest.raises(ConfigError) as error:
        image_problem(small)
    assert str(error.value) == (
        "Environment variable VLBIAS_MAX_IMAGE_PIXELS is 'lots'; expected a positive whole number of pixels "
        "(width x height; default 89478485)."
    )


# ----------------------------------------------------------------------------- images: MMBias end to end
WORDS = {
    "unpleasant_phrases": ["cooking", "cleaning", "sewing"],
    "pleasant_phrases": ["driving", "repairing", "coding"],
}


def mmbias_dir(root: Path) -> Path:
    """Three good images per group (BiasWorld's words, the tiny models' vocabulary), and among Muslim's a
    truncated JPEG and a dangling link."""
    groups = {"muslim": ["a man ."], "christian": ["a woman ."]}
    root.mkdir(parents=True)
    (root / "textual_phrases.json").write_text(json.dumps({**WORDS, "category_phrases": groups}))
    rng = np.random.default_rng(0)
    for group in ("Muslim", "Christian"):
        for index in range(3):
            path = root / "images" / "Religion" / group / f"{index}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(rng.integers(0, 255, (24, 24, 3), dtype=np.uint8)).save(path)
    truncated_jpeg(root / "images" / "Religion" / "Muslim" / "cut.jpg")
    (root / "images" / "Religion" / "Muslim" / "gone.jpg").symlink_to(root / "elsewhere.jpg")
    return root


def measure_mmbias(data: Path, out: Path, options: str) -> list[str]:
    return ["measure", "--suite", "mmbias", "--model", "clip", "--tiny", "--data", str(data), "--out", str(out)] + [
        "--suite_options",
        options,
    ]


def test_mmbias_skips_a_truncated_jpeg_and_a_dangling_link_alone(tmp_path, run_cli):
    data = mmbias_dir(tmp_path / "data")
    options = (
        "{pairs: [[muslim, christian]], experiments: [cross_modal], statistics: {n_permutations: 100, n_bootstrap: 50}}"
    )
    code, _, err = run_cli(measure_mmbias(data, tmp_path / "out", options))
    assert code == 0, err
    skipped = {entry["item"]: entry["reason"] for entry in read_results(tmp_path / "out" / "mmbias.json").skipped}
    folder = data / "images" / "Religion" / "Muslim"
    assert set(skipped) == {str(folder / "cut.jpg"), str(folder / "gone.jpg")}
    assert "image file is truncated" in skipped[str(folder / "cut.jpg")]
    assert "dangling symbolic link" in skipped[str(folder / "gone.jpg")]
    row = read_items(tmp_path / "out" / "mmbias.json").set_index("test").loc["muslim_vs_christian/cross_modal"]
    assert (row["n_x"], row["n_y"]) == (3, 3) and np.isfinite(row["effect_size"])  # the test ran on the good images

    code, _, err = run_cli(measure_mmbias(data, tmp_path / "stop", "{on_missing_images: stop}"))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert f"{folder / 'cut.jpg'}: could not be decoded as an image: image file is truncated" in err
    assert f"{folder / 'gone.jpg'}: is a dangling symbolic link" in err
    assert not (tmp_path / "stop" / "mmbias.json").exists()


# ----------------------------------------------------------------------------- text files through the CLI
SEAT = {
    "targ1": {"category": "Male", "examples": ["man", "boy"]},
    "targ2": {"category": "Female", "examples": ["woman", "girl"]},
    "attr1": {"category": "Career", "examples": ["office", "salary"]},
    "attr2": {"category": "Family", "examples": ["home", "children"]},
}
GROUNDED = {
    "test_types": ["word"],
    **{
        key: {"category": category, "captions": {"0": "a man .", "1": "the man ."}, "images": {"a.png": [0, 1]}}
        for key, category in (("targ1", "Male"), ("targ2", "Female"))
    },
    **{
        key: {
            "category": key,
            "captions": {"0": "a kitchen .", "1": "an office ."},
            "Male_Images": {"a.png": [0]},
            "Female_Images": {"b.png": [1]},
        }
        for key in ("attr1", "attr2")
    },
}
VL_BIAS_HEADER = "image,concept,concept_type,gender\n"
VLSTEREOSET_HEADER = "bias_type,target,context,stereotype,anti-stereotype,unrelated,label,Imaeg URL\n"
VLSTEREOSET_ROW = "gender,man,The man,The man cooks,The man fights,The man is a tree,0,https://x.org/a.jpg\n"
SPEC = "groups: {female: woman, male: man}\nneutral: person\ntemplates:\n  - name: bags\n    text: 'The {agent} is carrying a {entity}.'\n    entities: [purse, briefcase]\n"  # fmt: skip
LATIN1_E = b"\xe9"  # "é" in Latin-1: not UTF-8


def seat_file(root: Path, raw: bytes) -> Path:
    (root / "seat").mkdir(parents=True)
    (root / "seat" / "test.jsonl").write_bytes(raw)
    return root / "seat"


def counterbias_dir(root: Path, raw: bytes) -> Path:
    (root / "vl_bias" / "images").mkdir(parents=True)
    (root / "vl_bias" / "annotations.csv").write_bytes(raw)
    return root / "vl_bias"


def vlstereoset_dir(root: Path, raw: bytes) -> Path:
    (root / "vlstereoset" / "images").mkdir(parents=True)
    (root / "vlstereoset" / "VLStereoSet.csv").write_bytes(raw)
    return root / "vlstereoset"


def test_mmbias_skips_a_decompression_bomb_by_name(tmp_path, run_cli, monkeypatch):
    """A 400-megapixel PNG header among MMBias's good images: skipped with its reason, the test runs on the rest."""
    monkeypatch.delenv(MAX_PIXELS_VARIABLE, raising=False)
    data = mmbias_dir(tmp_path / "data")
    bomb = bomb_png(data / "images" / "Religion" / "Christian" / "bomb.png")
    options = (
        "{pairs: [[muslim, christian]], experiments: [cross_modal], statistics: {n_permutations: 20, n_bootstrap: 20}}"
    )
    code, _, err = run_cli(measure_mmbias(data, tmp_path / "out", options))
    assert code == 0 and "Traceback" not in err and "DecompressionBomb" not in err, err
    skipped = {entry["item"]: entry["reason"] for entry in read_results(tmp_path / "out" / "mmbias.json").skipped}
    assert skipped[str(bomb)].startswith("declares 20000 x 20000 = 400,000,000 pixels, more than the limit")
    row = read_items(tmp_path / "out" / "mmbias.json").set_index("test").loc["muslim_vs_christian/cross_modal"]
    assert (row["n_x"], row["n_y"]) == (3, 3)


def mmbias_phrases(root: Path, raw: bytes) -> Path:
    (root / "mmbias").mkdir(parents=True)
    (root / "mmbias" / "textual_phrases.json").write_bytes(raw)
    return root / "mmbias"


def release_index(root: Path, raw: bytes) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "verb_attack.json").write_bytes(raw)
    return root / "verb_attack.json"


def entity_spec(root: Path, raw: bytes) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "spec.yaml").write_bytes(raw)
    return root / "spec.yaml"


def grounded_bytes(caption_1: object) -> bytes:
    spec = json.loads(json.dumps(GROUNDED))
    spec["targ2"]["captions"]["1"] = caption_1
    return json.dumps(spec, indent=2).encode()


LONG = "x" * (MAX_CSV_FIELD + 1)
# case -> (suite, model, the data it reads, the file's bytes, the file and the line/field the message must name)
BAD_TEXT = {
    "seat-not-utf8": (
        "weat",
        "clip",
        seat_file,
        json.dumps(SEAT).replace("salary", "sal\\u00e9ry").encode().replace(b"\\u00e9", LATIN1_E),
        "seat/test.jsonl': line 1, column",
        "field attr1.examples[1]: byte 0xe9 is not UTF-8",
    ),
    "grounded-not-utf8": (
        "weat",
        "albef",
        seat_file,
        grounded_bytes("caf\u00e9").replace(b"caf\\u00e9", b"caf" + LATIN1_E),
        "seat/test.jsonl': line 22, column 16",
        "field targ2.captions['1']: byte 0xe9 is not UTF-8",
    ),
    "grounded-caption-not-a-string": (
        "weat",
        "albef",
        seat_file,
        grounded_bytes(["the", "man"]),
        "seat/test.jsonl: line 22",
        "field targ2.captions['1'] should be a caption string but is ['the', 'man'] (list)",
    ),
    "vl-bias-not-utf8": (
        "counterbias",
        "albef",
        counterbias_dir,
        VL_BIAS_HEADER.encode() + b"a.jpg,shopping,activity,female\nb.jpg,cooking,activity,f" + LATIN1_E + b"m\n",
        "annotations.csv': line 3, column 25",
        "field 'gender': byte 0xe9 is not UTF-8",
    ),
    "vl-bias-oversized-field": (
        "counterbias",
        "albef",
        counterbias_dir,
        (VL_BIAS_HEADER + "a.jpg,shopping,activity,female\n" + f'b.jpg,"{LONG}",activity,male\n').encode(),
        "annotations.csv': line 3",
        f"field 'concept': {MAX_CSV_FIELD + 1:,} characters; a field may hold at most {MAX_CSV_FIELD:,}",
    ),
    "vl-bias-index-not-utf8": (
        "counterbias",
        "albef",
        release_index,
        b'{"data": {"cooking": [{"original": "caf' + LATIN1_E + b'.png"}]}}',
        "verb_attack.json': line 1, column 40",
        "field data.cooking[0].original: byte 0xe9 is not UTF-8",
    ),
    "vlstereoset-not-utf8": (
        "vlstereoset",
        "clip",
        vlstereoset_dir,
        (VLSTEREOSET_HEADER + VLSTEREOSET_ROW).encode().replace(b"fights", b"fi" + LATIN1_E + b"ghts"),
        "VLStereoSet.csv': line 2, column 44",
        "field 'anti-stereotype': byte 0xe9 is not UTF-8",
    ),
    "vlstereoset-oversized-field": (
        "vlstereoset",
        "clip",
        vlstereoset_dir,
        (VLSTEREOSET_HEADER + VLSTEREOSET_ROW.replace("The man cooks", LONG)).encode(),
        "VLStereoSet.csv': line 2",
        f"field 'stereotype': {MAX_CSV_FIELD + 1:,} characters",
    ),
    "mmbias-not-utf8": (
        "mmbias",
        "clip",
        mmbias_phrases,
        json.dumps({**WORDS, "category_phrases": {"muslim": ["a man ."]}}).encode().replace(b"repairing", LATIN1_E),
        "textual_phrases.json': line 1, column",
        "field pleasant_phrases[1]: byte 0xe9 is not UTF-8",
    ),
    "entity-spec-not-utf8": (
        "entity_association",
        "vilt",
        entity_spec,
        SPEC.encode().replace(b"purse", b"purs" + LATIN1_E),
        "spec.yaml': line 6, column 20",
        "field templates[0].entities[0]: byte 0xe9 is not UTF-8",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_TEXT))
def test_bad_text_files_are_refused_naming_file_line_and_field(tmp_path, run_cli, case):
    suite, model, layout, raw, where, what = BAD_TEXT[case]
    data = layout(tmp_path / "data", raw)
    argv = ["measure", "--suite", suite, "--model", model, "--tiny", "--data", str(data), "--out", str(tmp_path / "o")]
    code, out, err = run_cli(argv)
    assert code == 2, (out, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert where in err and what in err, err
    assert not (tmp_path / "o" / f"{suite}.json").exists()


def test_every_reader_accepts_a_byte_order_mark(tmp_path):
    bom = b"\xef\xbb\xbf"
    seat = seat_file(tmp_path / "s", bom + json.dumps(SEAT).encode())
    assert read_specs(seat)[0].targ1.examples == ["man", "boy"]
    grounded = seat_file(tmp_path / "g", bom + grounded_bytes("the woman ."))
    assert read_specs(grounded)[0].targ2.captions["1"] == "the woman ."
    vl_bias = counterbias_dir(tmp_path, bom + (VL_BIAS_HEADER + "a.jpg,shopping,,female\n").encode())
    assert [(item.row, item.image, item.gender) for item in read_vl_bias(vl_bias)] == [(2, "a.jpg", "woman")]
    index = release_index(tmp_path / "i", bom + b'{"data": {"cooking": [{"original": "/c.png"}]}}')
    assert [item.image for item in read_release_index(index)] == ["/c.png"]
    vlstereoset = vlstereoset_dir(tmp_path, bom + (VLSTEREOSET_HEADER + VLSTEREOSET_ROW).encode())
    items, skipped = read_vlstereoset(vlstereoset / "VLStereoSet.csv")
    assert [item.stereotype for item in items] == ["The man cooks"] and skipped == []
    phrases = mmbias_phrases(tmp_path, bom + json.dumps({**WORDS, "category_phrases": {}}).encode())
    assert read_phrases(phrases / "textual_phrases.json")[0] == WORDS["pleasant_phrases"]
    spec = entity_spec(tmp_path / "e", bom + SPEC.encode())
    assert read_spec(spec).entities == ["purse", "briefcase"]


def test_csv_line_numbers_count_quoted_line_breaks_and_blank_lines(tmp_path):
    raw = VL_BIAS_HEADER + '\n"a\nb.jpg",shopping,,female\n\nc.jpg,cooking,,' + "x" * (MAX_CSV_FIELD + 1) + "\n"
    folder = counterbias_dir(tmp_path, raw.encode())
    with pytest.raises(InputError, match=r"annotations\.csv': line 6, field 'gender'"):
        read_vl_bias(folder)
    (folder / "annotations.csv").write_text(VL_BIAS_HEADER + '\n"a\nb.jpg",shopping,,female\n\nc.jpg,cooking,,m\n')
    assert [item.row for item in read_vl_bias(folder)] == [3, 6]


def test_a_prompt_file_with_a_byte_that_is_not_utf8_is_refused_by_file_line_and_offset(tmp_path):
    from vlbias.mitigation.fit_data import read_prompt_file

    path = tmp_path / "prompts.yaml"
    path.write_bytes(b"concept_prompts:\n  - a photo of a caf\xe9 owner\n")
    message = re.escape(f"Prompt file {str(path)!r}: line 2, column 21, field concept_prompts[0]: byte 0xe9 is not UTF-8 (byte offset 37); save the file as UTF-8")  # fmt: skip
    with pytest.raises(InputError, match=f"^{message}$"):
        read_prompt_file(path)

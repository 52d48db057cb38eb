"""``scripts/fetch_vlstereoset_images.py`` (:mod:`vlbias.experiments.fetch_vlstereoset_images`) against a local HTTP
server on 127.0.0.1 (loopback only)."""

import io
import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from PIL import Image

from vlbias.data.vlstereoset import image_name
from vlbias.experiments.command_line import run
from vlbias.experiments.fetch_vlstereoset_images import fetch, fetch_vlstereoset_images, sha256_of

HEADER = "bias_type,target,context,stereotype,anti-stereotype,unrelated,label,Imaeg URL,\n"


def png_bytes(colour) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), colour).save(buffer, format="PNG")
    return buffer.getvalue()


class Handler(BaseHTTPRequestHandler):
    """/good.png, /also-good (no extension): images; /text.jpg: not an image; /gone.jpg: 404;
    /flaky.png: 503 on its first two requests, then an image; /broken.png: always 500."""

    requests: ClassVar[Counter] = Counter()

    def do_GET(self):
        path = self.path.split("?")[0]
        Handler.requests[path] += 1
        if path in ("/good.png", "/also-good"):
            self._send(200, png_bytes("red"))
        elif path == "/text.jpg":
            self._send(200, b"<html>this is not a picture</html>")
        elif path == "/flaky.png":
            self._send(503, b"busy") if Handler.requests[path] <= 2 else self._send(200, png_bytes("blue"))
        elif path == "/broken.png":
            self._send(500, b"oops")
        else:
            self._send(404, b"not found")

    def _send(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):  # keep test output quiet
        pass


@pytest.fixture
def server():
    Handler.requests = Counter()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def write_csv(path: Path, base: str) -> dict[str, str]:
    urls = {
        name: f"{base}/{name}" for name in ("good.png", "also-good", "text.jpg", "gone.jpg", "flaky.png", "broken.png")
    }
    lines = [HEADER] + [
        f"gender,sister,My sister is ,My sister is caring,My sister is rude,My sister is hi,1,{url},\n"
        for url in urls.values()
    ]
    lines.append(lines[1].replace("caring", "kind"))  # a second row with the same image: fetched once
    path.write_text("".join(lines))
    return urls


def test_fetch_downloads_verifies_retries_and_resumes(tmp_path, server):
    urls = write_csv(tmp_path / "VLStereoSet.csv", server)
    out = tmp_path / "images"
    argv = [
        "--csv",
        str(tmp_path / "VLStereoSet.csv"),
        "--out",
        str(out),
        "--workers",
        "3",
        "--timeout",
        "5",
        "--retries",
        "2",
        "--backoff",
        "0.01",
    ]

    assert run(fetch_vlstereoset_images, argv) == 1  # some failed
    manifest = {entry["url"]: entry for entry in map(json.loads, (out / "manifest.jsonl").read_text().splitlines())}
    assert set(manifest) == set(urls.values())
    status = {name: manifest[url]["status"] for name, url in urls.items()}
    assert status == {
        "good.png": "ok",
        "also-good": "ok",
        "flaky.png": "ok",
        "text.jpg": "failed",
        "gone.jpg": "failed",
        "broken.png": "failed",
    }
    for name in ("good.png", "also-good", "flaky.png"):
        entry = manifest[urls[name]]
        assert entry["file"] == image_name(urls[name])
        assert Image.open(out / entry["file"]).size == (8, 8)
        assert entry["sha256"] == sha256_of(out / entry["file"])
    assert image_name(urls["also-good"]).endswith(".img")
    assert "not an image" in manifest[urls["text.jpg"]]["error"]
    assert "404" in manifest[urls["gone.jpg"]]["error"]
    # retries: 503 twice then success; 500 retried to the limit; 404 and a non-image never retried
    assert Handler.requests["/flaky.png"] == 3
    assert Handler.requests["/broken.png"] == 3
    assert Handler.requests["/gone.jpg"] == 1 and Handler.requests["/text.jpg"] == 1
    assert Handler.requests["/good.png"] == 1  # two CSV rows, one download
    assert not list(out.glob(".*.tmp")) and not (out / image_name(urls["text.jpg"])).exists()

    # a rerun skips what is done (and still there), retries what failed, and re-fetches a deleted file
    (out / image_name(urls["also-good"])).unlink()
    report = fetch(tmp_path / "VLStereoSet.csv", out, workers=2, timeout=5, retries=0, backoff=0.01)
    assert sorted(report["skipped"]) == sorted([urls["good.png"], urls["flaky.png"]])
    assert report["ok"] == [urls["also-good"]]
    assert {entry["url"] for entry in report["failed"]} == {urls["text.jpg"], urls["gone.jpg"], urls["broken.png"]}
    assert Handler.requests["/good.png"] == 1 and Handler.requests["/also-good"] == 2
    assert len((out / "manifest.jsonl").read_text().splitlines()) == len(urls)  # compacted: one line per URL


def test_a_tampered_file_is_fetched_again(tmp_path, server):
    urls = write_csv(tmp_path / "VLStereoSet.csv", server)
    out = tmp_path / "images"
    fetch(tmp_path / "VLStereoSet.csv", out, workers=2, timeout=5, retries=0, backoff=0.01)
    (out / image_name(urls["good.png"])).write_bytes(b"truncated")
    report = fetch(tmp_path / "VLStereoSet.csv", out, workers=2, timeout=5, retries=0, backoff=0.01)
    assert urls["good.png"] in report["ok"]
    assert Image.open(out / image_name(urls["good.png"])).size == (8, 8)

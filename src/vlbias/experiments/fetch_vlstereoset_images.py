"""Download VLStereoSet's images (URLs only in the CSV) into a local folder, for machines with internet
(``scripts/fetch_vlstereoset_images.py``).

Each image is saved as ``image_name(url)`` (:func:`vlbias.data.vlstereoset.image_name`: the SHA-1 of
the URL plus its extension), the name the ``vlstereoset`` suite looks for. Downloads run in parallel
threads with a per-request timeout; connection errors, timeouts, HTTP 429 and 5xx are retried with
exponential backoff (``backoff * 2**attempt`` seconds); other HTTP errors are not. A download is kept
only if it decodes as an image (PIL), and is written to a temporary file and renamed, so the folder
never holds a partial file.

``<out>/manifest.jsonl`` gets one line per attempted URL as it finishes:
``{"url", "file", "sha256", "status": "ok" | "failed", "error"}`` (the last line for a URL wins; the
file is compacted at the end). A rerun skips every URL whose manifest status is ``ok`` and whose file
is still there with the recorded SHA-256, retries the rest, and prints what failed. Exit status: 0 when
every image is present, 1 when some failed.
"""

from __future__ import annotations

import hashlib
import io
import json
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from PIL import Image

from vlbias.atomic import atomic_write
from vlbias.data.vlstereoset import image_name, read_vlstereoset

MANIFEST = "manifest.jsonl"
USER_AGENT = "vlbias-fetch-vlstereoset/1 (research; +https://github.com/K-Square-00/VLStereo)"


def read_manifest(out_dir: Path) -> dict[str, dict]:
    """The latest manifest entry of each URL (an unreadable line is ignored: that URL is fetched again)."""
    path = out_dir / MANIFEST
    entries: dict[str, dict] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(entry, dict) and "url" in entry:
                entries[entry["url"]] = entry
    return entries


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def is_done(entry: dict | None, out_dir: Path) -> bool:
    """Whether a manifest entry says the image is here, and the file agrees."""
    if not entry or entry.get("status") != "ok":
        return False
    path = out_dir / entry["file"]
    return path.is_file() and sha256_of(path) == entry.get("sha256")


def _retryable(error: Exception) -> bool:
    if isinstance(error, urllib.error.HTTPError):
        return error.code == 429 or error.code >= 500
    return isinstance(error, (urllib.error.URLError, TimeoutError, ConnectionError, OSError))


def fetch_one(url: str, out_dir: Path, timeout: float, retries: int, backoff: float) -> dict:
    """Download ``url`` into ``out_dir`` (retrying transient errors), check it decodes, return its manifest entry."""
    name = image_name(url)
    entry = {"url": url, "file": name, "sha256": None, "status": "failed", "error": None}
    for attempt in range(retries + 1):
        try:
            request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
            with urllib.request.urlopen(request, timeout=timeout) as response:
                payload = response.read()
            break
        except Exception as error:  # noqa: BLE001 (urllib raises many unrelated types; all are recorded)
            entry["error"] = f"{type(error).__name__}: {error}"
            if attempt == retries or not _retryable(error):
                return entry
            time.sleep(backoff * 2**attempt)
    try:
        with Image.open(io.BytesIO(payload)) as picture:
            picture.load()
    except Exception as error:  # noqa: BLE001 (PIL raises several types for non-images)
        entry["error"] = f"not an image ({len(payload)} bytes): {type(error).__name__}: {error}"
        return entry
    atomic_write(out_dir / name, lambda handle: handle.write(payload))
    entry.update(sha256=hashlib.sha256(payload).hexdigest(), status="ok", error=None)
    return entry


def fetch(
    csv_path: Path, out_dir: Path, workers: int = 8, timeout: float = 20.0, retries: int = 3, backoff: float = 1.0
) -> dict[str, list]:
    """Fetch every image URL of ``csv_path`` not already in ``out_dir``; returns ``{"ok", "skipped", "failed"}``
    lists (URLs, URLs, manifest entries)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    items, _ = read_vlstereoset(csv_path)
    urls = list(dict.fromkeys(item.url for item in items))  # unique, in file order
    manifest = read_manifest(out_dir)
    skipped = [url for url in urls if is_done(manifest.get(url), out_dir)]
    todo = [url for url in urls if url not in set(skipped)]
    report: dict[str, list] = {"ok": [], "skipped": skipped, "failed": []}
    with (out_dir / MANIFEST).open("a", encoding="utf-8") as log, ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(fetch_one, url, out_dir, timeout, retries, backoff) for url in todo]
        for future in as_completed(futures):
            entry = future.result()
            manifest[entry["url"]] = entry
            log.write(json.dumps(entry) + "\n")
            log.flush()
            report["ok" if entry["status"] == "ok" else "failed"].append(
                entry["url"] if entry["status"] == "ok" else entry
            )
    compacted = "".join(json.dumps(manifest[url]) + "\n" for url in urls if url in manifest)
    atomic_write(out_dir / MANIFEST, lambda handle: handle.write(compacted.encode("utf-8")))
    return report


def fetch_vlstereoset_images(
    csv: Path, out: Path, workers: int = 8, timeout: float = 20.0, retries: int = 3, backoff: float = 1.0
) -> int:
    """Fetch every image of VLStereoSet's CSV not already in the folder and print what failed.

    Returns the exit status: 0 when every image is present, 1 when some failed.

    Args:
        csv: VLStereoSet.csv.
        out: Image folder (the suite's `image_dir`).
        workers: Downloads at once (threads).
        timeout: Seconds per request.
        retries: Retries of a transient error.
        backoff: First retry delay in seconds (doubles each time).
    """
    report = fetch(Path(csv), Path(out), workers, timeout, retries, backoff)
    print(
        f"{len(report['ok'])} downloaded, {len(report['skipped'])} already present, {len(report['failed'])} failed; manifest: {Path(out) / MANIFEST}"
    )
    for entry in report["failed"]:
        print(f"  failed {entry['url']}: {entry['error']}")
    return 1 if report["failed"] else 0

"""The study report rendered in headless Chromium, and checked not blank."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

_CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                   "--disable-component-update", "--disable-sync", "--no-first-run")
# counts, once the page has loaded, the <img> elements and those the browser decoded
_IMG_PROBE = ("<script>window.addEventListener('load',()=>{const im=[...document.images];"
              "document.body.setAttribute('data-imgs',im.length+':'+"
              "im.filter(i=>i.complete&&i.naturalWidth>0).length)})</script>")


def render_in_chromium(html: Path, png: Path, min_images: int = 1) -> None:
    """Screenshot ``html`` in headless Chromium and check the picture is not blank (a white
    page with a few words would pass a size check), then load a copy with a probe script and
    check every <img> (at least ``min_images``; a section without data has none) decodes in the
    browser (naturalWidth > 0)."""
    import matplotlib.image as mpimg
    import numpy as np

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([chromium, *_CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                        f"--screenshot={png}", "--window-size=1200,3000", html.as_uri()],
                       check=True, capture_output=True, timeout=120)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", data[16:24]) == (1200, 3000)
    rgb = mpimg.imread(png)[..., :3]
    ink = (rgb < 0.9).any(axis=2)
    assert ink.mean() > 0.03, "the screenshot is (nearly) blank"
    assert len(np.unique((rgb * 255).astype(np.uint8).reshape(-1, 3), axis=0)) > 50  # figures, not text only
    rows = ink.any(axis=1)
    assert rows[:1000].mean() > 0.3  # the figures start on the first screen
    probe = png.with_suffix(".probe.html")
    probe.write_text(html.read_text(encoding="utf-8").replace("</body>", _IMG_PROBE + "</body>"), encoding="utf-8")
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run([chromium, *_CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                              "--virtual-time-budget=10000", "--dump-dom", probe.as_uri()],
                             check=True, capture_output=True, text=True, timeout=120).stdout
    m = re.search(r'data-imgs="(\d+):(\d+)"', dom)
    assert m, "the probe did not run"
    total, decoded = int(m.group(1)), int(m.group(2))
    assert total == html.read_text(encoding="utf-8").count("<img") >= min_images and decoded == total

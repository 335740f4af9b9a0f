"""Record ggml's side of gguf-py's tests/test_quants.py into tests/data/gguf_py_quants.json (needs
llama-cpp-python; the tests only read the JSON).

For F16 and every type gguf-py implements (upstream loops over `gguf.quants._type_traits`, listed here as the
sdist of llama-cpp-python 0.3.36 has them), on the inputs tests/gguf/gguf_py_quant_inputs.py makes: the sha256 of
ggml's quantized bytes, of ggml's dequantization of those bytes, and of ggml's dequantization of random
float16 bytes read as the type; and whether ggml requires an importance matrix for the type.

    python tests/data/make_gguf_py_quants.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = Path(__file__).with_name("gguf_py_quants.json")
TYPES = ("F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "TQ1_0",
         "TQ2_0", "MXFP4", "NVFP4", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M", "IQ4_NL",
         "IQ4_XS")  # fmt: skip


def main() -> None:
    sys.path[:0] = [str(REPO / "tools"), str(REPO)]
    import ggml_oracle
    from tests.gguf.gguf_py_quant_inputs import SHAPE, sha256, upstream_inputs

    from weightkit.dtypes import GGMLType

    types = {}
    for name in TYPES:
        qtype = int(GGMLType[name])
        values, f16_bytes = upstream_inputs(GGMLType[name])
        rows = values.reshape(-1, SHAPE[-1])
        requires = ggml_oracle.requires_imatrix(qtype)
        quantized = ggml_oracle.quantize(qtype, rows, (rows * rows).sum(axis=0) if requires else None)
        types[name] = {
            "requires_imatrix": requires,
            "quantized": sha256(quantized),
            "dequantized": sha256(ggml_oracle.dequantize(qtype, quantized, rows.size)),
            "dequantized_f16_noise": sha256(ggml_oracle.dequantize(qtype, f16_bytes, values.size)),
        }
    doc = {"source": "llama.cpp gguf-py/tests/test_quants.py, ggml of llama-cpp-python 0.3.36", "types": types}
    OUT.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()

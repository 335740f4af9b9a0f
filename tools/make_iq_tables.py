"""Extract ggml's IQ codebooks from `ggml-common.h` into `src/weightkit/quant/data/iq_tables.npz`.

The IQ types decode through fixed lattices ("grids") and sign tables that ggml keeps as C arrays; they
are data, so we copy them once from the header rather than retyping them in Python.

    python tools/make_iq_tables.py path/to/ggml/src/ggml-common.h [path/to/ggml-quants.c]

With `ggml-quants.c` also given, the script checks that the quantizers' packed grids (the `kgrid_*`
arrays of `iq2xs_init_impl` / `iq3xs_init_impl`) are what `weightkit.quant.iq_tables` derives from
the codebooks, so the codebooks alone are enough to rebuild ggml's search tables.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "src" / "weightkit" / "quant" / "data" / "iq_tables.npz"

# name in ggml-common.h -> little-endian numpy dtype of its C element type
TABLES = {
    "kmask_iq2xs": "<u1",
    "ksigns_iq2xs": "<u1",
    "iq2xxs_grid": "<u8",
    "iq2xs_grid": "<u8",
    "iq2s_grid": "<u8",
    "iq3xxs_grid": "<u4",
    "iq3s_grid": "<u4",
    "iq1s_grid": "<u8",
    "kvalues_iq4nl": "<i1",
}
SCALARS = {"IQ1S_DELTA": "<f4", "IQ1M_DELTA": "<f4"}
C_TYPES = {"uint8_t": "<u1", "int8_t": "<i1", "uint32_t": "<u4", "uint64_t": "<u8"}
# kgrid arrays in ggml-quants.c, and the codebook each one packs (2 bits per coordinate for the
# 8-wide grids, 3 bits for the 4-wide ones)
KGRIDS = {
    "kgrid_2bit_256": "iq2xxs_grid",
    "kgrid_2bit_512": "iq2xs_grid",
    "kgrid_2bit_1024": "iq2s_grid",
    "kgrid_1bit_2048": "iq1s_grid",
    "kgrid_256": "iq3xxs_grid",
    "kgrid_512": "iq3s_grid",
}


def parse_table(text: str, name: str) -> tuple[str, list[int]]:
    """The C element type and the values of `GGML_TABLE_BEGIN(type, name, size) ... GGML_TABLE_END()`."""
    m = re.search(rf"GGML_TABLE_BEGIN\((\w+),\s*{name},\s*(\w+)\)(.*?)GGML_TABLE_END\(\)", text, re.S)
    if m is None:
        raise SystemExit(f"table {name} not found")
    values = [int(v, 0) for v in re.findall(r"-?(?:0x[0-9a-fA-F]+|\d+)", m.group(3))]
    return m.group(1), values


def parse_define(text: str, name: str) -> float:
    m = re.search(rf"#define\s+{name}\s+([0-9.eE+-]+)f?\b", text)
    if m is None:
        raise SystemExit(f"#define {name} not found")
    return float(m.group(1))


def parse_c_array(text: str, name: str) -> np.ndarray:
    """A `static const uint16_t name[...] = { ... };` array from ggml-quants.c."""
    m = re.search(rf"{name}\[[^\]]*\]\s*=\s*\{{(.*?)\}};", text, re.S)
    if m is None:
        raise SystemExit(f"array {name} not found")
    return np.array([int(v) for v in re.findall(r"\d+", m.group(1))], dtype=np.int64)


def extract(header: str) -> dict[str, np.ndarray]:
    tables: dict[str, np.ndarray] = {}
    for name, dtype in TABLES.items():
        ctype, values = parse_table(header, name)
        if C_TYPES[ctype] != dtype:
            raise SystemExit(f"{name} is {ctype} in the header; expected {dtype}")
        # int8 tables are written signed, unsigned ones may exceed int64's range: go through Python ints
        tables[name] = np.array(values, dtype=np.int64 if dtype == "<i1" else np.uint64).astype(dtype)
    for name, dtype in SCALARS.items():
        tables[name] = np.array(parse_define(header, name), dtype=dtype)
    return tables


def check_kgrids(tables: dict[str, np.ndarray], quants_c: str) -> None:
    sys.path.insert(0, str(OUT.parents[2]))
    from weightkit.quant.iq_tables import packed_levels

    for kname, grid in KGRIDS.items():
        expected = parse_c_array(quants_c, kname)
        got = packed_levels(tables[grid])
        if not np.array_equal(got, expected):
            raise SystemExit(f"{kname} differs from the levels packed from {grid}")
        print(f"{kname}: matches {grid}")


def main(argv: list[str]) -> None:
    if len(argv) not in (2, 3):
        raise SystemExit(__doc__)
    tables = extract(Path(argv[1]).read_text())
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez(OUT, **tables)
    for name, arr in tables.items():
        print(f"{name}: {arr.dtype} {arr.shape}")
    print(f"wrote {OUT}")
    if len(argv) == 3:
        check_kgrids(tables, Path(argv[2]).read_text())


if __name__ == "__main__":
    main(sys.argv)

"""The compiler's layout model: register fragments (`fragment.py`: which thread and register slot
hold each element of a fragment, as layout inference and the CUDA lowering use it) and the TMA boxes
that fill a swizzled shared tile (`tma.py`).  TileLang's user-facing `Layout` / `Fragment` objects
are the language's (language/layout.py, importable as `tilelang.layout`)."""

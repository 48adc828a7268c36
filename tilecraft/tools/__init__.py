"""TileLang's `tilelang.tools`: `plot_layout` (draw a layout's thread / register map with matplotlib)
and `Analyzer` (a roofline estimate of a kernel from its tile operations).  `tilelang.tools.cuda.iket`
(TileLang's in-kernel event tracer) is tools/cuda/iket.py."""
from .analyzer import AnalysisResult, Analyzer
from .plot_layout import plot_layout

__all__ = ["plot_layout", "Analyzer", "AnalysisResult"]

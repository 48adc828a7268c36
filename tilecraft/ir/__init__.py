"""tilecraft's own tile IR: typed scalar expressions, buffers, statements, tile operations."""
from . import dtype
from .dtype import DType
from .node import Node, Span, where, same, same_seq, index_of, contains
from .expr import (Expr, Const, Var, Binary, Unary, Call, Cast, Select, Load, Ref, const, as_expr,
                   binary, unary, call, cast, select, is_const)
from .buffer import Buffer, Region
from .stmt import (Stmt, Seq, Store, Let, For, If, While, Alloc, View, Annotate, AnnotationKey, Kernel, Break, Evaluate, Sync, WarpSpecialize, seq, stmts_of)
from .tileop import TileOp, Copy, Gemm, Fill, Reduce, AtomicAdd, Cumsum, Print
from .func import PrimFunc
from .functor import Visitor, Mutator, collect, substitute
from .printer import to_text

from .printer import use_source_reprs as _use_source_reprs
_use_source_reprs(Expr, Buffer, Region)

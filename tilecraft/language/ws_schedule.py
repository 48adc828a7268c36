"""TileLang's warp-specialization schedule: `T.annotate_ws_schedule(T.WSSchedule(...))`.

A kernel written as plain tile code (copies, gemms into tensor memory, a pipelined K loop, a
persistent tile loop) names its ops and loops with stable ids -- `annotations={T.WSID: "gemm_C"}`
on a tile op or loop, `with T.ws_op("sched_next"):` around statements -- and a schedule tells
TileLang how to rewrite it into a warp-specialized kernel: `roles` partition the block's warps
(`T.WSRole(name, warps_lo, warps_hi, max_nreg)`), `pipelines` are full/empty mbarrier pairs
protecting `depth` versions of their buffers (`T.WSPipeline(name, buffers, depth)`), and `scopes`
give, per scheduled loop (`T.WSScope(loop_id, {role: [op ids and T.WSSync steps]})`, the root scope
`T.WSScope.ROOT`), the sequence of ops each role runs, with the pipeline synchronisation between
them (`T.WSSync.producer_acquire / producer_commit / consumer_wait / consumer_release(pipeline,
stage)`).  The schedule does not declare data dependencies: TileLang queries each op's reads and
writes, and the rewritten kernel computes what the plain one does (aws/gemm.py: "the complete,
unambiguous schedule to transform `gemm` to `gemm_ws`").

tilecraft checks the schedule (its roles, pipelines, scopes and steps, at the user's line) and
runs the kernel as written: the plain program's meaning, its ops in program order over the block's
threads.  The rewrite itself (the roles' branches, the pipelines' mbarriers, the register budgets)
is not materialized: a warning says so once, and results do not change.  The ids are names and
nothing more here (`T.WSID` keys are accepted on any tile op or loop; `T.ws_op` parses its body as
if the `with` were not there).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import Buffer
from .builder import error, require_kernel, warn_once
from .compat import AttrScope

WSID = "tl.ws_id"   # the annotation key naming an op or loop for the schedule


def is_ws_id(key) -> bool:
    """Whether an `annotations={...}` key is the schedule's op id (no lowering hint: no warning)."""
    return key == WSID


def _name(what, x) -> str:
    if not isinstance(x, str) or not x:
        raise error(f"{what}: a name must be a non-empty str, got {x!r}")
    return x


def _count(what, x, lo=0) -> int:
    if isinstance(x, bool) or not isinstance(x, int) or x < lo:
        raise error(f"{what} must be a compile-time int >= {lo}, got {x!r}")
    return x


def ws_op(name):
    """`with T.ws_op("id"):` -- names the statements of its body for the schedule."""
    require_kernel("T.ws_op")
    return AttrScope(None, "ws_op", _name("T.ws_op", name))


AttrScope.HINTS.add("ws_op")


@dataclass(frozen=True)
class WSRole:
    """Warps [warps_lo, warps_hi) of the block run this role's ops (with `max_nreg` registers)."""
    name: str
    warps_lo: int
    warps_hi: int
    max_nreg: int | None = None

    def __post_init__(self):
        _name("T.WSRole", self.name)
        _count(f"T.WSRole({self.name!r}) warps_lo", self.warps_lo)
        _count(f"T.WSRole({self.name!r}) warps_hi", self.warps_hi, self.warps_lo + 1)
        if self.max_nreg is not None and (isinstance(self.max_nreg, bool) or not isinstance(self.max_nreg, int)
                                          or not 24 <= self.max_nreg <= 256 or self.max_nreg % 8):
            raise error(f"T.WSRole({self.name!r}) max_nreg must be a multiple of 8 in 24..256 (setmaxnreg), "
                        f"got {self.max_nreg!r}")


@dataclass(frozen=True)
class WSPipeline:
    """A full/empty mbarrier pair protecting `depth` versions of `buffers`."""
    name: str
    buffers: tuple
    depth: int = 1

    def __post_init__(self):
        _name("T.WSPipeline", self.name)
        bufs = tuple(self.buffers) if isinstance(self.buffers, (list, tuple)) else (self.buffers,)
        if not bufs:
            raise error(f"T.WSPipeline({self.name!r}): name at least one buffer")
        for b in bufs:
            if not isinstance(b, Buffer) or b.scope != "shared":
                raise error(f"T.WSPipeline({self.name!r}): its buffers are shared-memory or tensor-memory tiles "
                            f"(T.alloc_shared / T.alloc_tmem), got {getattr(b, 'name', b)!r}"
                            + (f" ({b.scope})" if isinstance(b, Buffer) else ""))
        object.__setattr__(self, "buffers", bufs)
        _count(f"T.WSPipeline({self.name!r}) depth", self.depth, 1)


@dataclass(frozen=True)
class WSSync:
    """One synchronisation step of a role on a pipeline, at a software-pipeline stage."""
    kind: str
    pipeline: str
    stage: int = 0

    KINDS = ("producer_acquire", "producer_commit", "consumer_wait", "consumer_release")

    @classmethod
    def producer_acquire(cls, pipeline, stage=0):
        return cls._make("producer_acquire", pipeline, stage)

    @classmethod
    def producer_commit(cls, pipeline, stage=0):
        return cls._make("producer_commit", pipeline, stage)

    @classmethod
    def consumer_wait(cls, pipeline, stage=0):
        return cls._make("consumer_wait", pipeline, stage)

    @classmethod
    def consumer_release(cls, pipeline, stage=0):
        return cls._make("consumer_release", pipeline, stage)

    @classmethod
    def _make(cls, kind, pipeline, stage):
        return cls(kind, _name(f"T.WSSync.{kind}", pipeline), _count(f"T.WSSync.{kind}({pipeline!r}) stage", stage))


class _Root:
    def __repr__(self):
        return "T.WSScope.ROOT"


@dataclass(frozen=True)
class WSScope:
    """The ops each role runs in one scheduled loop (`loop`: its ws id; ROOT: the kernel body)."""
    loop: object
    roles: dict

    ROOT = _Root()

    def __post_init__(self):
        if self.loop is not WSScope.ROOT:
            _name("T.WSScope", self.loop)
        if not isinstance(self.roles, dict):
            raise error(f"T.WSScope({self.loop!r}): the second argument maps each role to its ops, got "
                        f"{type(self.roles).__name__}")
        for role, steps in self.roles.items():
            _name(f"T.WSScope({self.loop!r}) role", role)
            if not isinstance(steps, (list, tuple)):
                raise error(f"T.WSScope({self.loop!r}): the ops of role {role!r} are a list, got {steps!r}")
            for s in steps:
                if not isinstance(s, WSSync):
                    _name(f"T.WSScope({self.loop!r}) role {role!r}: an op id (or a T.WSSync step)", s)


@dataclass(frozen=True)
class WSSchedule:
    num_warps: int
    roles: tuple
    pipelines: tuple = ()
    scopes: tuple = ()

    def __post_init__(self):
        _count("T.WSSchedule num_warps", self.num_warps, 1)
        roles, pipes, scopes = tuple(self.roles), tuple(self.pipelines), tuple(self.scopes)
        for what, xs, cls in (("roles", roles, WSRole), ("pipelines", pipes, WSPipeline), ("scopes", scopes, WSScope)):
            for x in xs:
                if not isinstance(x, cls):
                    raise error(f"T.WSSchedule {what}: expected T.{cls.__name__}(...) items, got {x!r}")
        if not roles:
            raise error("T.WSSchedule: name at least one role")
        _unique("role", [r.name for r in roles])
        _unique("pipeline", [p.name for p in pipes])
        _unique("scope", [repr(s.loop) if s.loop is WSScope.ROOT else s.loop for s in scopes])
        spans = sorted((r.warps_lo, r.warps_hi, r.name) for r in roles)
        for (lo, hi, name), (lo2, hi2, name2) in zip(spans, spans[1:]):
            if lo2 < hi:
                raise error(f"T.WSSchedule: roles {name!r} (warps [{lo}, {hi})) and {name2!r} (warps [{lo2}, {hi2})) "
                            f"overlap; each warp has one role")
        if spans[-1][1] > self.num_warps:
            lo, hi, name = max(spans, key=lambda s: s[1])
            raise error(f"T.WSSchedule: role {name!r} runs on warps [{lo}, {hi}), beyond num_warps={self.num_warps}")
        names, pipe_names = {r.name for r in roles}, {p.name for p in pipes}
        for s in scopes:
            for role, steps in s.roles.items():
                if role not in names:
                    raise error(f"T.WSScope({s.loop!r}): role {role!r} is not one of the schedule's roles "
                                f"({', '.join(sorted(names))})")
                for step in steps:
                    if isinstance(step, WSSync) and step.pipeline not in pipe_names:
                        raise error(f"T.WSScope({s.loop!r}) role {role!r}: T.WSSync.{step.kind}({step.pipeline!r}) "
                                    f"names no pipeline of the schedule ({', '.join(sorted(pipe_names)) or 'none'})")
        object.__setattr__(self, "roles", roles)
        object.__setattr__(self, "pipelines", pipes)
        object.__setattr__(self, "scopes", scopes)


def _unique(what, names):
    seen = set()
    for n in names:
        if n in seen:
            raise error(f"T.WSSchedule: two {what}s are named {n!r}")
        seen.add(n)


def annotate_ws_schedule(schedule):
    """Check the schedule (module docstring); the kernel runs as written."""
    require_kernel("T.annotate_ws_schedule")
    if not isinstance(schedule, WSSchedule):
        raise error(f"T.annotate_ws_schedule takes a T.WSSchedule(...), got {schedule!r}")
    warn_once(("T.annotate_ws_schedule",),
              "T.annotate_ws_schedule: tilecraft checks the warp-specialization schedule but does not rewrite the "
              "kernel by it yet: the kernel runs as written (its ops in program order, on the block's own threads; "
              "the schedule keeps every op's data dependencies, so results do not change)")

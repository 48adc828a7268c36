"""CPU mode: a program written for CUDA runs, unchanged, on the CPU target.

Asked for by ``tilecraft run --cpu prog.py`` or, for a program started any other way (pytest, a
corpus runner, ``python prog.py`` with the ``tilelang`` alias), by ``TILECRAFT_RUN_ON_CPU=1``: then
``import tilecraft`` calls ``install()``.  Nothing is patched otherwise; ``uninstall()`` restores
every name.  What it is for: debugging a GPU program on a laptop and running it in CI; what it
cannot show: speed, data races, memory-model bugs (the CPU target runs a kernel's threads in program
order), anything only a GPU's hardware decides.

What is patched, and why
------------------------
Tensors asked for on CUDA land on the CPU:

- every torch function and ``Tensor`` method called with ``device=`` naming CUDA (``"cuda"``,
  ``"cuda:0"``, ``torch.device("cuda", 0)``, an int index) gets ``device="cpu"``, and
  ``pin_memory=True`` is dropped: one ``TorchFunctionMode`` (``_CudaToCpu``) pushed on the
  installing thread's stack, so factories imported under any name are covered
  (``torch.empty``, ``randn``, ``zeros_like``, ``x.new_empty``, ``torch.tensor``, ...); torch keeps
  modes per thread: tensors a program makes in threads of its own are not covered (processes
  forked from the installing thread are);
- ``Tensor.cuda(...)`` and ``Tensor.pin_memory()`` return the tensor itself (as on a GPU for a
  tensor already there), ``Tensor.to("cuda" | 0 | torch.device("cuda") | device=...)`` stays on
  the CPU, ``Tensor.record_stream`` does nothing; ``nn.Module.cuda()`` / ``.to("cuda")`` follow;
- matrix products, convolutions and ``scaled_dot_product_attention`` of float16 / bfloat16 CPU tensors
  (``matmul``, ``@``, ``mm``, ``bmm``, ``addmm``, ``baddbmm``, ``einsum``, ``F.linear``,
  ``F.conv1d/2d/3d``) compute in float32 and round the result to the dtype once, as a GPU's
  float32 accumulation does (the same mode): torch's own CPU kernels for these dtypes run at about
  0.1 GFLOP/s, so a program's torch reference took most of its run;
- ``torch.utils._device.DeviceContext.__init__``: ``torch.set_default_device("cuda")`` and
  ``with torch.device("cuda"):`` mean the CPU;
- ``torch.Generator``: ``torch.Generator(device="cuda")`` is a CPU generator (``isinstance``
  checks against ``torch.Generator`` still see every generator).

``tensor.device`` says ``cpu`` and ``tensor.is_cuda`` is False: a program that checks them by hand
sees the truth.

``torch.cuda`` bookkeeping answers as one GPU of the reported architecture would
(``TILECRAFT_CPU_ARCH`` / ``tilecraft run --cpu --arch``, else the ``--also-compile`` arch, else
sm_90a: a program that demands an sm_120 GPU runs with ``--arch sm_120``; the CPU target runs the
same constructs whatever is reported): ``is_available`` -> True (TileLang programs guard on it and
would stop; torch's own modules asking -- the profiler, ``torch.compile``'s backends -- get the
truth, and tilecraft's own code asks ``target.cuda_available()``, False in CPU mode),
``is_initialized`` -> True, ``init``, ``synchronize``, ``empty_cache``, ``ipc_collect``,
``set_device``, ``reset_peak_memory_stats`` -> nothing; ``device_count`` -> 1, ``current_device``
-> 0, ``get_device_name`` -> "tilecraft CPU mode (sm_90a)", ``get_device_capability`` -> (9, 0),
``get_device_properties`` -> the architecture's flagship figures (SMs, shared memory, L2),
``get_arch_list``, ``is_bf16_supported``, ``mem_get_info`` (host memory),
``memory_allocated`` / ``max_memory_allocated`` / ``memory_reserved`` / ``max_memory_reserved``
-> 0; ``manual_seed`` / ``manual_seed_all`` / ``seed`` / ``initial_seed`` / ``get_rng_state`` /
``set_rng_state`` act on CPU mode's "cuda" generator: a CPU generator of its own that the random
factories asked for on CUDA (``randn``, ``rand``, ``randint``, ``randperm``, ``normal``, the ``*_like``
forms, with ``device=`` naming CUDA and no generator of their own) draw from, seeded by
``torch.manual_seed`` as torch seeds the GPU's; so the CPU generator advances exactly as on a GPU
machine, and a program that draws from both (``torch.randn(..., device="cuda")`` then
``torch.randint(...)`` on the CPU, as DeepSeek's cu_seqlens generator) sees the same CPU draws (the
"cuda" values are not the GPU's Philox values);
``Event(enable_timing=True)`` with ``record`` / ``elapsed_time`` / ``synchronize`` / ``query`` on
the host clock (a CPU kernel has finished when its call returns); ``Stream``, ``current_stream``,
``default_stream``, ``set_stream``, ``stream(s)``, ``device(i)``, ``device_of(t)``,
``is_current_stream_capturing`` -> stand-ins that order nothing (everything is in program order).

Compiling: ``target="cuda"`` / ``"auto"`` / ``"sm_90a"`` / a dict resolve to the CPU target
(``Target.resolve``); ``kernel.get_profiler()`` and ``tilelang.profiler.do_bench`` time on the host
clock.  Triton (``cpu_mode_triton.py``): ``TRITON_INTERPRET=1`` is set (unless set already) so Triton
kernels a program uses as its reference run in Triton's interpreter on the CPU;
``triton.testing.do_bench`` is tilecraft's host-clock ``do_bench``; ``triton.runtime.driver``'s
active driver is a stand-in answering ``get_current_target()`` (cuda, the reported arch),
``utils.get_device_properties``, the current device and stream; the interpreter's bfloat16
arithmetic, comparisons and ``tl.dot`` compute in float32 and round to bfloat16, as a GPU does.  ``torch.profiler.profile``: a
CUDA activity records the CPU's (where the kernels run).  ``--also-compile ARCH``
(``TILECRAFT_ALSO_COMPILE``): every kernel is also compiled for that CUDA architecture (NVRTC, no
launch), its plan kept beside the CPU kernel (``kernel.get_plan()`` shows both), and a refusal of
that lowering is an error at the user's line (``also_compile()``).

Host timing (``bench_reps``, ``autotune_configs``): a timing makes at most one warmup call and
``TILECRAFT_CPU_BENCH_REPS`` timed ones within its ``rep`` budget (a slower call is timed once); autotuning checks configs in
order until ``TILECRAFT_CPU_AUTOTUNE_CONFIGS`` pass and skips the rest.  Outputs do not change.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from dataclasses import dataclass

_lock = threading.Lock()
_state: dict = {}   # set while installed: the originals, the mode, the reported arch


def requested() -> bool:
    """``TILECRAFT_RUN_ON_CPU`` is set (read at ``import tilecraft``)."""
    from .. import env
    return env.knobs.run_on_cpu


def active() -> bool:
    """CPU mode is installed in this process."""
    return bool(_state)


def also_compile_arch() -> str | None:
    """The CUDA architecture every kernel is also compiled for (``--also-compile``), or None."""
    if not _state:
        return None
    return _state.get("also")


def reported_arch() -> str:
    return _state.get("arch", "sm_90a") if _state else "sm_90a"


# ---- host timing: what the program's benchmarks and autotuning cost ------------------------------
# Timings on the host say nothing about the GPU a program targets: CPU mode bounds them (the
# program's outputs do not change; only how often a kernel is timed, and which of several correct
# configs an autotuner returns).  Each policy says so once on stderr, naming its knob.

_said: set = set()


def _say_once(key: str, message: str) -> None:
    with _lock:
        if key in _said:
            return
        _said.add(key)
    print(f"tilecraft CPU mode: {message}", file=sys.stderr, flush=True)


def bench_reps() -> int | None:
    """In CPU mode, the most timed calls one timing makes (``TILECRAFT_CPU_BENCH_REPS``, default 10),
    whatever warmup/repeat counts were asked for: a first call that takes the timing's whole ``rep``
    milliseconds is its only sample; otherwise it is the warmup, and timed calls stop at this count
    or once ``rep`` milliseconds are spent, whichever comes first (at least one).
    None outside CPU mode, or with the knob at 0 (the counts asked for)."""
    if not _state:
        return None
    from .. import env
    reps = env.knobs.cpu_bench_reps
    if reps == 0:
        return None
    _say_once("bench", f"timings make at most 1 warmup call and {reps} timed ones within their rep budget "
                       f"(a call slower than the budget is timed once; host timing; TILECRAFT_CPU_BENCH_REPS=N "
                       f"changes it, 0 = the counts asked for)")
    return reps


def autotune_configs(total: int) -> int | None:
    """In CPU mode, how many configs autotuning checks before it skips the rest
    (``TILECRAFT_CPU_AUTOTUNE_CONFIGS``, default 1): configs are tried in their order, and once this
    many have passed (compiled, matched the reference, timed) the others are skipped.  None outside
    CPU mode, with the knob at 0, or when there are no more configs than that."""
    if not _state:
        return None
    from .. import env
    cap = env.knobs.cpu_autotune_configs
    if cap == 0 or total <= cap:
        return None
    _say_once("autotune", f"autotuning checks configs in order until {cap} pass(es) and skips the rest "
                          f"({total} configs here; host timings say nothing about the GPU; "
                          f"TILECRAFT_CPU_AUTOTUNE_CONFIGS=N changes it, 0 = every config)")
    return cap


# ---- tensors: "cuda" means the CPU ---------------------------------------------------------------

def _is_cuda(device) -> bool:
    if isinstance(device, str):
        return device == "cuda" or device.startswith("cuda:")
    if isinstance(device, int) and not isinstance(device, bool):
        return True   # a bare index names a CUDA device
    return getattr(device, "type", None) == "cuda"


def _cpu_device(device):
    return "cpu" if _is_cuda(device) else device


def _mode_class(cuda_gen=None):
    import torch
    from torch.overrides import TorchFunctionMode

    # random factories that take device= and generator=: asked for on CUDA, they draw from CPU
    # mode's "cuda" generator (the module docstring), as on a GPU machine from the GPU's
    random_factories = {torch.randn, torch.rand, torch.randint, torch.randperm, torch.normal,
                        torch.randn_like, torch.rand_like, torch.randint_like}

    def to(func, args, kwargs):
        args = tuple(_cpu_device(a) if i == 1 and isinstance(a, (str, int, torch.device)) else a
                     for i, a in enumerate(args))
        return func(*args, **kwargs)

    # products and convolutions of float16 / bfloat16 tensors: torch's CPU kernels for them run at
    # ~0.1 GFLOP/s (a 1024^3 float16 matmul: 33 s, float32: 0.5 s), so a program's torch reference
    # dominated its run; a GPU computes them with float32 accumulation and rounds the result once, which
    # is what computing in float32 and rounding to the dtype does
    low = (torch.float16, torch.bfloat16)
    F = torch.nn.functional
    products = [torch.matmul, torch.mm, torch.bmm, torch.addmm, torch.baddbmm, torch.einsum, F.linear,
                F.conv1d, F.conv2d, F.conv3d, F.scaled_dot_product_attention, torch.Tensor.matmul, torch.Tensor.__matmul__,
                torch.Tensor.__rmatmul__, torch.Tensor.mm, torch.Tensor.bmm]

    def in_float32(func, args, kwargs):
        if kwargs.get("out") is not None:
            return func(*args, **kwargs)
        tensors = [t for a in (*args, *kwargs.values())
                   for t in (a if isinstance(a, (list, tuple)) else (a,)) if isinstance(t, torch.Tensor)]
        dtypes = {t.dtype for t in tensors}
        if len(dtypes) != 1 or tensors[0].dtype not in low or any(t.device.type != "cpu" for t in tensors):
            return func(*args, **kwargs)
        dtype = tensors[0].dtype

        def up(a):
            if isinstance(a, torch.Tensor):
                return a.float()
            if isinstance(a, (list, tuple)) and any(isinstance(t, torch.Tensor) for t in a):
                return type(a)(up(t) for t in a)
            return a
        out = func(*(up(a) for a in args), **{k: up(v) for k, v in kwargs.items()})
        return out.to(dtype) if isinstance(out, torch.Tensor) and out.dtype == torch.float32 else out

    special = {
        **{f: in_float32 for f in products},
        torch.Tensor.cuda: lambda func, args, kwargs: args[0],
        torch.Tensor.pin_memory: lambda func, args, kwargs: args[0],
        torch.Tensor.record_stream: lambda func, args, kwargs: None,
        torch.Tensor.to: to,
    }

    class _CudaToCpu(TorchFunctionMode):
        """Every torch call: a CUDA ``device=`` becomes the CPU (see the module docstring)."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if kwargs:
                device = kwargs.get("device")
                if device is not None and _is_cuda(device):
                    kwargs = dict(kwargs, device="cpu")
                    if cuda_gen is not None and func in random_factories and kwargs.get("generator") is None:
                        kwargs["generator"] = cuda_gen
                if kwargs.get("pin_memory"):
                    kwargs = dict(kwargs, pin_memory=False)
            handler = special.get(func)
            if handler is not None:
                return handler(func, args, kwargs)
            return func(*args, **kwargs)

    return _CudaToCpu


def _generator_class(orig):
    class _Meta(type(orig)):
        def __instancecheck__(cls, obj):
            return isinstance(obj, orig)

        def __subclasscheck__(cls, sub):
            return issubclass(sub, orig)

    class Generator(orig, metaclass=_Meta):
        """``torch.Generator`` in CPU mode: a CUDA device means the CPU generator's device."""

        def __new__(cls, device="cpu"):
            return orig.__new__(orig, device=_cpu_device(device))

    Generator.__module__, Generator.__qualname__ = "torch", "Generator"
    return Generator


# ---- torch.cuda bookkeeping ----------------------------------------------------------------------

@dataclass(frozen=True)
class DeviceProperties:
    """What ``torch.cuda.get_device_properties`` says in CPU mode: the reported architecture's
    flagship figures (they pick tile sizes and grid strides; nothing runs on them)."""
    name: str
    major: int
    minor: int
    multi_processor_count: int
    total_memory: int
    shared_memory_per_block: int = 48 * 1024
    shared_memory_per_block_optin: int = 48 * 1024
    shared_memory_per_multiprocessor: int = 48 * 1024
    L2_cache_size: int = 50 * 1024 * 1024
    regs_per_multiprocessor: int = 65536
    regs_per_block: int = 65536
    max_threads_per_multi_processor: int = 2048
    max_threads_per_block: int = 1024
    warp_size: int = 32
    is_integrated: bool = False
    is_multi_gpu_board: bool = False
    gcnArchName: str = ""


def _host_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 16 << 30


def _host_free_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return _host_memory()


def device_properties(arch: str) -> DeviceProperties:
    from ..target import Target
    t = Target("cuda", arch)
    smem = t.max_shared_memory
    l2 = {80: 40, 86: 6, 89: 72, 90: 50, 100: 126, 120: 96}.get(t.sm, 40) << 20
    return DeviceProperties(name=f"tilecraft CPU mode ({arch})", major=t.sm // 10, minor=t.sm % 10,
                            multi_processor_count=t.num_sms, total_memory=_host_memory(),
                            shared_memory_per_block_optin=smem, shared_memory_per_multiprocessor=smem + 1024,
                            L2_cache_size=l2)


class Event:
    """``torch.cuda.Event`` in CPU mode: ``record()`` reads the host clock (a CPU kernel is done when
    its call returns, so this is when everything before it finished)."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False, **_):
        self.enable_timing = enable_timing
        self._t: float | None = None

    def record(self, stream=None):
        self._t = time.perf_counter()

    def elapsed_time(self, end_event: "Event") -> float:
        if self._t is None or end_event._t is None:
            raise RuntimeError("torch.cuda.Event.elapsed_time: both events must have been recorded "
                               "(CPU mode: the host clock)")
        return (end_event._t - self._t) * 1e3

    def synchronize(self):
        return None

    def wait(self, stream=None):
        return None

    def query(self) -> bool:
        return True


class Stream:
    """``torch.cuda.Stream`` in CPU mode: everything already runs in program order."""
    cuda_stream = 0

    def __init__(self, device=None, priority=0, **_):
        self.priority = priority

    @property
    def device(self):
        import torch
        return torch.device("cpu")

    def wait_stream(self, stream):
        return None

    def wait_event(self, event):
        return None

    def record_event(self, event=None):
        event = event if event is not None else Event()
        event.record(self)
        return event

    def synchronize(self):
        return None

    def query(self) -> bool:
        return True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __eq__(self, other):
        return isinstance(other, Stream)

    def __hash__(self):
        return 0


class _NoContext:
    """``torch.cuda.stream(s)``, ``torch.cuda.device(i)``, ``torch.cuda.device_of(t)``: nothing to switch."""

    def __init__(self, *_args, **_kwargs):
        self.stream = _args[0] if _args else None

    def __enter__(self):
        return self.stream

    def __exit__(self, *exc):
        return False


def _cuda_names(arch: str, gen) -> dict:
    """`gen`: CPU mode's "cuda" generator (the module docstring)."""
    import torch
    sm = int("".join(c for c in arch if c.isdigit()))
    default_stream = Stream()

    def nothing(*_args, **_kwargs):
        return None

    def seed_cpu(seed):
        gen.manual_seed(int(seed))

    real_is_available = torch.cuda.is_available

    def is_available():
        # torch's own machinery (the profiler, torch.compile's backends, autocast) asks to decide
        # whether to drive a GPU: it gets the truth; the program gets its GPU
        caller = sys._getframe(2).f_globals.get("__name__", "")
        return real_is_available() if caller == "torch" or caller.startswith("torch.") else True

    return {
        "is_available": is_available,
        "is_initialized": lambda: True,
        "init": nothing, "synchronize": nothing, "empty_cache": nothing, "ipc_collect": nothing,
        "set_device": nothing, "set_stream": nothing,
        "reset_peak_memory_stats": nothing, "reset_max_memory_allocated": nothing,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "get_device_name": lambda device=None: f"tilecraft CPU mode ({arch})",
        "get_device_capability": lambda device=None: (sm // 10, sm % 10),
        "get_device_properties": lambda device=None: device_properties(arch),
        "get_arch_list": lambda: [f"sm_{sm}"],
        "is_bf16_supported": lambda including_emulation=True: True,
        "mem_get_info": lambda device=None: (_host_free_memory(), _host_memory()),
        "memory_allocated": lambda device=None: 0, "max_memory_allocated": lambda device=None: 0,
        "memory_reserved": lambda device=None: 0, "max_memory_reserved": lambda device=None: 0,
        "manual_seed": seed_cpu, "manual_seed_all": seed_cpu,
        "seed": lambda: gen.seed(), "seed_all": lambda: gen.seed(),
        "initial_seed": lambda: gen.initial_seed(),
        "get_rng_state": lambda device="cuda": gen.get_state(),
        "set_rng_state": lambda new_state, device="cuda": gen.set_state(new_state),
        "Event": Event, "Stream": Stream,
        "current_stream": lambda device=None: default_stream,
        "default_stream": lambda device=None: default_stream,
        "stream": _NoContext, "device": _NoContext, "device_of": _NoContext,
        "is_current_stream_capturing": lambda: False,
    }


# ---- install / uninstall -------------------------------------------------------------------------

def install(also_compile: str | None = None) -> None:
    """Enter CPU mode in this process (idempotent; see the module docstring for every name patched).
    ``also_compile`` (default ``TILECRAFT_ALSO_COMPILE``): a CUDA arch every kernel is also compiled for."""
    from .. import env
    from ..target import _check_arch
    also = also_compile if also_compile is not None else env.knobs.also_compile
    if also:
        _check_arch(also)
    reported = env.knobs.cpu_arch or also or "sm_90a"
    _check_arch(reported)
    with _lock:
        if _state:
            if also:
                _state["also"] = also
                _state["arch"] = env.knobs.cpu_arch or also
            return
        import torch
        import torch.utils._device as tdev
        arch = reported
        state: dict = {"arch": arch, "also": also or None, "cuda": {}}
        cuda_gen = torch.Generator()   # CPU mode's "cuda" generator, seeded as torch's default CPU one is
        cuda_gen.manual_seed(torch.default_generator.initial_seed())
        for name, value in _cuda_names(arch, cuda_gen).items():
            state["cuda"][name] = getattr(torch.cuda, name, _MISSING)
            setattr(torch.cuda, name, _distinct(name, value))
        init = tdev.DeviceContext.__init__

        def device_context_init(self, device, _init=init):
            _init(self, _cpu_device(device))
        state["device_context_init"] = init
        tdev.DeviceContext.__init__ = device_context_init
        state["profile_init"] = profile_init = torch.profiler.profile.__init__

        def profile_init_cpu(self, *args, activities=None, _init=profile_init, **kwargs):
            if activities is not None:   # a CUDA activity: the kernels run on the CPU
                cuda, cpu = torch.profiler.ProfilerActivity.CUDA, torch.profiler.ProfilerActivity.CPU
                mapped = []
                for a in activities:
                    a = cpu if a == cuda else a
                    if a not in mapped:
                        mapped.append(a)
                activities = mapped
            _init(self, *args, activities=activities, **kwargs)
        torch.profiler.profile.__init__ = profile_init_cpu
        state["generator"] = torch.Generator
        torch.Generator = _generator_class(torch.Generator)
        if torch.get_default_device().type == "cuda":
            torch.set_default_device("cpu")
        mode = _mode_class(cuda_gen)()
        mode.__enter__()
        state["mode"] = mode
        _state.update(state)   # active from here: Triton's driver stand-in asks for the device's figures
        from . import cpu_mode_triton
        _state["triton"] = cpu_mode_triton.install(arch)


_MISSING = object()


def _distinct(name: str, value):
    """One object per patched name, named as torch's (torch._dynamo's trace rules key torch objects by
    identity: one function under two names would get two rules)."""
    if isinstance(value, type):
        return type(name, (value,), {"__module__": "torch.cuda", "__qualname__": name})

    def fn(*args, **kwargs):
        return value(*args, **kwargs)
    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = "torch.cuda"
    fn.__doc__ = f"torch.cuda.{name} in tilecraft's CPU mode (tilecraft/compat/cpu_mode.py)"
    return fn


def uninstall() -> None:
    """Leave CPU mode: every patched name gets its original back (tests; the mode is popped from the
    current thread's stack, which must be the installing thread)."""
    with _lock:
        if not _state:
            return
        import torch
        import torch.utils._device as tdev
        for name, value in _state["cuda"].items():
            if value is _MISSING:
                delattr(torch.cuda, name)
            else:
                setattr(torch.cuda, name, value)
        tdev.DeviceContext.__init__ = _state["device_context_init"]
        torch.Generator = _state["generator"]
        torch.profiler.profile.__init__ = _state["profile_init"]
        with contextlib.suppress(Exception):
            _state["mode"].__exit__(None, None, None)
        from . import cpu_mode_triton
        cpu_mode_triton.uninstall(_state["triton"])
        _state.clear()


@contextlib.contextmanager
def enabled(also_compile: str | None = None):
    """``with cpu_mode.enabled(): ...``: CPU mode for the block (tests)."""
    was = active()
    install(also_compile)
    try:
        yield
    finally:
        if not was:
            uninstall()


def also_compile(func, pass_configs, artifact) -> None:
    """``--also-compile ARCH``: compile the kernel just built for the CPU target for ARCH too (NVRTC, no
    launch) and keep that artifact beside it (``artifact.extra["also_compiled"]``, shown by
    ``kernel.get_plan()``).  A refusal of the CUDA lowering is raised at the user's line, naming ARCH."""
    arch = also_compile_arch()
    if arch is None:
        return
    from ..compiler.build import build
    from ..errors import TilecraftError
    from ..target import Target
    try:
        artifact.extra["also_compiled"] = build(func, Target("cuda", arch), pass_configs)
    except TilecraftError as e:
        try:
            again = type(e)(f"{e.message} (compiling for {arch}: CPU mode's --also-compile)", e.span, hint=e.hint)
        except TypeError:
            raise e from None
        raise again.with_traceback(None) from None

"""The probes' one timing: `iters` calls between two CUDA events after one warm call, milliseconds a call
(probes time forms in interleaved rounds and take medians over the rounds themselves)."""
import torch


def timeit(fn, iters=20):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn(); torch.cuda.synchronize()
    s.record()
    for _ in range(iters):
        fn()
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / iters

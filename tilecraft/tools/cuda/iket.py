"""`tilelang.tools.cuda.iket`: TileLang's in-kernel event tracer (language/iket.py has the meaning:
sessions, marks, ranges, payloads; runtime/iket.py writes the traces)."""
from ...language.iket import (event_table, mark, output_dir, output_path, payload, range, runtime_payloads_enabled,
                              session, trace_files)

__all__ = ["session", "mark", "range", "payload", "event_table", "output_dir", "output_path", "trace_files",
           "runtime_payloads_enabled"]

"""Where timings came from: CPU, cores, library versions, thread settings, load average.

Timings are only as good as the machine is quiet; ``bench_sparse_step.py``
prints :func:`machine_info` before its measurements and the load average after.
"""

from __future__ import annotations

import os
import platform
from types import ModuleType

import numpy as np

import sparse_opt

#: Environment variables that change how numpy, BLAS or torch run.
THREAD_VARIABLES = ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def machine_info(torch: ModuleType | None = None) -> dict[str, str]:
    """CPU, cores, platform, versions (torch's, with its intra-op threads, if given), thread variables, load average."""
    info = {
        "cpu": cpu_model(),
        "logical cpus": str(os.cpu_count()),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "sparse_opt": sparse_opt.__version__,
        "torch": "not compared" if torch is None else f"{torch.__version__} ({torch.get_num_threads()} intra-op threads)",
    }
    for name in THREAD_VARIABLES:
        info[name] = os.environ.get(name, "unset")
    info["load average (1, 5, 15 min)"] = load_average()
    return info


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, ``"0.12, 0.34, 0.56"``."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo``, else what :mod:`platform` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def format_machine_info(info: dict[str, str]) -> str:
    """``key : value`` lines, aligned."""
    width = max(map(len, info))
    return "\n".join(f"{k:<{width}} : {v}" for k, v in info.items())

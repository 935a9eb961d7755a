"""Which shared objects in this process define libstdc++'s stream / locale symbols? (The open
question of the one GPU run: a pytest process that had run CUDA work segfaulted in the first
engine error that formatted a number, in std::ostream << unsigned long.)

Imports ember, then torch (as packages/core/tests/core_helpers.py does in every test process) and
ember._C_cuda, does CUDA work when a device is present (the driver loads more libraries then),
then lists every mapped library that exports std::ostream::_M_insert<unsigned long>
or std::locale symbols. Only /lib/.../libstdc++.so.6 should: a second exporter that the dynamic
linker searches first (a library loaded with RTLD_GLOBAL, as torch loads its CUDA dependencies)
takes over the bindings of ember's libraries, and a copy of another libstdc++ version then mixes
two locale implementations on one stream. Run it on the GPU machine:

    PYTHONPATH=build/dev/site python3 tools/cuda_emulation/libstdcxx_exporters.py
    # and where the bindings went:
    PYTHONPATH=build/dev/site LD_DEBUG=bindings python3 tools/cuda_emulation/libstdcxx_exporters.py \
        2>&1 | grep -E '(libember_engine|_C_cuda|_C\\.).*_ZNSo9_M_insertImEERSoT_'
"""

from __future__ import annotations

import os
import subprocess
import sys

import common  # noqa: F401  (puts build/dev/site on sys.path)

SYMS = ("_ZNSo9_M_insertImEERSoT_", "_ZNSt6localeC1Ev", "_ZNSt6locale7classicEv",
        "_ZNSt7num_putIcSt19ostreambuf_iteratorIcSt11char_traitsIcEEE2idE")


def main():
    import ember  # noqa: F401

    try:
        import torch  # noqa: F401
        print("torch", torch.__version__)
    except ImportError:
        print("torch: not installed")
    try:
        import ember._C_cuda  # noqa: F401
        print("ember._C_cuda loaded")
    except ImportError as e:
        print("ember._C_cuda:", e)
    if ember.cuda.is_available():
        # CUDA work: the driver and what it loads on context creation / the first kernel
        x = ember.arange(1000.0).to("cuda")
        print("CUDA work done:", float(x.sum().cpu()))
    libs = set()
    with open(f"/proc/{os.getpid()}/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and ".so" in parts[5]:
                libs.add(parts[5])
    found = 0
    for lib in sorted(libs):
        try:
            out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True,
                                 text=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        hits = [s for s in SYMS if s in out]
        if hits:
            found += 1
            print(f"{lib}: defines {', '.join(hits)}")
    print(f"{found} libraries define libstdc++ stream/locale symbols (1 expected: libstdc++.so.6)")
    return found <= 1


if __name__ == "__main__":
    sys.exit(0 if main() else 1)

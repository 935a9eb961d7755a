#!/usr/bin/env bash
# Shows the mechanism suspected behind the GPU run's segfault in `ostream << unsigned long`: a
# library loaded with RTLD_GLOBAL before ember._C_cuda (as torch loads its CUDA dependencies, and
# the test modules import torch through core_helpers before any test_cuda_* module loads
# _C_cuda) that exports libstdc++'s std::ostream::_M_insert<unsigned long> (a static libstdc++
# without --exclude-libs) takes over _C_cuda's lazily bound `<< unsigned long`, while _C_cuda's
# locale / use_facet stay on libstdc++.so.6: one stream, two locale implementations. (With the
# same libstdc++ version the facet indices happen to agree and nothing crashes; with another
# version they need not.) Needs g++; builds in a temporary directory.
#   bash tools/cuda_emulation/interpose_demo.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/i.cpp" <<'CPP'
#include <sstream>
#include <string>
extern "C" const char* interposer_touch(unsigned long v) {
  static std::string s;
  std::ostringstream o;
  o << v;
  s = o.str();
  return s.c_str();
}
CPP
echo '{ global: interposer_touch; _ZNSo9_M_insertImEERSoT_; local: *; };' >"$tmp/i.map"
g++ -O1 -fPIC -shared -static-libstdc++ -Wl,--version-script="$tmp/i.map" -o "$tmp/libpartial.so" "$tmp/i.cpp"
cat >"$tmp/run.py" <<PY
import ctypes
import ember
ctypes.CDLL("$tmp/libpartial.so", mode=ctypes.RTLD_GLOBAL)
import ember._C_cuda
PY
PYTHONPATH="$root/build/dev/site" LD_DEBUG=bindings python3 "$tmp/run.py" 2>&1 |
  grep -E "_C_cuda.*(_ZNSo9_M_insertImEERSoT_|_ZSt9use_facetISt7num_put|_ZNSt6localeC1Ev)" |
  sed -e 's/^ *[0-9]*:\s*//' -e "s#$tmp#<tmp>#"

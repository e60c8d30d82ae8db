#!/usr/bin/env bash
# Installs the build into a scratch prefix and builds a consumer the three ways the README
# documents: CMake's find_package, pkg-config, and plain -ltcmalloc_minimal.
set -euo pipefail
build_dir=$1
src_dir=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$build_dir" --prefix "$prefix" >/dev/null
for f in lib/libtcmalloc_minimal.so lib/libtcmalloc_minimal.so.4 lib/libtcmalloc_minimal.a \
         include/gperftools/tcmalloc.h include/google/tcmalloc.h \
         lib/pkgconfig/libtcmalloc_minimal.pc lib/cmake/tcmalloc/tcmallocConfig.cmake; do
  [ -e "$prefix/$f" ] || { echo "missing after install: $f"; exit 1; }
done
# Every public header of gperftools 2.10 (but the CPU profiler's), and its google/ forwarder.
for h in tcmalloc.h nallocx.h malloc_extension.h malloc_extension_c.h malloc_hook.h malloc_hook_c.h \
         heap-profiler.h heap-checker.h stacktrace.h; do
  for d in gperftools google; do
    [ -e "$prefix/include/$d/$h" ] || { echo "missing after install: include/$d/$h"; exit 1; }
  done
done
soname=$(readelf -d "$prefix/lib/libtcmalloc_minimal.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = libtcmalloc_minimal.so.4 ] || { echo "wrong soname: $soname"; exit 1; }

# 1. CMake package.
cmake -S "$src_dir/consumer" -B "$work/cmake-build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cmake-build" >/dev/null
LD_LIBRARY_PATH=$prefix/lib "$work/cmake-build/app"
"$work/cmake-build/app_static"

# 2. pkg-config.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
# shellcheck disable=SC2046
g++ -std=c++17 "$src_dir/consumer/main.cc" -o "$work/app_pc" $(pkg-config --cflags --libs libtcmalloc_minimal)
LD_LIBRARY_PATH=$prefix/lib "$work/app_pc"

# 3. Plain flags, and the google/ forwarding header still compiles (with its warning).
echo '#include <google/tcmalloc.h>
int main() { return tc_version(0, 0, 0) ? 0 : 1; }' > "$work/google.cc"
g++ -std=c++17 -Wno-cpp -I"$prefix/include" "$work/google.cc" -L"$prefix/lib" -ltcmalloc_minimal -o "$work/app_google"
LD_LIBRARY_PATH=$prefix/lib "$work/app_google"
# 4. A C program pays nothing for C++: the library references the C++ runtime only weakly,
#    so neither libstdc++ nor libm is loaded (1.3 MiB of RSS), and a static C link needs
#    no -lstdc++.
cat > "$work/c_user.c" <<'CEOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void) {
  char line[512];
  int ours = 0, cxx = 0;
  free(malloc(100));
  FILE* f = fopen("/proc/self/maps", "r");
  while (fgets(line, sizeof line, f)) {
    if (strstr(line, "libtcmalloc_minimal")) ours = 1;
    if (strstr(line, "libstdc++") || strstr(line, "libm.so")) cxx = 1;
  }
  fclose(f);
  printf("ours=%d cxx_runtime=%d\n", ours, cxx);
  return cxx ? 1 : 0;
}
CEOF
gcc "$work/c_user.c" -o "$work/c_user" $(pkg-config --cflags --libs libtcmalloc_minimal)
LD_LIBRARY_PATH=$prefix/lib "$work/c_user" | grep -qx "ours=1 cxx_runtime=0"
gcc "$work/c_user.c" -o "$work/c_user_static" "$prefix/lib/libtcmalloc_minimal.a" -pthread
"$work/c_user_static" >/dev/null
echo "packaging: ok"

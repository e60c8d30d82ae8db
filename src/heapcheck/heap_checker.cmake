# The heap leak checker (docs/heap-checker.md), part of the full library only: included
# from src/CMakeLists.txt (paths are relative to src/) after the tcmalloc and tcmalloc_static targets are defined.
#
# How the checker notices the start of main() differs (heapcheck/heap_check_start_main.cc): the shared
# library defines __libc_start_main (in a static executable that would clash with glibc's);
# the archive's programs are linked with --wrap=__libc_start_main instead.
set(TCMALLOC_HEAP_CHECKER_SOURCES
  heapcheck/heap_checker.cc
  heapcheck/heap_check_table.cc
  heapcheck/heap_check_stack.cc
  heapcheck/heap_check_modules.cc
  heapcheck/heap_check_scan.cc
  heapcheck/heap_check_report.cc
  heapcheck/heap_check_memory.cc
  heapcheck/thread_list.cc
)

# Tells tests/heapcheck that the checker is built into the library.
set_property(GLOBAL PROPERTY TCMALLOC_HEAP_CHECKER_BUILT TRUE)

if(TARGET tcmalloc)
  target_sources(tcmalloc PRIVATE ${TCMALLOC_HEAP_CHECKER_SOURCES} heapcheck/heap_check_start_main.cc)
  target_link_libraries(tcmalloc PRIVATE ${CMAKE_DL_LIBS})
endif()
if(TARGET tcmalloc_static)
  target_sources(tcmalloc_static PRIVATE ${TCMALLOC_HEAP_CHECKER_SOURCES} heapcheck/heap_check_start_main_wrap.cc)
  target_link_libraries(tcmalloc_static PUBLIC ${CMAKE_DL_LIBS})
  # Programs that never call the HeapLeakChecker API would not pull the checker's archive
  # member in, and HEAPCHECK would silently do nothing.
  target_link_options(tcmalloc_static INTERFACE "LINKER:--undefined=TCMallocHeapCheckerLinked"
                      "LINKER:--wrap=__libc_start_main")
endif()

# Until the full library exists, the heap checker tests use a test-only shared library:
# libtcmalloc_minimal's sources plus the checker (never installed).
if(NOT TARGET tcmalloc)
  add_library(tcmalloc_heapcheck SHARED api/libc_override.cc api/malloc_extension.cc $<TARGET_OBJECTS:tcmalloc_core>
              $<TARGET_OBJECTS:tcmalloc_full_support> ${TCMALLOC_HEAP_CHECKER_SOURCES} heapcheck/heap_check_start_main.cc)
  target_compile_options(tcmalloc_heapcheck PRIVATE ${TCMALLOC_OVERRIDE_OPTIONS})
  target_include_directories(tcmalloc_heapcheck PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}
                             PUBLIC ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(tcmalloc_heapcheck PUBLIC Threads::Threads ${CMAKE_DL_LIBS})
  target_link_options(tcmalloc_heapcheck PRIVATE -Wl,-z,now -Wl,--as-needed)
endif()

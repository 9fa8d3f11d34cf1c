# CPU variants of the hot kernels (docs/cpu.md). Included by the top-level
# CMakeLists.txt with PADDLEC_KVARIANT_SOURCES set; appends the variants'
# objects to PADDLEC_KVARIANT_OBJECTS and kdispatch.c stays in
# PADDLEC_SOURCES.
#
# kvariant_names.h renames every function that kernels.def lists to
# <name>_<variant> (PD_KVARIANT), so the copies link side by side; the
# helpers listed with PD_KERNEL_HELPER keep their name in the baseline copy,
# which is the one callers use.
set(kdef ${CMAKE_SOURCE_DIR}/src/kernels/cpu/kernels.def)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${kdef})
file(READ ${kdef} kdef_text)
string(REGEX MATCHALL "\nPD_KERNEL\\([^,]*, *[A-Za-z0-9_]+" kfuncs "${kdef_text}")
string(REGEX MATCHALL "\nPD_KERNEL_VOID\\([A-Za-z0-9_]+" kvoids "${kdef_text}")
string(REGEX MATCHALL "\nPD_KERNEL_HELPER\\([A-Za-z0-9_]+" khelpers "${kdef_text}")
set(knames "/* Generated from src/kernels/cpu/kernels.def by cmake/kvariants.cmake. */\n")
string(APPEND knames "#ifndef PADDLEC_KVARIANT_NAMES_H\n#define PADDLEC_KVARIANT_NAMES_H\n")
string(APPEND knames "#define PD_KV_CAT2(a, b) a##_##b\n#define PD_KV_CAT(a, b) PD_KV_CAT2(a, b)\n")
foreach(k ${kfuncs} ${kvoids})
  string(REGEX REPLACE ".*[ ,(]([A-Za-z0-9_]+)$" "\\1" name "${k}")
  string(APPEND knames "#define ${name} PD_KV_CAT(${name}, PD_KVARIANT)\n")
endforeach()
string(APPEND knames "#ifndef PD_KVARIANT_IS_BASELINE\n")
foreach(k ${khelpers})
  string(REGEX REPLACE ".*\\(([A-Za-z0-9_]+)$" "\\1" name "${k}")
  string(APPEND knames "#define ${name} PD_KV_CAT(${name}, PD_KVARIANT)\n")
endforeach()
string(APPEND knames "#endif\n#endif\n")
set(knames_h ${CMAKE_BINARY_DIR}/generated/kvariant_names.h)
if(EXISTS ${knames_h})
  file(READ ${knames_h} knames_old)
else()
  set(knames_old "")
endif()
if(NOT knames_old STREQUAL knames)
  file(WRITE ${knames_h} "${knames}")
endif()

# ISA flags of each variant; kvariant.h holds the same lists for the
# function-level copies of the elementwise loops and kvariant.c the cpuid
# test that picks one.
set(PADDLEC_KVARIANT_FLAGS_baseline "")
set(PADDLEC_KVARIANT_FLAGS_avx2 -mavx2 -mfma -mf16c)
set(PADDLEC_KVARIANT_FLAGS_avx512 -mavx2 -mfma -mf16c -mavx512f -mavx512vl -mavx512bw -mavx512dq
  -mprefer-vector-width=256)
foreach(v baseline avx2 avx512)
  add_library(paddlec_kernels_${v} OBJECT ${PADDLEC_KVARIANT_SOURCES})
  set_target_properties(paddlec_kernels_${v} PROPERTIES POSITION_INDEPENDENT_CODE ON C_VISIBILITY_PRESET hidden)
  target_include_directories(paddlec_kernels_${v} PRIVATE ${CMAKE_SOURCE_DIR}/include)
  target_link_libraries(paddlec_kernels_${v} PRIVATE OpenMP::OpenMP_C DNNL::dnnl)
  target_compile_definitions(paddlec_kernels_${v} PRIVATE PD_KVARIANT=${v})
  if(v STREQUAL "baseline")
    target_compile_definitions(paddlec_kernels_${v} PRIVATE PD_KVARIANT_IS_BASELINE=1)
  endif()
  target_compile_options(paddlec_kernels_${v} PRIVATE -include ${knames_h} ${PADDLEC_KVARIANT_FLAGS_${v}})
  list(APPEND PADDLEC_KVARIANT_OBJECTS $<TARGET_OBJECTS:paddlec_kernels_${v}>)
endforeach()

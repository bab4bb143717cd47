# The layers of src/ as build targets (the rule: src/layers.txt).
#
# Every layer's target compiles with one include root of its own,
# <build>/layers/<layer>/, which holds a link to src/<dir> for the layer itself and for
# each layer it uses, and nothing else. Sources name internal headers by their path under
# src/ ("core/log.hpp"), so an include of a layer the table does not allow finds no file
# and the build fails. tests/layers/ proves it for every layer.

# ATTNSEL_LAYERS (in the table's order) and ATTNSEL_LAYER_USES_<layer>. Rows naming a folder
# inside a layer ("kernels/mla") are checked by scripts/check-layers.py, not by the build.
file(STRINGS ${PROJECT_SOURCE_DIR}/src/layers.txt _attnsel_layer_lines REGEX "^[a-z_]+[ \t]|^[a-z_]+$")
set(ATTNSEL_LAYERS "")
foreach(_line IN LISTS _attnsel_layer_lines)
  string(REGEX REPLACE "[ \t]+" ";" _words "${_line}")
  list(POP_FRONT _words _layer)
  list(APPEND ATTNSEL_LAYERS ${_layer})
  set(ATTNSEL_LAYER_USES_${_layer} ${_words})
endforeach()
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/layers.txt)

# The directory a layer's sources live in: src/<layer>, tools/ for tools.
function(attnsel_layer_source_dir layer out)
  if(layer STREQUAL "tools")
    set(${out} ${PROJECT_SOURCE_DIR}/tools PARENT_SCOPE)
  else()
    set(${out} ${PROJECT_SOURCE_DIR}/src/${layer} PARENT_SCOPE)
  endif()
endfunction()

# <build>/layers/<layer>/: links to the directories of the layer and of those it uses.
# Stale links (a layer dropped from the line) are removed; nothing else is touched.
function(attnsel_layer_include_root layer out)
  set(root ${PROJECT_BINARY_DIR}/layers/${layer})
  file(MAKE_DIRECTORY ${root})
  set(wanted ${layer} ${ATTNSEL_LAYER_USES_${layer}})
  list(REMOVE_ITEM wanted tools)
  file(GLOB existing LIST_DIRECTORIES true RELATIVE ${root} ${root}/*)
  foreach(name IN LISTS existing)
    if(IS_SYMLINK ${root}/${name} AND NOT name IN_LIST wanted)
      file(REMOVE ${root}/${name})
    endif()
  endforeach()
  foreach(name IN LISTS wanted)
    if(NOT IS_SYMLINK ${root}/${name})
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${name} ${root}/${name} SYMBOLIC)
    endif()
  endforeach()
  set(${out} ${root} PARENT_SCOPE)
endfunction()

# What every layer compiles with: the public API, the generated headers, the libraries the
# API's headers use, hidden visibility (libattnsel.so exports only what ATTNSEL_API marks).
add_library(attnsel_layer_base INTERFACE)
target_include_directories(attnsel_layer_base INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>)
target_link_libraries(attnsel_layer_base INTERFACE fmt::fmt spdlog::spdlog nlohmann_json::nlohmann_json)
target_compile_definitions(attnsel_layer_base INTERFACE SPDLOG_FMT_EXTERNAL)

option(ATTNSEL_UNITY_BUILD "Compile each layer's sources in unity batches (off: one object per file)" ON)

# attnsel_layer_<layer>: an object library of the layer's sources, compiled against its
# include root only.
function(attnsel_add_layer layer)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SOURCES")
  if(NOT layer IN_LIST ATTNSEL_LAYERS)
    message(FATAL_ERROR "attnsel: layer '${layer}' is not in src/layers.txt")
  endif()
  set(target attnsel_layer_${layer})
  add_library(${target} OBJECT ${arg_SOURCES})
  attnsel_warnings(${target})
  attnsel_layer_include_root(${layer} root)
  target_include_directories(${target} PRIVATE ${root})
  target_link_libraries(${target} PUBLIC attnsel_layer_base)
  set_target_properties(${target} PROPERTIES C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden
                                             CUDA_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  # Unity batches: most of a file's object is the same headers (fmt, spdlog, nlohmann-json,
  # the public API) compiled again. Batches of 32 make most layers one object; the CUDA and
  # SIMD kernels, compiled beside them, keep both cores of a small machine busy. A file that
  # compiles itself once per SIMD target (Highway's foreach_target) stays alone. In the
  # sanitizer builds such a file skips UndefinedBehaviorSanitizer, whose checks on every
  # vector operation made its compile 2.4 times as long (AddressSanitizer stays).
  set_target_properties(${target} PROPERTIES UNITY_BUILD ${ATTNSEL_UNITY_BUILD} UNITY_BUILD_BATCH_SIZE 32)
  foreach(source IN LISTS arg_SOURCES)
    file(STRINGS ${source} per_target REGEX "HWY_TARGET_INCLUDE" LIMIT_COUNT 1)
    if(per_target)
      set_source_files_properties(${source} TARGET_DIRECTORY ${target} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
      if("undefined" IN_LIST ATTNSEL_SANITIZE)
        set_source_files_properties(${source} TARGET_DIRECTORY ${target} PROPERTIES COMPILE_OPTIONS
                                                                                   -fno-sanitize=undefined)
      endif()
    endif()
  endforeach()
endfunction()

# attnsel_link_layers(TARGET LAYER...): links TARGET with the objects of the named layers,
# the layers they use, and the two layers whose functions the registry's first use calls
# (core/registry_startup.hpp: backends and plugin), instead of the whole library; with the
# internal headers of every layer, as the tests and the fuzzer use them. A build of TARGET
# alone then compiles only those layers (the fuzzer's and the concurrency tests' builds).
function(attnsel_link_layers target)
  set(pending ${ARGN} backends plugin)
  set(layers "")
  while(pending)
    list(POP_FRONT pending layer)
    if(NOT layer IN_LIST layers)
      list(APPEND layers ${layer})
      list(APPEND pending ${ATTNSEL_LAYER_USES_${layer}})
    endif()
  endwhile()
  list(TRANSFORM layers PREPEND attnsel_layer_)
  target_link_libraries(${target} PRIVATE ${layers})
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src)
endfunction()

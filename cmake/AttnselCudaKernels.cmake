# attnsel's CUDA kernels (src/kernels/*/cuda). With CUDA they join the kernels layer's objects,
# built for sm_80 (mma.sync) and sm_90a (wgmma, TMA); without it plain fallbacks say why.
option(ATTNSEL_CUDA_PTXAS_VERBOSE "Print ptxas resource usage (-Xptxas -v) for the CUDA kernels" OFF)
# Source lines in the kernels (-lineinfo) let Nsight Compute and compute-sanitizer name the line
# of a sample or a fault; the code is the same without them. Debug and RelWithDebInfo builds
# always carry them; a release build, with this option (it costs a tenth of the kernels' build).
option(ATTNSEL_CUDA_LINEINFO "Compile the CUDA kernels with source line information (-lineinfo) in every build type" OFF)
set(ATTNSEL_CUDA_GENCODE_SM80 "-gencode=arch=compute_80,code=sm_80")
set(ATTNSEL_CUDA_GENCODE_SM90A "-gencode=arch=compute_90a,code=sm_90a")

# CMake 3.25 predates nvcc's C++20 flag; teach it (nvcc 12+ accepts -std=c++20).
if(ATTNSEL_HAVE_CUDA AND NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()

# The kernels layer's cuda/ folders: the device plumbing and one per attention family.
set(ATTNSEL_CUDA_KERNEL_DIRS kernels/device/cuda kernels/attention/cuda kernels/mla/cuda kernels/sparse_mla/cuda)

function(attnsel_add_cuda_kernels obj_target shared_target)
  # In each folder, *_unavailable.cpp is the build without CUDA (its entry points say why);
  # everything else needs CUDA.
  set(cu_sources "")
  set(host_sources "")
  set(fallbacks "")
  foreach(dir IN LISTS ATTNSEL_CUDA_KERNEL_DIRS)
    file(GLOB found_cu CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${dir}/*.cu)
    file(GLOB found_cpp CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${dir}/*.cpp)
    file(GLOB found_fallbacks CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${dir}/*_unavailable.cpp)
    if(found_fallbacks)
      list(REMOVE_ITEM found_cpp ${found_fallbacks})
    endif()
    list(APPEND cu_sources ${found_cu})
    list(APPEND host_sources ${found_cpp})
    list(APPEND fallbacks ${found_fallbacks})
  endforeach()
  if(NOT ATTNSEL_HAVE_CUDA)
    target_sources(${obj_target} PRIVATE ${fallbacks})
    # Outside the unity batches: each fallback names its own reason the same way.
    set_source_files_properties(${fallbacks} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
    return()
  endif()
  target_sources(${obj_target} PRIVATE ${cu_sources} ${host_sources})
  # Outside the layer's unity batches: the host files' plans hold types of their own
  # anonymous namespaces, which a batch would expose (-Wsubobject-linkage).
  set_source_files_properties(${host_sources} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
  target_compile_definitions(${obj_target} PRIVATE ATTNSEL_HAVE_CUDA=1)
  set_target_properties(${obj_target} PROPERTIES CUDA_ARCHITECTURES OFF CUDA_STANDARD 20 CUDA_STANDARD_REQUIRED ON)
  set(common --expt-relaxed-constexpr)
  if(ATTNSEL_CUDA_LINEINFO)
    list(APPEND common -lineinfo)
  else()
    list(APPEND common $<$<CONFIG:Debug,RelWithDebInfo>:-lineinfo>)
  endif()
  if(ATTNSEL_CUDA_PTXAS_VERBOSE)
    list(APPEND common -Xptxas=-v)
  endif()
  # Sources are grouped by folder and architectures: *_sm90.cu hold Hopper-only code (wgmma,
  # setmaxnreg) and build for sm_90a alone, the others for sm_80 and sm_90a.
  set(groups "")
  foreach(src IN LISTS cu_sources)
    if(src MATCHES "_sm90\\.cu$")
      set(archs sm90a)
    else()
      set(archs sm80_sm90a)
    endif()
    get_filename_component(dir ${src} DIRECTORY)
    file(RELATIVE_PATH family ${PROJECT_SOURCE_DIR}/src/kernels ${dir})
    string(REPLACE "/" "_" group "${family}_${archs}")
    list(APPEND group_${group} ${src})
    list(APPEND groups ${group})
  endforeach()
  list(REMOVE_DUPLICATES groups)
  foreach(group IN LISTS groups)
    if(group MATCHES "_sm80_sm90a$")
      set(arch ${ATTNSEL_CUDA_GENCODE_SM80} ${ATTNSEL_CUDA_GENCODE_SM90A})
    else()
      set(arch ${ATTNSEL_CUDA_GENCODE_SM90A})
    endif()
    set(compiled ${group_${group}})
    list(LENGTH compiled count)
    if(ATTNSEL_UNITY_BUILD AND count GREATER 1)
      # A unity batch, as the layers' C++ files have (CMake batches C and C++ only): nvcc
      # spends about 5 CPU-seconds of each file on the same CUDA and C++ headers, parsed for
      # the host and again for each architecture.
      set(content "")
      foreach(src IN LISTS compiled)
        string(APPEND content "#include \"${src}\"\n")
      endforeach()
      set(batch ${CMAKE_CURRENT_BINARY_DIR}/cuda_unity/${group}.cu)
      file(CONFIGURE OUTPUT ${batch} CONTENT "${content}")
      target_sources(${obj_target} PRIVATE ${batch})
      set_source_files_properties(${compiled} PROPERTIES HEADER_FILE_ONLY ON)
      set(compiled ${batch})
    endif()
    set_source_files_properties(${compiled} PROPERTIES COMPILE_OPTIONS "${arch};${common}" SKIP_UNITY_BUILD_INCLUSION ON)
  endforeach()
  # The static runtime: the library needs no libcudart.so, and loads without a driver.
  target_link_libraries(${obj_target} PUBLIC CUDA::cudart_static)
  target_link_libraries(${shared_target} PRIVATE CUDA::cudart_static)
endfunction()
